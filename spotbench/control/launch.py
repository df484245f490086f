"""Starting a run's pending groups, each whole or not at all, within `max_concurrency`,
the budget and `MAX_LAUNCHES_PER_RUN`; a launch that stored nothing gets a marker attempt
once its group is off; every start request is noted for the spot-market statistics.

    survey (where the groups stand) → markers for silent launches of off groups
    → start pending groups into the free slots → close the run when nothing is left
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from spotbench.clouds.base import ACTIVE, ErrorKind, Instance
from spotbench.control.groups import completed_groups, group_states
from spotbench.control.search import SearchLoop
from spotbench.control.sweep import Sweep
from spotbench.control.zones import ZoneOrder, preempted_zones
from spotbench.facts import facts_of
from spotbench.ledger import MAX_LAUNCHES_PER_RUN, note_ends
from spotbench.plan import RunGroup
from spotbench.results import Result, StartRecord, StoreError, utcnow

log = logging.getLogger("spotbench.control")



def _active(insts: list[Instance]) -> bool:
    return any(i.state in ACTIVE for i in insts)


@dataclass
class Survey:
    """Where a run's groups stand before a launch pass."""

    completed: set[str]
    holding: set[str]  # groups with a member running (not just finished): each takes a slot
    active: set[str]  # holding and not complete
    pending: list[RunGroup]  # neither complete nor active, launched fewer than the limit
    exhausted: list[str]  # launched MAX_LAUNCHES_PER_RUN times: given up
    waiting: list[str]  # pending but still stopping: restarted whole once every member is off
    running: list[Instance]  # every running instance outside `finished`
    slots: int  # how many pending groups may start now


def survey(sweep: Sweep, run: str, states: dict[str, list[Instance]], completed: set[str],
           finished: set[str]) -> Survey:
    holding = {gid for gid, insts in states.items() if gid not in finished and _active(insts)}
    active = holding - completed
    candidates = [g for g in sweep.groups if g.id not in completed | active]
    exhausted = [g.id for g in candidates
                 if sweep.store.launch_count(run, g.id) >= MAX_LAUNCHES_PER_RUN]
    pending = [g for g in candidates if g.id not in exhausted]
    limit = sweep.spec.max_concurrency
    return Survey(
        completed=completed, holding=holding, active=active, pending=pending,
        exhausted=exhausted,
        waiting=[g.id for g in pending if _active(states.get(g.id, []))],
        running=[i for gid, insts in states.items() if gid not in finished
                 for i in insts if i.state in ACTIVE],
        slots=len(pending) if limit is None else max(0, limit - len(holding)),
    )


@dataclass
class Outcome:
    """What a launch pass did."""

    started: list[str] = field(default_factory=list)
    refused: list[dict[str, str]] = field(default_factory=list)  # the budget said no
    unavailable: list[dict[str, Any]] = field(default_factory=list)  # the cloud could not run it


def launch_pending(
    sweep: Sweep, run: str, now: datetime | None, finished: set[str] = frozenset(),
    states: dict[str, list[Instance]] | None = None, completed: set[str] | None = None,
) -> dict[str, Any]:
    """Start pending groups. `states`/`completed` may be passed in when the caller already
    read them (one cloud query per request). `finished` groups (done just stopped them) do
    not hold a slot, but are restarted only once every member is stopped."""
    completed = completed_groups(sweep, run) if completed is None else completed
    states = group_states(sweep) if states is None else states
    # groups whose members all ended on their own (crashed, preempted): their launch is over
    note_ends(sweep.store, run, {gid for gid, insts in states.items() if not _active(insts)}, now)
    seen = survey(sweep, run, states, completed, finished)
    loop = SearchLoop.of(sweep, run, now)
    if loop is not None:  # tell what ended, stop what the pruner stops, then ask as slots free
        loop.prune(states)
        gave_up = seen.exhausted  # a given-up trial is told FAIL (settled), still said so
        settled = loop.settle(completed, set(gave_up))
        seen = survey(sweep, run, states, completed | settled, finished)
        seen.exhausted = sorted(set(seen.exhausted) | set(gave_up))
    _mark_off_groups(sweep, run, seen, states)
    done = _start_pending(sweep, run, seen, now, states, ZoneOrder(sweep, now), loop)
    if not seen.active and not seen.pending:
        sweep.store.close_run(run, reason="complete" if not seen.exhausted else "gave up", now=now)
    out = _answer(seen, done)
    return {**out, "pruned": loop.pruned} if loop is not None and loop.pruned else out


