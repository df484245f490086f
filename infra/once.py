"""`schedule: once` in the Pulumi program (issue #39): what the stack declares for one run
with nothing standing after it but the results.

- no scheduler: no Cloud Scheduler jobs, no EventBridge schedules (`spotbench run` fires
  the one start and, past the run's window, the stop);
- no VMs in the stack: the spec is `lifecycle: created` (`spotbench.spec_fields`), so only
  templates are declared; each group's VMs are made at start and deleted by its `done`;
- the results bucket is `retain_on_delete`: the `pulumi destroy` that ends the run removes
  every other resource (network and NAT, functions, identities, templates) and leaves the
  bucket and its objects in the cloud, out of the stack.
"""

from __future__ import annotations

from typing import Any

import pulumi

from spotbench.spec import SweepSpec

__all__ = ["crons_output", "kept_after_run", "scheduled"]


def scheduled(spec: SweepSpec) -> bool:
    """Whether the stack declares a scheduler (every spec but `schedule: once`)."""
    return not spec.run_once


def kept_after_run(spec: SweepSpec, opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
    """The results bucket's options: with `schedule: once`, kept by `pulumi destroy`."""
    if not spec.run_once:
        return opts
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True))


def crons_output(spec: SweepSpec, crons: dict[str, Any] | None) -> dict[str, Any]:
    """The stack's `crons` output: the pair's crons, or `{"mode": "once"}`."""
    if spec.run_once or crons is None:
        return {"mode": "once", "start": None, "stop": None, "time_zone": None}
    return crons
