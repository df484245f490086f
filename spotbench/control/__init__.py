"""Start, stop and done: the sweep's control logic, as plain functions over a Cloud.

No HTTP here: `functions/` adapts these to functions-framework and Lambda, after it has
authenticated the caller. Every action is idempotent, because schedulers deliver at
least once:

- `start` (scheduler tick): opens a run (or reuses the open one) and starts pending
  groups, as many as `spec.max_concurrency` allows and the budget admits. A tick whose
  time already opened a run that is now closed is a duplicate delivery: nothing starts.
  With `run` in the body (the local runner's kick) it only continues that run.
- `done` (a member VM, after storing its results): stops exactly the caller's group, then
  starts the next pending group of the open run.
- `stop` (deadline tick, or the local runner's per-group deadline): stops the given
  groups, or every running group of the sweep and closes every open run.

Every action holds the sweep's control lock from reading the state to acting on it, so two
calls never both see a free slot: the cloud's own (`Cloud.lock`: the local cloud's file lock),
else a lease in the results store (`ResultStore.lease`, conditional writes to
`control.lock`) shared by every function instance; a call that cannot get it in time raises
`Busy` (the functions answer 503 + Retry-After). A group starts only
when none of its members is still running or stopping (a group that is stopping is never
half-restarted), and only as a whole: if the cloud cannot run one member (capacity, quota)
the members that did start are stopped again and the group stays pending. A group whose
member ended with an error while the others run is broken: the next action stops it.
Stored attempts that ran while more groups ran than `max_concurrency` allows are flagged
contaminated: they do not count as complete and the report leaves them out. When an attempt
ran is control's own ledger (`spotbench.ledger`: its launch, and the end control recorded when
it stopped the group or first saw it stopped), never the times inside the group's records.

Every launch is an attempt that says why it ended: a launch that stored nothing (its
launcher SIGKILLed, crashed, or its VM lost) gets a marker record from the launch ledger
once its group is off, before the group is launched again, so attempt numbers in file names
match the ledger (`launch.mark_silent_launches`).

A run is over when every group has stored a complete result, or at the stop tick;
pending groups of a closed run wait for the next start tick (e.g. after a budget raise).

The package, one job per module: `sweep` (what control knows of a sweep, and its lock),
`bodies` (request bodies), `actions` (start, stop, done), `groups` (where each group stands),
`launch` (starting pending groups whole), `zones` (the candidate zones' order, its history
read once per call), `contamination` (attempts that overran the limit), `search` (a search's
loop: tell finished trials, prune, ask a trial as its group starts; issue #35).
"""

from __future__ import annotations

from spotbench.control.actions import done, start, stop
from spotbench.control.bodies import BadRequest, DoneBody, StartBody, StopBody, parse_body, tick_key
from spotbench.control.groups import broken, group_states
from spotbench.control.launch import MAX_LAUNCHES_PER_RUN
from spotbench.control.sweep import CLOUD_ACTIONS, STORE_ACTIONS, BudgetCheck, Sweep
from spotbench.lease import Busy
from spotbench.results import StoreError

__all__ = ["BadRequest", "Busy", "StoreError", "Sweep", "done", "start", "stop",
           "BudgetCheck", "CLOUD_ACTIONS", "STORE_ACTIONS", "DoneBody", "StartBody", "StopBody",
           "parse_body", "tick_key", "broken", "group_states", "MAX_LAUNCHES_PER_RUN"]
