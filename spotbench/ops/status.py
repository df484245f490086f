"""`spotbench status`: every group of a sweep with its members, state, zone, age, deadline,
spend so far, last result, and the schedule (next start/stop tick, paused or not).

Instances come from the Cloud driver (`query` by the group's labels); a group's age and
deadline from the run ledger (the group's latest launch in the open run, else the run's
opening); last results from the results store; spend from `spotbench.budget.budget_status`
when that module is installed (otherwise left out, with a note).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from spotbench.clouds import ACTIVE, Cloud, Instance, State
from spotbench.failures import Failure, failures
from spotbench.ops.schedule import ScheduleControl, ScheduleInfo, describe
from spotbench.plan import RunGroup, sweep_labels
from spotbench.results import Result, ResultStore, RunInfo
from spotbench.spec import SweepSpec


@dataclass
class MemberStatus:
    name: str
    role: str
    state: str  # a cloud State, or MISSING when the cloud does not know the instance
    zone: str | None = None
    ip: str | None = None
    detail: str = ""
    error: str | None = None  # the typed outcome (ErrorKind value): capacity, preempted, …


@dataclass
class GroupStatus:
    id: str
    trial: int
    point: dict[str, Any]
    state: str
    members: list[MemberStatus]
    zone: str | None = None
    launched_at: datetime | None = None
    age_s: float | None = None
    deadline: datetime | None = None
    last_result: str | None = None
    last_result_at: datetime | None = None
    failure: Failure | None = None  # its newest stored attempt failed: why, and its stderr's tail


@dataclass
class SweepStatus:
    sweep: str
    cloud: str
    run: str | None
    groups: list[GroupStatus]
    schedule: ScheduleInfo
    spend: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["schedule"] = self.schedule.as_dict()
        return _iso(out)


def _iso(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _iso(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_iso(v) for v in value]
    return value


def member_name(inst: Instance) -> str:
    """The plan's member name of an instance (see `Instance.member`)."""
    return inst.member


def group_state(members: list[MemberStatus]) -> str:
    """One word for the group when its members agree, else counts (`RUNNING 1, STOPPED 1`)."""
    counts = Counter(m.state for m in members)
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{s} {n}" for s, n in sorted(counts.items()))


def _launched_at(store: ResultStore, run: RunInfo | None, group: str) -> datetime | None:
    """The group's latest launch in the open run, as control recorded it (the ledger's time,
    `ResultStore.last_launch`, the one reading of it)."""
    if run is None:
        return None
    return store.last_launch(run.run, group)


def _last_results(results: list[Result]) -> dict[str, tuple[str, datetime]]:
    """Per group: a one-line summary of its newest stored attempt."""
    newest: dict[str, list[Result]] = {}
    for r in results:
        have = newest.get(r.group)
        if have is None or r.ended_at > have[0].ended_at:
            newest[r.group] = [r]
        elif r.ended_at == have[0].ended_at:
            have.append(r)
    out = {}
    for group, rs in newest.items():
        first = rs[0]
        failed = next(iter(failures(rs).values()), None)
        if failed is not None:
            out[group] = (f"FAILED: {failed.reason}", first.ended_at)
            continue
        text = _key_text(rs) or ""
        if any(r.preempted for r in rs):
            text += " [preempted]"
        out[group] = (text, first.ended_at)
    return out


def _key_text(rs: list[Result]) -> str | None:
    """The attempt's key number as the report's ranking shows it (its primary metric at its
    size, in µs/MB/s…), not whichever record came first (a 0-byte latency)."""
    from spotbench.report.ranking import key_text  # the report's libraries: when status runs

    return key_text([r for r in rs if not r.metadata.get("failure")])


def _spend(spec: SweepSpec, store: ResultStore, found: list[Instance], notes: list[str]) -> dict[str, Any] | None:
    try:
        from spotbench.budget import budget_status  # written by the costs work
    except ImportError:
        notes.append("spend not shown: spotbench.budget is not installed in this build")
        return None
    try:
        status = budget_status(spec, store, [i for i in found if i.state in ACTIVE])
    except Exception as exc:  # noqa: BLE001 - status still prints the rest
        notes.append(f"spend unavailable: {exc}")
        return None
    if hasattr(status, "model_dump"):
        return status.model_dump(mode="json")
    return asdict(status) if hasattr(status, "__dataclass_fields__") else dict(status)


