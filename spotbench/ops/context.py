"""How an operations command reaches a sweep: its Cloud driver, local state and results.

Connection settings are the functions' (each provider reads them, see
`spotbench.clouds.provider`): `SPOTBENCH_GCP_PROJECT`, `SPOTBENCH_GCP_API_ENDPOINT`,
`AWS_ENDPOINT_URL`, `SPOTBENCH_GRACE_S`, and the local state root `SPOTBENCH_STATE_ROOT`
(default `.spotbench`).
"""

from __future__ import annotations

import os
from pathlib import Path

from spotbench._private import private_dir
from spotbench.clouds import Cloud, get_provider
from spotbench.clouds.provider import state_root
from spotbench.results import ResultStore
from spotbench.spec import SweepSpec

__all__ = ["cloud_for", "results_for", "results_url_for", "state_root", "sweep_dir"]


def sweep_dir(sweep: str, root: Path | str | None = None) -> Path:
    """The sweep's folder under the operator's state root (0700; a local sweep's state, the
    host keys a stack recorded: `known_hosts`)."""
    return private_dir(state_root(root) / sweep)


def cloud_for(spec: SweepSpec, root: Path | str | None = None) -> Cloud:
    """The Cloud driver the sweep runs on, configured as the functions configure it."""
    return get_provider(spec.cloud).cloud(spec, root=root)


def results_url_for(spec: SweepSpec, url: str | None = None) -> str:
    """Where the sweep's results are: `url`, else `SPOTBENCH_RESULTS_URL`, else where the
    sweep's cloud puts them (a gcp stack's bucket; the spec's `results`; a local folder for
    local sweeps). Raises SettingMissing, saying what to pass, when only the deployed stack
    knows. Touches no storage (no SDK imported, no credentials asked)."""
    return url or os.environ.get("SPOTBENCH_RESULTS_URL") or get_provider(spec.cloud).results_url(spec)


def results_for(spec: SweepSpec, url: str | None = None) -> ResultStore:
    """The sweep's results store (`results_url_for`)."""
    return ResultStore(results_url_for(spec, url))
