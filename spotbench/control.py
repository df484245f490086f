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
match the ledger (`_mark_silent_launches`).

A run is over when every group has stored a complete result, or at the stop tick;
pending groups of a closed run wait for the next start tick (e.g. after a budget raise).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from spotbench.auth import Caller, Forbidden
from spotbench.clouds import get_provider
from spotbench.clouds.base import ACTIVE, Cloud, ErrorKind, Instance, State
from spotbench.plan import GROUP_LABEL, RunGroup, sweep_labels
from spotbench.lease import Busy, fenced
from spotbench.ledger import MAX_LAUNCHES_PER_RUN, Launch, attributed, launches_of, note_ends
from spotbench.results import Result, ResultStore, StoreError, utcnow
from spotbench.spec import SweepSpec

log = logging.getLogger("spotbench.control")

BudgetCheck = Callable[[SweepSpec, ResultStore, list[Instance], RunGroup, datetime], "str | None"]


class BadRequest(ValueError):
    """The request body is not what the action takes (HTTP 400)."""


__all__ = ["BadRequest", "Busy", "StoreError", "Sweep", "done", "start", "stop"]


@dataclass
class Sweep:
    """Everything the control logic needs about one sweep."""

    spec: SweepSpec
    cloud: Cloud
    store: ResultStore
    groups: list[RunGroup] = field(default_factory=list)
    budget_check: BudgetCheck | None = None
    prices: str | None = None  # a CSV of price rows overriding the catalog (SPOTBENCH_PRICES)

    def __post_init__(self) -> None:
        if not self.groups:
            self.groups = self.spec.plan()
        if self.budget_check is None and self.spec.budget is not None:
            from spotbench.budget import check_budget

            self.budget_check = functools.partial(check_budget, prices=self.prices)

    @contextlib.contextmanager
    def lock(self, action: str) -> Iterator[None]:
        """The sweep's control lock: the cloud's own when it has one (the local cloud: a file
        lock beside its database), else the lease `control.lock` in the results store."""
        lock = getattr(self.cloud, "lock", None)
        with lock() if lock is not None else self.store.lease("control", holder=action) as held:
            check = getattr(held, "check", None)
            if check is None:  # an OS lock: its holder cannot lose it while alive
                yield
                return
            cloud, store = self.cloud, self.store  # fenced: a holder that lost the lease stops
            self.cloud = fenced(cloud, check, CLOUD_ACTIONS)
            self.store = fenced(store, check, STORE_ACTIONS)
            try:
                yield
            finally:
                self.cloud, self.store = cloud, store


# what changes the world: a lease holder checks it still holds the lease before each
CLOUD_ACTIONS = frozenset({"start", "stop", "terminate", "delete"})
STORE_ACTIONS = frozenset({"open_run", "close_run", "close_open_runs", "flag", "record_start",
                           "record_launch", "forget_launch"})


# ---- request bodies -------------------------------------------------------------------
class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartBody(_Body):
    tick: str | None = None  # the scheduler's time for the tick: a repeat after its run closed is ignored
    sweep: str | None = None  # when given (cloud schedulers send it), must be this sweep
    run: str | None = None  # continue only this run (the local runner's kick); closed → nothing starts


class StopBody(_Body):
    groups: list[str] | None = None  # None: every group of the sweep, and close the run; []: nothing
    reason: str = "deadline"
    sweep: str | None = None


class DoneBody(_Body):
    group: str
    # when the calling member's process started: a `done` from an earlier attempt of the
    # group (delivered late, or retried after a busy lock) must not stop a later one
    started_at: datetime | None = None


def parse_body(model: type[_Body], body: Any, sweep: str | None = None) -> Any:
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    try:
        parsed = model.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()
        )
        raise BadRequest(problems) from None
    named = getattr(parsed, "sweep", None)
    if named is not None and sweep is not None and named != sweep:
        raise BadRequest(f"this function serves sweep {sweep!r}, not {named!r}")
    return parsed