def _answer(seen: Survey, done: Outcome) -> dict[str, Any]:
    out: dict[str, Any] = {
        "started": done.started,
        "running": sorted(seen.active),
        "refused": done.refused,
        "completed": len(seen.completed),
        "pending": len(seen.pending) - len(done.started),
        "gave_up": seen.exhausted,
    }
    if done.unavailable:
        out["unavailable"] = done.unavailable
    if seen.waiting:
        out["stopping"] = seen.waiting
    return out


def _mark_off_groups(sweep: Sweep, run: str, seen: Survey, states: dict[str, list[Instance]]) -> None:
    """Marker attempts for the silent launches of every pending or exhausted group that is
    off: nothing of its last launch can still store."""
    off = [g for g in seen.pending + [g for g in sweep.groups if g.id in seen.exhausted]
           if g.id not in seen.waiting]
    if not off:
        return
    stored: dict[str, set[int]] = {}
    for a in sweep.store.launched_attempts(run, sweep.store.launch_counts(run)):
        stored.setdefault(a.group, set()).add(a.attempt)
    for group in off:
        mark_silent_launches(sweep, run, group, states.get(group.id, []), stored.get(group.id, set()))


def _start_pending(sweep: Sweep, run: str, seen: Survey, now: datetime | None,
                   states: dict[str, list[Instance]], zones: ZoneOrder,
                   loop: SearchLoop | None = None) -> Outcome:
    """`zones`: this tick's zone ordering (the history is read once, for every group);
    `loop`: a search's, which asks each trial once the budget admitted its group."""
    done = Outcome()
    for group in seen.pending:
        if len(done.started) >= seen.slots:
            break
        if group.id in seen.waiting:
            continue  # still stopping: restarted whole once every member is off
        reason = _budget_refusal(sweep, seen.running, group, now)
        if reason:
            done.refused.append({"group": group.id, "reason": reason})
            continue
        if loop is not None:
            loop.ask(group)
        failed = _start_whole(sweep, run, group, seen.running, now, zones, states.get(group.id, []))
        if failed:
            done.unavailable.append(failed)
            continue
        done.started.append(group.id)
    return done


def _budget_refusal(sweep: Sweep, running: list[Instance], group: RunGroup,
                    now: datetime | None) -> str | None:
    if sweep.budget_check is None:
        return None
    reason = sweep.budget_check(sweep.spec, sweep.store, running, group, now or utcnow())
    if reason:
        log.warning("budget: group %s refused: %s", group.id, reason)
    return reason


def _start_whole(sweep: Sweep, run: str, group: RunGroup, running: list[Instance],
                 now: datetime | None, zones: ZoneOrder,
                 insts: Sequence[Instance] = ()) -> dict[str, Any] | None:
    """Start every member of `group` (then they join `running`), or none: what the cloud
    could not run, as the answer's `unavailable` entry. In the created lifecycle the cloud
    is given the candidate zones, the one with the best history first (`insts`: the group's
    members as they are now, e.g. preempted in a zone), and each zone it was refused in on
    the way is noted in the start ledger too. The zone a member was preempted in goes to
    the start record (`preempted_zone`), so later orderings count it."""
    store = sweep.store
    record = store.record_launch(run, group.id, now)  # before: a store that fails starts nothing
    if sweep.spec.lifecycle == "created":
        launched = sweep.cloud.start(group.labels, zones=zones.order(group, insts))
        for refused in _refusals(sweep.cloud):
            zones.note(_record_start(sweep, run, group, refused, now))
    else:
        launched = sweep.cloud.start(group.labels)
    preempted = preempted_zones(insts)
    zones.note(_record_start(sweep, run, group, launched, now, preempted[0] if preempted else None))
    failed = [i for i in launched if i.state not in ACTIVE]
    if not failed:
        running.extend(launched)
        return None
    store.forget_launch(record)  # the cloud could not run it: not an attempt
    # all or nothing: members alone cannot measure anything and would only bill
    sweep.cloud.stop(group.labels)
    kinds = sorted({str(i.error or ErrorKind.API) for i in failed})
    log.warning("group %s not started: %s", group.id,
                "; ".join(f"{i.member}: {i.error or 'not running'} {i.detail}" for i in failed))
    return {"group": group.id, "error": kinds[0] if len(kinds) == 1 else kinds,
            "members": {i.member: {"error": i.error and str(i.error), "detail": i.detail}
                        for i in failed}}


