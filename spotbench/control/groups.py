"""Where each group of a sweep stands on the cloud: its instances, whether it is broken
(a member ended with an error while others run), and stopping the broken ones."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime

from spotbench.clouds.base import ErrorKind, Instance, State
from spotbench.control.sweep import Sweep
from spotbench.ledger import note_ends
from spotbench.plan import GROUP_LABEL, sweep_labels

log = logging.getLogger("spotbench.control")


def group_states(sweep: Sweep) -> dict[str, list[Instance]]:
    """Instances of the sweep by group id."""
    by_group: dict[str, list[Instance]] = {g.id: [] for g in sweep.groups}
    for inst in sweep.cloud.query(sweep_labels(sweep.spec.name)):
        gid = inst.labels.get(GROUP_LABEL)
        if gid in by_group:
            by_group[gid].append(inst)
    return by_group


def broken(insts: list[Instance]) -> bool:
    """Some member ended with an error (crashed, preempted) while others still run. A
    preempted member may be stopped (GCE; EC2 interruption behaviour stop) or gone (EC2's
    created lifecycle: a fleet's spot instance is terminated on interruption)."""
    return (any(i.state in (State.PENDING, State.RUNNING) for i in insts)
            and any((i.state == State.STOPPED and i.error in (ErrorKind.CRASHED, ErrorKind.PREEMPTED))
                    or (i.state == State.TERMINATED and i.error == ErrorKind.PREEMPTED)
                    for i in insts))


def stop_broken_groups(sweep: Sweep, run: str, states: dict[str, list[Instance]],
                       completed: set[str], now: datetime | None) -> list[str]:
    """Stop groups that lost a member (the survivors cannot finish alone and would bill until
    the deadline; the group is retried whole once all its members are stopped), and groups
    that stored a complete result but are still running (their `done` was lost)."""
    found = []
    for gid, insts in states.items():
        stale = gid in completed and any(i.state in (State.PENDING, State.RUNNING) for i in insts)
        if broken(insts) or stale:
            group = next(g for g in sweep.groups if g.id == gid)
            if stale:
                log.warning("group %s is complete but still running (its done was lost): stopping it", gid)
            else:
                lost = ", ".join(f"{i.member} ({i.error})" for i in insts if i.error)
                log.warning("group %s lost a member (%s): stopping the rest", gid, lost)
            after = _keep_errors(sweep.cloud.stop(group.labels), insts)
            names = {i.name for i in after}
            states[gid] = [*after, *(i for i in insts if i.name not in names)]
            found.append(gid)
    if found:
        note_ends(sweep.store, run, set(found), now)
    return found


def _keep_errors(after: list[Instance], before: list[Instance]) -> list[Instance]:
    """`after` (the members as stop left them), each still saying why it had ended before
    (preempted in its zone: the created lifecycle's stop deletes it, and the next start asks
    that zone later)."""
    was = {i.name: i for i in before if i.error is not None}
    return [replace(i, error=was[i.name].error, detail=was[i.name].detail,
                    zone=i.zone or was[i.name].zone)
            if i.error is None and i.name in was else i for i in after]


def completed_groups(sweep: Sweep, run: str) -> set[str]:
    """Groups done for the run: a complete result stored, from the attempts of control's own
    launches only (what control reads of a run is bounded by its ledger:
    `ResultStore.launched_attempts`), or stopped by a user (`spotbench stop`: not preempted,
    never retried in the run)."""
    store = sweep.store
    return store.completed_groups(run, store.launch_counts(run)) | set(store.user_stopped(run))

