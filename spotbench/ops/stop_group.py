"""`spotbench stop SPEC GROUP`: stop one group now, as the user's decision.

Control's own `stop` does it (under the sweep's control lock, as the functions would):
the group's instances are stopped, its launch gets its end in the ledger, and the run
notes it as stopped by the user (`runs/<run>/stopped/<group>.json`), so the group counts
as done for the run: not preempted, not retried. Its members store what they measured
(their SIGTERM path), marked preempted as any attempt cut short is.
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

from spotbench import control
from spotbench.auth import Caller
from spotbench.clouds import get_provider
from spotbench.control.actions import USER_STOP
from spotbench.ops.context import cloud_for, results_url_for
from spotbench.ops.logs import group_of
from spotbench.results import ResultStore
from spotbench.spec import SweepSpec


def stop_group(spec: SweepSpec, group_id: str, *, results: str | None = None,
               root: Path | str | None = None, who: str | None = None) -> dict[str, Any]:
    """Stop `group_id` of the sweep (its id from `spotbench plan`/`status`); control's answer."""
    provider = get_provider(spec.cloud)
    store = ResultStore(results_url_for(spec, results), lease_objects=provider.lease_objects)
    sweep = control.Sweep(spec=spec, cloud=cloud_for(spec, root), store=store)
    group_of(sweep.groups, group_id)  # an unknown id: the error lists the known ones
    caller = Caller("operator", who or _user())
    return control.stop(sweep, caller, {"groups": [group_id], "reason": USER_STOP})


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid (a container)
        return "user"