def _refusals(cloud: object) -> list[list[Instance]]:
    """What a created-lifecycle driver was refused in each zone it asked before the answer
    of its last `start` (`Cloud.last_refusals`, optional): one list of members per zone."""
    refusals = getattr(cloud, "last_refusals", None)
    return [list(r) for r in refusals] if isinstance(refusals, list) else []


def mark_silent_launches(sweep: Sweep, run: str, group: RunGroup, insts: list[Instance],
                         stored: set[int]) -> list[str]:
    """Launches of `group` (now off) that stored nothing get a marker attempt: preempted, one
    `preempted` flag record saying why it ended (the members' last words when known), started
    at its launch time and zero long (its end is unknown: it never overlaps another attempt
    in the contamination check)."""
    store = sweep.store
    if store.launch_count(run, group.id) <= len(stored):
        return []
    launches = store.launches(run, group.id)
    written = []
    for n, launched in enumerate(launches, start=1):
        if n in stored:
            continue
        last = n == len(launches)
        words = "; ".join(f"{i.member}: {i.error or i.state.value.lower()}"
                          f"{' (' + i.detail + ')' if i.detail else ''}" for i in insts) if last else ""
        why = f"ended without storing a result{': ' + words if words else ''}"
        record = Result(sweep=sweep.spec.name, run=run, group=group.id, trial=group.trial,
                        params=group.record_params, workload=group.workload,
                        metric="preempted", value=1.0, unit="flag", cloud=sweep.spec.cloud,
                        machine_type=group.machine_type, accelerator=group.accelerator,
                        preempted=True, started_at=launched, ended_at=launched,
                        metadata={"stop_reason": why, "marker": "from the launch ledger",
                                  "members": len(group.members)})
        try:
            path = store.write_group(run, group.id, [record], attempt=n)
        except StoreError as exc:
            log.warning("marker for %s launch %d not stored: %s", group.id, n, exc)
            break
        log.warning("group %s launch %d stored nothing: marker %s", group.id, n, path)
        written.append(path)
        stored.add(n)
    return written


def _record_start(sweep: Sweep, run: str, group: RunGroup, launched: list[Instance],
                  now: datetime | None, preempted_zone: str | None = None) -> StartRecord | None:
    """The start ledger the spot-market statistics and the zone ordering read (a member not
    running after the start is a failed start: capacity, quota, API; `preempted_zone`: where
    the group's previous attempt was preempted). Never stops the sweep: None when not noted."""
    off = [i for i in launched if i.state not in ACTIVE]
    try:
        return sweep.store.record_start(run, group.id, {
            "at": now or utcnow(), "machine_type": group.machine_type,
            "accelerator": group.accelerator,
            "zone": next((i.zone for i in launched if i.zone), None)
            or sweep.spec.first_zone or facts_of(sweep.spec.cloud).default_zone,
            "members": len(group.members),
            "failed": {i.name: i.detail or str(i.state) for i in off},
            "errors": {i.name: str(i.error) for i in off if getattr(i, "error", None)},
            "preempted_zone": preempted_zone,
        })
    except Exception as exc:  # noqa: BLE001 - statistics must not break a start
        log.warning("start of %s not recorded: %s", group.id, exc)
        return None

