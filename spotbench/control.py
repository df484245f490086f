"""Start, stop and done: the sweep's control logic, as plain functions over a Cloud.

No HTTP here: `functions/` adapts these to functions-framework and Lambda, after it has
authenticated the caller. Every action is idempotent, because schedulers deliver at
least once:

- `start` (scheduler tick): opens a run (or reuses the open one) and starts pending
  groups, as many as `spec.max_concurrency` allows and the budget admits.
- `done` (a member VM, after storing its results): stops exactly the caller's group, then
  starts the next pending group of the open run.
- `stop` (deadline tick, or the local runner's per-group deadline): stops the given
  groups, or every running group of the sweep and closes the run.

A run is over when every group has stored a complete result, or at the stop tick;
pending groups of a closed run wait for the next start tick (e.g. after a budget raise).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from spotbench.auth import Caller, Forbidden
from spotbench.clouds import get_provider
from spotbench.clouds.base import ACTIVE, Cloud, Instance, State
from spotbench.plan import GROUP_LABEL, RunGroup, sweep_labels
from spotbench.results import ResultStore, utcnow
from spotbench.spec import SweepSpec

log = logging.getLogger("spotbench.control")

MAX_LAUNCHES_PER_RUN = 3  # a group that keeps failing is not restarted forever

BudgetCheck = Callable[[SweepSpec, ResultStore, list[Instance], RunGroup, datetime], "str | None"]


class BadRequest(ValueError):
    """The request body is not what the action takes (HTTP 400)."""


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


# ---- request bodies -------------------------------------------------------------------
class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartBody(_Body):
    tick: str | None = None  # the scheduler's time for the tick (informational)
    sweep: str | None = None  # when given (cloud schedulers send it), must be this sweep


class StopBody(_Body):
    groups: list[str] | None = None  # None: every group of the sweep, and close the run
    reason: str = "deadline"
    sweep: str | None = None


class DoneBody(_Body):
    group: str


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


# ---- actions ----------------------------------------------------------------------------
def start(sweep: Sweep, caller: Caller, body: Any = None, now: datetime | None = None) -> dict:
    _require(caller, "scheduler", "operator", action="start")
    parse_body(StartBody, body, sweep.spec.name)
    run = sweep.store.open_run(now)
    completed, states = sweep.store.completed_groups(run.run), group_states(sweep)
    resumed = _restart_partial_groups(sweep, states, completed)
    out = {"action": "start", "run": run.run,
           **_launch_pending(sweep, run.run, now, states=states, completed=completed)}
    return {**out, "resumed": resumed} if resumed else out


def stop(sweep: Sweep, caller: Caller, body: Any = None, now: datetime | None = None) -> dict:
    _require(caller, "scheduler", "operator", action="stop")
    req = parse_body(StopBody, body, sweep.spec.name)
    known = {g.id for g in sweep.groups}
    unknown = sorted(set(req.groups or []) - known)
    if unknown:
        raise BadRequest(f"unknown groups for sweep {sweep.spec.name}: {', '.join(unknown)}")
    selectors = [g.labels for g in sweep.groups if g.id in req.groups] if req.groups else [
        sweep_labels(sweep.spec.name)
    ]
    stopped = _names(inst for sel in selectors for inst in sweep.cloud.stop(sel))
    out: dict[str, Any] = {"action": "stop", "reason": req.reason, "stopped": stopped}
    run = sweep.store.current_run()
    if run is None:
        return out
    out["run"] = run.run
    if req.groups is None:
        sweep.store.close_run(run.run, reason=req.reason, now=now)
        out["closed"] = True
    else:
        out.update(_launch_pending(sweep, run.run, now))
    log.info("stop (%s): %d instances", req.reason, len(stopped))
    return out


def done(sweep: Sweep, caller: Caller, body: Any = None, now: datetime | None = None) -> dict:
    _require(caller, "member", action="done")
    req = parse_body(DoneBody, body)
    states = group_states(sweep)
    mine = next((i for insts in states.values() for i in insts if i.name == caller.name), None)
    if mine is None:
        raise Forbidden(f"instance {caller.name} is not part of sweep {sweep.spec.name}")
    _same_instance(mine, caller)
    own_group = mine.labels.get(GROUP_LABEL)
    if req.group != own_group:
        raise Forbidden(f"instance {caller.name} may stop only its own group ({own_group})")
    group = next(g for g in sweep.groups if g.id == own_group)
    stopped = _names(sweep.cloud.stop(group.labels))
    out: dict[str, Any] = {"action": "done", "group": own_group, "stopped": stopped}
    run = sweep.store.current_run()
    if run is not None:
        out["run"] = run.run
        out.update(_launch_pending(sweep, run.run, now, finished={own_group}, states=states))
    log.info("done from %s: stopped group %s", caller.name, own_group)
    return out


# ---- helpers ------------------------------------------------------------------------------
def _same_instance(instance: Instance, caller: Caller) -> None:
    """What the caller's credential proves (zone, instance id) must be the sweep's instance
    of that name, not another VM that happens to carry it."""
    if caller.zone is not None and instance.zone != caller.zone:
        raise Forbidden(f"instance {caller.name} of this token is in zone {caller.zone}; "
                        f"the sweep's is in {instance.zone}")
    if caller.instance_id is not None and instance.id != caller.instance_id:
        raise Forbidden(f"instance {caller.name} of this token has id {caller.instance_id}; "
                        f"the sweep's has {instance.id or 'no known id'}")


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


def _restart_partial_groups(sweep: Sweep, states: dict[str, list[Instance]],
                            completed: set[str]) -> list[str]:
    """Groups running with some member still off (e.g. a capacity error at the last tick):
    ask again for the missing members; members already running are left alone."""
    resumed = []
    for gid, insts in states.items():
        states = {i.state for i in insts}
        if gid not in completed and states & {State.PENDING, State.RUNNING} and State.STOPPED in states:
            group = next(g for g in sweep.groups if g.id == gid)
            sweep.cloud.start(group.labels)
            resumed.append(gid)
    return resumed


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
    read them (one cloud query per request); states of `finished` groups are not used."""
    store = sweep.store
    completed = store.completed_groups(run) if completed is None else completed
    states = group_states(sweep) if states is None else states
    # `finished`: groups whose stop was just asked for (done) — not active any more; pending
    # again unless they stored a complete result (a preempted attempt is retried)
    active = {
        gid for gid, insts in states.items()
        if gid not in completed and gid not in finished
        and any(i.state in ACTIVE for i in insts)
    }
    pending = [g for g in sweep.groups if g.id not in completed | active]
    exhausted = [g.id for g in pending if store.launch_count(run, g.id) >= MAX_LAUNCHES_PER_RUN]
    pending = [g for g in pending if g.id not in exhausted]
    limit = sweep.spec.max_concurrency
    slots = len(pending) if limit is None else max(0, limit - len(active))
    started: list[str] = []
    refused: list[dict[str, str]] = []
    running = [i for gid, insts in states.items() if gid not in finished
               for i in insts if i.state in ACTIVE]
    for group in pending:
        if len(started) >= slots:
            break
        if sweep.budget_check is not None:
            reason = sweep.budget_check(sweep.spec, store, running, group, now or utcnow())
            if reason:
                log.warning("budget: group %s refused: %s", group.id, reason)
                refused.append({"group": group.id, "reason": reason})
                continue
        store.record_launch(run, group.id)
        launched = sweep.cloud.start(group.labels)
        _record_start(sweep, run, group, launched, now)
        failed = [i for i in launched if i.state not in ACTIVE and i.state != State.STOPPED]
        running.extend(i for i in launched if i.state in ACTIVE)
        started.append(group.id)
        if failed:
            log.warning("group %s: %s", group.id, "; ".join(f"{i.name}: {i.detail}" for i in failed))
    remaining = len(pending) - len(started)
    if not active and not pending:
        store.close_run(run, reason="complete" if not exhausted else "gave up", now=now)
    return {
        "started": started,
        "running": sorted(active),
        "refused": refused,
        "completed": len(completed),
        "pending": remaining,
        "gave_up": exhausted,
    }