def _group(group: RunGroup, found: list[Instance], store: ResultStore, run: RunInfo | None,
           last: dict[str, tuple[str, datetime]], spec: SweepSpec, now: datetime,
           fails: dict[tuple[str, str], Failure]) -> GroupStatus:
    by_name = {member_name(i): i for i in found}
    members = []
    for m in group.members:
        inst = by_name.pop(m.name, None)
        members.append(
            MemberStatus(m.name, m.role, inst.state.value, inst.zone, inst.ip, inst.detail,
                         str(inst.error) if inst.error else None)
            if inst else MemberStatus(m.name, m.role, "MISSING")
        )
    for extra in by_name.values():  # labelled with this group but not in the plan
        members.append(MemberStatus(extra.name, "?", extra.state.value, extra.zone, extra.ip, "not in the plan"))
    launched = _launched_at(store, run, group.id)
    active = any(m.state in (State.PENDING, State.RUNNING, State.STOPPING) for m in members)
    text, at = last.get(group.id, (None, None))
    failed = next((f for (_, g), f in fails.items() if g == group.id), None)
    return GroupStatus(
        id=group.id,
        trial=group.trial,
        point=group.point,
        state=group_state(members),
        members=members,
        zone=next((m.zone for m in members if m.zone), None),
        launched_at=launched,
        age_s=(now - launched).total_seconds() if launched and active else None,
        deadline=launched + spec.deadline if launched and active else None,
        last_result=text,
        last_result_at=at,
        failure=failed,
    )


def sweep_status(
    spec: SweepSpec,
    cloud: Cloud | None,
    store: ResultStore,
    control: ScheduleControl | None = None,
    now: datetime | None = None,
) -> SweepStatus:
    now = now or datetime.now(UTC)
    notes: list[str] = []
    run = store.current_run()
    found: list[Instance] = []
    if cloud is not None:
        try:
            found = cloud.query(sweep_labels(spec.name))
        except Exception as exc:  # noqa: BLE001
            notes.append(f"could not query {spec.cloud} instances: {exc}")
    by_group: dict[str, list[Instance]] = {}
    for inst in found:
        by_group.setdefault(inst.group() or "", []).append(inst)
    try:
        records = store.read()
    except Exception as exc:  # noqa: BLE001
        notes.append(f"could not read results at {store.url}: {exc}")
        records = []
    last = _last_results(records)
    newest_run = run.run if run else max((r.run for r in records), default=None)
    _note_user_stops(store, newest_run, last, notes)
    fails = {k: f for k, f in failures(records).items() if k[0] == newest_run}
    groups = [_group(g, by_group.pop(g.id, []), store, run, last, spec, now, fails)
              for g in spec.plan()]
    for gid, insts in sorted(by_group.items()):  # groups the plan no longer has: orphans
        notes.append(
            f"{len(insts)} instance(s) of group {gid or '?'} are not in the plan "
            f"(orphans; `spotbench teardown SPEC` removes them)"
        )
    return SweepStatus(
        sweep=spec.name,
        cloud=spec.cloud,
        run=run.run if run else None,
        groups=groups,
        schedule=describe(spec, control, now),
        spend=_spend(spec, store, found, notes),
        notes=notes,
    )


def _note_user_stops(store: ResultStore, run: str | None, last: dict[str, tuple[str, datetime]],
                     notes: list[str]) -> None:
    """Groups a user stopped in `run` (`spotbench stop`): said first in their last result."""
    try:
        stopped = store.user_stopped(run) if run else {}
    except Exception as exc:  # noqa: BLE001 - status still prints the rest
        notes.append(f"could not read which groups were stopped by a user: {exc}")
        return
    for group, who in stopped.items():
        text, at = last.get(group, ("", None))
        last[group] = (f"STOPPED by {who} (not retried)" + (f"; {text}" if text else ""), at)


def fmt_age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return str(timedelta(seconds=int(seconds)))
