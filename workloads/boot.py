"""What a member checks as it boots, before it measures: whether a run is open for it
(`exit_if_outside_run`: a cloud VM booted outside a run powers off) and which parameters
its trial has (`trial_context`: a search's control assigns them)."""

from __future__ import annotations

import logging
import os
import sys
from datetime import datetime

from spotbench.member import EXIT_OUTSIDE_RUN, MemberContext
from spotbench.results import ResultStore, StoreError, utcnow

log = logging.getLogger("spotbench.workload")


def trial_context(ctx: MemberContext) -> MemberContext:
    """`ctx` with the parameters control asked for this group's trial when an adaptive search
    started it (`assigned` in the run's ledger entry, which every member reads, as
    `exit_if_outside_run` does), else `ctx`. Every member of the group calls it before
    reading its params (a parameter server's and a worker's batch size and learning rate are
    the trial's too). A store that cannot be read is logged: the plan's params stay."""
    store = ResultStore(ctx.results_url)
    try:
        run = os.environ.get("SPOTBENCH_RUN") or getattr(store.current_run(), "run", None)
        assigned = store.assignment(run, ctx.group) if run else None
    except (StoreError, OSError) as exc:
        log.error("the trial's parameters could not be read (%s): the plan's are used", exc)
        return ctx
    return ctx if assigned is None else ctx.model_copy(update={"params": assigned})


def exit_if_outside_run(ctx: MemberContext, now: datetime | None = None) -> None:
    """On a cloud VM, leave at once when no run is open or the run's deadline has passed.

    GCE boots every VM once at creation, EC2 restarts a persistent spot instance whenever
    capacity returns: the workload then starts with nothing to do. It writes nothing and
    exits with `EXIT_OUTSIDE_RUN`; the VM's unit powers the VM off. Inside a run, the run's
    id goes to `SPOTBENCH_RUN` (what `WorkloadRun` records under). Local members are
    started by the runner inside a run and are not checked.
    """
    if not ctx.boots_outside_runs:
        return
    store = ResultStore(ctx.results_url)
    run = store.current_run()
    now = now or utcnow()
    why = None
    if run is None:
        why = "no run is open (a boot outside the schedule: creation, or a capacity restart)"
    elif ctx.deadline_s and (now - run.opened_at).total_seconds() > ctx.deadline_s:
        why = (f"run {run.run} opened at {run.opened_at:%Y-%m-%d %H:%M:%S} is past the "
               f"group's deadline ({ctx.deadline_s} s)")
    if why:
        log.warning("%s: %s; stopping this VM without running", ctx.name, why)
        logging.shutdown()
        sys.exit(EXIT_OUTSIDE_RUN)
    os.environ["SPOTBENCH_RUN"] = run.run
