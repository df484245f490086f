"""How an operations command reaches a sweep: its Cloud driver, local state and results.

Connection settings mirror the functions' (`functions/_app.py`): `SPOTBENCH_GCP_PROJECT`,
`SPOTBENCH_GCP_API_ENDPOINT`, `AWS_ENDPOINT_URL`, `SPOTBENCH_GRACE_S`, and the local state
root `SPOTBENCH_STATE_ROOT` (default `.spotbench`).
"""

from __future__ import annotations

import os
from pathlib import Path

from spotbench.clouds import Cloud, get_cloud
from spotbench.localrun.state import LocalState
from spotbench.results import ResultStore
from spotbench.spec import SweepSpec


def state_root(root: Path | str | None = None) -> Path:
    return Path(root or os.environ.get("SPOTBENCH_STATE_ROOT", ".spotbench")).resolve()


def local_state(sweep: str, root: Path | str | None = None) -> LocalState:
    return LocalState(sweep, root=state_root(root))


def gcp_project(spec: SweepSpec | None = None) -> str:
    project = os.environ.get("SPOTBENCH_GCP_PROJECT") or (spec.gcp.project if spec else None)
    project = project or os.environ.get("GOOGLE_CLOUD_PROJECT")
    if not project:
        raise ValueError(
            "no GCP project: set gcp.project in the spec or SPOTBENCH_GCP_PROJECT in the environment"
        )
    return project


def gcp_region(spec: SweepSpec) -> str:
    """The sweep's region: `region`, else the zone without its last part (us-central1-a →
    us-central1)."""
    if spec.region:
        return spec.region
    if spec.zone:
        return spec.zone.rsplit("-", 1)[0]
    raise ValueError(f"{spec.name}: give 'region' or 'zone' in the spec")


def cloud_for(spec: SweepSpec, root: Path | str | None = None) -> Cloud:
    """The Cloud driver the sweep runs on, configured as the functions configure it."""
    if spec.cloud == "local":
        state = local_state(spec.name, root)
        return get_cloud(
            "local",
            db_path=state.db_path,
            grace_s=float(os.environ.get("SPOTBENCH_GRACE_S", "30")),
            log_dir=state.dir / "logs",
        )
    if spec.cloud == "gcp":
        return get_cloud(
            "gcp",
            project=gcp_project(spec),
            zones=[spec.zone],
            api_endpoint=os.environ.get("SPOTBENCH_GCP_API_ENDPOINT") or None,
        )
    return get_cloud("aws", region=spec.region, endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None)


def results_for(spec: SweepSpec, url: str | None = None) -> ResultStore:
    return ResultStore(url or os.environ.get("SPOTBENCH_RESULTS_URL") or spec.results_url())