def tick_key(tick: str | None) -> str | None:
    """A scheduler tick's time as one canonical UTC string (None: not a time, no dedup)."""
    if not tick:
        return None
    try:
        when = datetime.fromisoformat(tick.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- actions ----------------------------------------------------------------------------
def start(sweep: Sweep, caller: Caller, body: Any = None, now: datetime | None = None) -> dict:
    _require(caller, "scheduler", "operator", action="start")
    req = parse_body(StartBody, body, sweep.spec.name)
    tick = tick_key(req.tick)
    with sweep.lock("start"):
        if req.run is not None:
            run = next((r for r in sweep.store.runs() if r.run == req.run), None)
            if run is None or run.closed_at is not None:
                return {"action": "start", "run": req.run, "closed": True, "started": [],
                        "running": [], "refused": [], "pending": 0, "gave_up": []}
        else:
            seen = sweep.store.run_of_tick(tick) if tick else None
            if seen is not None and seen.closed_at is not None:
                log.warning("start tick %s already ran as run %s (closed): duplicate delivery ignored",
                            tick, seen.run)
                return {"action": "start", "run": seen.run, "duplicate": True, "closed": True,
                        "started": [], "running": [], "refused": [], "pending": 0, "gave_up": []}
            run = sweep.store.open_run(now, tick=tick)
        completed, states = _completed(sweep, run.run), group_states(sweep)
        broken = _stop_broken_groups(sweep, run.run, states, completed, now)
        out = {"action": "start", "run": run.run,
               **_launch_pending(sweep, run.run, now, states=states, completed=completed)}
    return {**out, "broken": broken} if broken else out


def stop(sweep: Sweep, caller: Caller, body: Any = None, now: datetime | None = None) -> dict:
    _require(caller, "scheduler", "operator", action="stop")
    req = parse_body(StopBody, body, sweep.spec.name)
    known = {g.id for g in sweep.groups}
    unknown = sorted(set(req.groups or []) - known)
    if unknown:
        raise BadRequest(f"unknown groups for sweep {sweep.spec.name}: {', '.join(unknown)}")
    if req.groups is not None and not req.groups:
        return {"action": "stop", "reason": req.reason, "stopped": []}  # nothing asked for
    with sweep.lock("stop"):
        selectors = ([g.labels for g in sweep.groups if g.id in req.groups] if req.groups
                     else [sweep_labels(sweep.spec.name)])
        # instances first: a store that cannot be written must never keep a VM billing
        stopped = _names(inst for sel in selectors for inst in sweep.cloud.stop(sel))
        out: dict[str, Any] = {"action": "stop", "reason": req.reason, "stopped": stopped}
        if req.groups is None:
            for info in sweep.store.runs():
                if info.closed_at is None:
                    note_ends(sweep.store, info.run, {g.id for g in sweep.groups}, now)
            closed = sweep.store.close_open_runs(reason=req.reason, now=now)
            if closed:
                out["run"] = closed[-1]
                out["closed"] = True
            log.info("stop (%s): %d instances", req.reason, len(stopped))
            return out
        run = sweep.store.current_run()
        if run is not None:
            note_ends(sweep.store, run.run, set(req.groups), now)
            out["run"] = run.run
            out.update(_launch_pending(sweep, run.run, now))
    log.info("stop (%s): %d instances", req.reason, len(stopped))
    return out


def done(sweep: Sweep, caller: Caller, body: Any = None, now: datetime | None = None) -> dict:
    _require(caller, "member", action="done")
    req = parse_body(DoneBody, body)
    with sweep.lock(f"done from {caller.name}"):
        states = group_states(sweep)
        mine = next((i for insts in states.values() for i in insts if i.name == caller.name), None)
        if mine is None:
            raise Forbidden(f"instance {caller.name} is not part of sweep {sweep.spec.name}")
        _same_instance(mine, caller)
        own_group = mine.labels.get(GROUP_LABEL)
        if req.group != own_group:
            raise Forbidden(f"instance {caller.name} may stop only its own group ({own_group})")
        group = next(g for g in sweep.groups if g.id == own_group)
        run = sweep.store.current_run()
        stale = _stale_done(sweep, run.run if run else None, own_group, req.started_at)
        if stale:
            log.warning("done from %s ignored: %s", caller.name, stale)
            return {"action": "done", "group": own_group, "stopped": [], "ignored": stale}
        after = sweep.cloud.stop(group.labels)
        stopped = _names(after)
        # the group as it is now: members still stopping keep it from being restarted
        states[own_group] = [*after, *(i for i in states[own_group] if i.name not in set(stopped))]
        out: dict[str, Any] = {"action": "done", "group": own_group, "stopped": stopped}
        if run is not None:
            out["run"] = run.run
            note_ends(sweep.store, run.run, {own_group}, now)
            _flag_contaminated(sweep, run.run, now)
            out.update(_launch_pending(sweep, run.run, now, finished={own_group}, states=states))
    log.info("done from %s: stopped group %s", caller.name, own_group)
    return out


# ---- helpers ------------------------------------------------------------------------------
STALE_DONE_SKEW_S = 2.0  # clock difference tolerated between a member and the control plane


def _stale_done(sweep: Sweep, run: str | None, group: str, started_at: datetime | None) -> str | None:
    """Why a `done` comes from an earlier attempt of `group` than the one now launched (its
    member started before the group's last launch), or None."""
    if started_at is None or run is None:
        return None
    launched = sweep.store.last_launch(run, group)
    if started_at.tzinfo is None:
        started_at = started_at.replace(tzinfo=UTC)
    if launched is None or started_at >= launched - timedelta(seconds=STALE_DONE_SKEW_S):
        return None
    return (f"stale: the caller started at {started_at.isoformat()}, before the group's "
            f"latest launch at {launched.isoformat()}")


def _same_instance(instance: Instance, caller: Caller) -> None:
    """What the caller's credential proves (zone, instance id, group identity) must be the
    sweep's instance of that name, not another VM that happens to carry it."""
    if caller.zone is not None and instance.zone != caller.zone:
        raise Forbidden(f"instance {caller.name} of this token is in zone {caller.zone}; "
                        f"the sweep's is in {instance.zone}")
    if caller.instance_id is not None and instance.id != caller.instance_id:
        raise Forbidden(f"instance {caller.name} of this token has id {caller.instance_id}; "
                        f"the sweep's has {instance.id or 'no known id'}")
    own_group = instance.labels.get(GROUP_LABEL)
    if caller.group is not None and caller.group != own_group:
        raise Forbidden(f"instance {caller.name} called with the identity of group "
                        f"{caller.group}; the instance belongs to group {own_group}")


def _require(caller: Caller, *kinds: str, action: str) -> None:
    if caller.kind not in kinds:
        raise Forbidden(f"{caller.kind} {caller.name!r} may not call {action}")


def _names(instances: Any) -> list[str]:
    return sorted({i.name for i in instances})


def group_states(sweep: Sweep) -> dict[str, list[Instance]]:
    """Instances of the sweep by group id."""
    by_group: dict[str, list[Instance]] = {g.id: [] for g in sweep.groups}
    for inst in sweep.cloud.query(sweep_labels(sweep.spec.name)):
        gid = inst.labels.get(GROUP_LABEL)
        if gid in by_group:
            by_group[gid].append(inst)
    return by_group


def broken(insts: list[Instance]) -> bool:
    """Some member ended with an error (crashed, preempted) while others still run."""
    return (any(i.state in (State.PENDING, State.RUNNING) for i in insts)
            and any(i.state == State.STOPPED and i.error in (ErrorKind.CRASHED, ErrorKind.PREEMPTED)
                    for i in insts))


def _stop_broken_groups(sweep: Sweep, run: str, states: dict[str, list[Instance]],
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
            after = sweep.cloud.stop(group.labels)
            names = {i.name for i in after}
            states[gid] = [*after, *(i for i in insts if i.name not in names)]
            found.append(gid)
    if found:
        note_ends(sweep.store, run, set(found), now)
    return found


def _completed(sweep: Sweep, run: str) -> set[str]:
    return sweep.store.completed_groups(run)


def _flag_contaminated(sweep: Sweep, run: str, now: datetime | None = None) -> list[str]:
    """Flag stored attempts that ran while more groups ran than the concurrency limit. When
    each ran comes from control's ledger (launch → end), not from the records' own times:
    a group cannot make others look contaminated by writing times."""
    limit = sweep.spec.max_concurrency
    if limit is None:
        return []
    now = now or utcnow()
    flagged = []
    launches = launches_of(sweep.store, run)
    attempts = sweep.store.attempts(run)
    flags = sweep.store.flags(run)
    owners = attributed(launches, attempts)
    for a in attempts:
        mine = owners.get(a.key)
        if a.preempted or a.key in flags or mine is None:
            continue
        start, end = mine.at, mine.end(now)
        overlapping = [b for b in launches if b.group != a.group
                       and b.at < end and start < b.end(now)]
        peak = 1 + _peak(overlapping, start, end, now)
        if peak > limit:
            reason = (f"{peak} groups ran at once (max_concurrency {limit}): "
                      + ", ".join(sorted({b.group for b in overlapping})))
            log.warning("run %s: %s attempt %d contaminated: %s", run, a.group, a.attempt, reason)
            sweep.store.flag(run, a.group, a.attempt, reason)
            flagged.append(a.key)
    return flagged


def _peak(launches: list[Launch], start: datetime, end: datetime, now: datetime) -> int:
    """Most of `launches` running at one instant inside [start, end]."""
    events = sorted([(max(b.at, start), 1) for b in launches]
                    + [(min(b.end(now), end), -1) for b in launches],
                    key=lambda e: (e[0], e[1]))
    peak = current = 0
    for _, step in events:
        current += step
        peak = max(peak, current)
    return peak


def _mark_silent_launches(sweep: Sweep, run: str, group: RunGroup, insts: list[Instance],
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
                        params=group.params.model_dump(), workload=group.workload,
                        metric="preempted", value=1.0, unit="flag", cloud=sweep.spec.cloud,
                        machine_type=group.machine_type, accelerator=group.accelerator,
                        preempted=True, started_at=launched, ended_at=launched,
                        metadata={"stop_reason": why, "marker": "from the launch ledger",
                                  "members": len(group.members)})
        try:
            path = store.write_group(run, group.id, [record])
        except StoreError as exc:
            log.warning("marker for %s launch %d not stored: %s", group.id, n, exc)
            break
        log.warning("group %s launch %d stored nothing: marker %s", group.id, n, path)
        written.append(path)
        stored.add(int(path.rsplit(".", 2)[-2]))
    return written


def _record_start(sweep: Sweep, run: str, group: RunGroup, launched: list[Instance],
                  now: datetime | None) -> None:
    """The start ledger the spot-market statistics read (a member not running after the
    start is a failed start: capacity, quota, API). Never stops the sweep."""
    off = [i for i in launched if i.state not in ACTIVE]
    try:
        sweep.store.record_start(run, group.id, {
            "at": now or utcnow(), "machine_type": group.machine_type,
            "accelerator": group.accelerator,
            "zone": next((i.zone for i in launched if i.zone), sweep.spec.zone)
            or get_provider(sweep.spec.cloud).default_zone,
            "members": len(group.members),
            "failed": {i.name: i.detail or str(i.state) for i in off},
            "errors": {i.name: str(i.error) for i in off if getattr(i, "error", None)},
        })
    except Exception as exc:  # noqa: BLE001 - statistics must not break a start
        log.warning("start of %s not recorded: %s", group.id, exc)


def _launch_pending(
    sweep: Sweep, run: str, now: datetime | None, finished: set[str] = frozenset(),
    states: dict[str, list[Instance]] | None = None, completed: set[str] | None = None,
) -> dict[str, Any]:
    """Start pending groups. `states`/`completed` may be passed in when the caller already
    read them (one cloud query per request). `finished` groups (done just stopped them) do
    not hold a slot, but are restarted only once every member is stopped."""
    store = sweep.store
    completed = _completed(sweep, run) if completed is None else completed
    states = group_states(sweep) if states is None else states
    holding = {
        gid for gid, insts in states.items()
        if gid not in finished and any(i.state in ACTIVE for i in insts)
    }
    # groups whose members all ended on their own (crashed, preempted): their launch is over
    note_ends(store, run, {gid for gid, insts in states.items()
                           if not any(i.state in ACTIVE for i in insts)}, now)
    active = holding - completed
    pending = [g for g in sweep.groups if g.id not in completed | active]
    exhausted = [g.id for g in pending if store.launch_count(run, g.id) >= MAX_LAUNCHES_PER_RUN]
    pending = [g for g in pending if g.id not in exhausted]
    limit = sweep.spec.max_concurrency
    slots = len(pending) if limit is None else max(0, limit - len(holding))
    started: list[str] = []
    refused: list[dict[str, str]] = []
    unavailable: list[dict[str, Any]] = []
    running = [i for gid, insts in states.items() if gid not in finished
               for i in insts if i.state in ACTIVE]
    waiting = [g.id for g in pending if any(i.state in ACTIVE for i in states.get(g.id, []))]
    off = [g for g in pending + [g for g in sweep.groups if g.id in exhausted] if g.id not in waiting]
    if off:  # nothing of an off group's last launch can still store
        stored: dict[str, set[int]] = {}
        for a in store.attempts(run):
            stored.setdefault(a.group, set()).add(a.attempt)
        for group in off:
            _mark_silent_launches(sweep, run, group, states.get(group.id, []), stored.get(group.id, set()))
    for group in pending:
        if len(started) >= slots:
            break
        if group.id in waiting:
            continue  # still stopping: restarted whole once every member is off
        if sweep.budget_check is not None:
            reason = sweep.budget_check(sweep.spec, store, running, group, now or utcnow())
            if reason:
                log.warning("budget: group %s refused: %s", group.id, reason)
                refused.append({"group": group.id, "reason": reason})
                continue
        record = store.record_launch(run, group.id, now)  # before: a store that fails starts nothing
        launched = sweep.cloud.start(group.labels)
        _record_start(sweep, run, group, launched, now)
        failed = [i for i in launched if i.state not in ACTIVE]
        if failed:
            store.forget_launch(record)  # the cloud could not run it: not an attempt
            # all or nothing: members alone cannot measure anything and would only bill
            sweep.cloud.stop(group.labels)
            kinds = sorted({str(i.error or ErrorKind.API) for i in failed})
            log.warning("group %s not started: %s", group.id,
                        "; ".join(f"{i.member}: {i.error or 'not running'} {i.detail}" for i in failed))
            unavailable.append({"group": group.id, "error": kinds[0] if len(kinds) == 1 else kinds,
                                "members": {i.member: {"error": i.error and str(i.error),
                                                       "detail": i.detail} for i in failed}})
            continue
        running.extend(launched)
        started.append(group.id)
    remaining = len(pending) - len(started)
    if not active and not pending:
        store.close_run(run, reason="complete" if not exhausted else "gave up", now=now)
    out = {
        "started": started,
        "running": sorted(active),
        "refused": refused,
        "completed": len(completed),
        "pending": remaining,
        "gave_up": exhausted,
    }
    if unavailable:
        out["unavailable"] = unavailable
    if waiting:
        out["stopping"] = waiting
    return out
