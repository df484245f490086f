"""`schedule: once` in the Pulumi program (issue #39): what the stack declares for one run
with nothing standing after it but the results.

- no scheduler: no Cloud Scheduler jobs, no EventBridge schedules (`spotbench run` fires
  the one start and, past the run's window, the stop);
- no VMs in the stack: the spec is `lifecycle: created` (`spotbench.spec.fields`), so only
  templates are declared; each group's VMs are made at start and deleted by its `done`;
- the results bucket is `retain_on_delete`: the `pulumi destroy` that ends the run removes
  every other resource (network and NAT, functions, identities, templates) and leaves the
  bucket and its objects in the cloud, out of the stack.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi

from spotbench.spec import SweepSpec

__all__ = ["crons_of", "crons_output", "kept_after_run", "scheduled"]


def scheduled(spec: SweepSpec) -> bool:
    """Whether the stack declares a scheduler (every spec but `schedule: once`)."""
    return not spec.run_once


def kept_after_run(spec: SweepSpec, opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
    """The results bucket's options: with `schedule: once`, kept by `pulumi destroy`."""
    if not spec.run_once:
        return opts
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True))


def crons_of(spec: SweepSpec, pair: Callable[[SweepSpec], tuple[str, ...]]) -> tuple[str, ...] | None:
    """The scheduler's crons (`pair(spec)`, which refuses a bad schedule), None with once."""
    return pair(spec) if scheduled(spec) else None


def crons_output(spec: SweepSpec, crons: tuple[str, ...] | None,
                 names: tuple[str, ...] = ("start", "stop")) -> dict[str, Any]:
    """The stack's `crons` output: the pair's values by `names` and the time zone, or
    `{"mode": "once"}` (no scheduler)."""
    if crons is None:
        return {"mode": "once", "start": None, "stop": None, "time_zone": None}
    schedule = spec.cron_schedule
    return {**dict(zip(names, crons)), "time_zone": schedule.timezone if schedule else "UTC"}
