"""The three actions, `start`, `stop` and `done`: who may call each, what the body says,
and what each does under the sweep's control lock."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from spotbench.auth import Caller, Forbidden
from spotbench.clouds.base import Instance
from spotbench.control.bodies import BadRequest, DoneBody, StartBody, StopBody, parse_body, tick_key
from spotbench.control.contamination import flag_contaminated
from spotbench.control.groups import completed_groups, group_states, stop_broken_groups
from spotbench.control.launch import launch_pending
from spotbench.control.sweep import Sweep
from spotbench.ledger import note_ends
from spotbench.plan import GROUP_LABEL, sweep_labels

log = logging.getLogger("spotbench.control")
USER_STOP = "user"  # stop's reason from `spotbench stop SPEC GROUP`: not preempted, not retried


def start(sweep: Sweep, caller: Caller, body: Any = None, now: datetime | None = None) -> dict:
    _require(caller, "scheduler", "operator", action="start")
    req = parse_body(StartBody, body, sweep.spec.name)
    tick = tick_key(req.tick)
    with sweep.lock("start"):
        if req.run is not None:
            run = sweep.store.run_info(req.run) if req.run in sweep.store.run_ids() else None
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
        completed, states = completed_groups(sweep, run.run), group_states(sweep)
        broken = stop_broken_groups(sweep, run.run, states, completed, now)
        out = {"action": "start", "run": run.run,
               **launch_pending(sweep, run.run, now, states=states, completed=completed)}
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
            for info in sweep.store.recent_runs():
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
            if req.reason == USER_STOP:  # done for this run: the launch pass skips them
                for gid in req.groups:
                    sweep.store.record_user_stop(run.run, gid, now, who=caller.name or "user")
            note_ends(sweep.store, run.run, set(req.groups), now)
            out["run"] = run.run
            out.update(launch_pending(sweep, run.run, now))
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
            flag_contaminated(sweep, run.run, now)
            out.update(launch_pending(sweep, run.run, now, finished={own_group}, states=states))
    log.info("done from %s: stopped group %s", caller.name, own_group)
    return out


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

