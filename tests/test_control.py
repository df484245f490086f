"""Control logic over an in-memory Cloud: who may do what, idempotency, run bookkeeping."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from spotbench import control
from spotbench.auth import Caller, Forbidden
from spotbench.clouds.base import ACTIVE, Instance, State, matches
from spotbench.results import Result, ResultStore, utcnow
from spotbench.spec import load_spec

SCHEDULER = Caller("scheduler", "scheduler")


class MemoryCloud:
    """A Cloud whose instances are dict entries; start/stop flip states like a real one."""

    name = "memory"

    def __init__(self, groups):
        self.instances = {
            m.name: Instance(m.name, State.STOPPED, g.member_labels(m)) for g in groups for m in g.members
        }
        self.start_calls = 0

    def _set(self, labels: Mapping[str, str], state: State, only_from=None) -> list[Instance]:
        out = []
        for name, inst in self.instances.items():
            if matches(inst.labels, labels):
                if only_from is None or inst.state in only_from:
                    inst = self.instances[name] = Instance(name, state, inst.labels)
                out.append(inst)
        return out

    def start(self, labels):
        self.start_calls += 1
        return self._set(labels, State.RUNNING, only_from={State.STOPPED})

    def stop(self, labels):
        return self._set(labels, State.STOPPED, only_from=ACTIVE)

    def terminate(self, labels):
        return self._set(labels, State.TERMINATED)

    def query(self, labels):
        return [i for i in self.instances.values() if matches(i.labels, labels)]


def make_sweep(tmp_path: Path, **extra) -> control.Sweep:
    spec = load_spec({"name": "c", "workload": {"name": "osu"}, "trials": 3, **extra})
    groups = spec.plan()
    return control.Sweep(spec=spec, cloud=MemoryCloud(groups), store=ResultStore(f"file://{tmp_path}"), groups=groups)


def store_result(sweep: control.Sweep, run: str, group: str, preempted: bool = False) -> None:
    now = utcnow()
    sweep.store.write_group(run, group, [Result(
        sweep="c", run=run, group=group, trial=1, workload="osu", metric="latency", value=1.0,
        unit="us", cloud="memory", machine_type="local", started_at=now, ended_at=now,
        preempted=preempted)])


def running_groups(sweep: control.Sweep) -> set[str]:
    return {gid for gid, insts in control.group_states(sweep).items() if any(i.state == State.RUNNING for i in insts)}


def test_start_respects_concurrency_and_is_idempotent(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)  # local cloud: one group at a time
    first = control.start(sweep, SCHEDULER, {})
    assert len(first["started"]) == 1
    again = control.start(sweep, SCHEDULER, {})  # a second delivery of the same tick
    assert again["run"] == first["run"] and again["started"] == []
    assert running_groups(sweep) == set(first["started"])


def test_unlimited_concurrency_starts_all(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, concurrency=5)
    assert len(control.start(sweep, SCHEDULER)["started"]) == 3


def test_done_stops_only_the_callers_group_and_chains_the_next(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    answer = control.start(sweep, SCHEDULER)
    gid = answer["started"][0]
    group = next(g for g in sweep.groups if g.id == gid)
    store_result(sweep, answer["run"], gid)
    out = control.done(sweep, Caller("member", group.members[1].name), {"group": gid})
    assert out["stopped"] == sorted(m.name for m in group.members)
    assert len(out["started"]) == 1 and out["started"][0] != gid
    assert running_groups(sweep) == set(out["started"])


def test_done_for_another_group_is_forbidden(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, concurrency=3)
    control.start(sweep, SCHEDULER)
    a, b = sweep.groups[0], sweep.groups[1]
    with pytest.raises(Forbidden, match="only its own group"):
        control.done(sweep, Caller("member", a.members[0].name), {"group": b.id})
    assert running_groups(sweep) == {g.id for g in sweep.groups}  # nothing stopped
    with pytest.raises(Forbidden, match="not part of sweep"):
        control.done(sweep, Caller("member", "intruder"), {"group": a.id})


def test_members_cannot_start_and_scheduler_cannot_done(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    with pytest.raises(Forbidden):
        control.start(sweep, Caller("member", sweep.groups[0].members[0].name))
    with pytest.raises(Forbidden):
        control.done(sweep, SCHEDULER, {"group": sweep.groups[0].id})


@pytest.mark.parametrize("body, message", [
    ([], "must be a JSON object"),
    ({"group": 3}, "group: Input should be a valid string"),
    ({}, "group: Field required"),
    ({"group": "x", "extra": 1}, "extra: Extra inputs are not permitted"),
])
def test_bad_done_bodies(tmp_path: Path, body, message: str) -> None:
    sweep = make_sweep(tmp_path)
    with pytest.raises(control.BadRequest, match=message):
        control.done(sweep, Caller("member", sweep.groups[0].members[0].name), body)


def test_stop_tick_stops_everything_and_closes_the_run(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, concurrency=3)
    run = control.start(sweep, SCHEDULER)["run"]
    out = control.stop(sweep, SCHEDULER, {"reason": "deadline"})
    assert out["closed"] and len(out["stopped"]) == 6
    assert running_groups(sweep) == set()
    assert sweep.store.current_run() is None
    again = control.stop(sweep, SCHEDULER, {})  # repeated delivery: harmless
    assert "closed" not in again and running_groups(sweep) == set()
    assert control.start(sweep, SCHEDULER)["run"] != run  # the next tick opens a new run


def test_stop_of_unknown_group_is_a_bad_request(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    with pytest.raises(control.BadRequest, match="unknown groups"):
        control.stop(sweep, SCHEDULER, {"groups": ["nope"]})


def test_run_closes_when_every_group_completed(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    run = control.start(sweep, SCHEDULER)["run"]
    for _ in range(3):
        gid = next(iter(running_groups(sweep)))
        store_result(sweep, run, gid)
        member = next(g for g in sweep.groups if g.id == gid).members[0].name
        control.done(sweep, Caller("member", member), {"group": gid})
    assert sweep.store.current_run() is None
    assert sweep.store.runs()[-1].reason == "complete"


def test_preempted_group_is_retried_but_not_forever(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, trials=1)
    run = control.start(sweep, SCHEDULER)["run"]
    gid = sweep.groups[0].id
    for attempt in range(control.MAX_LAUNCHES_PER_RUN):
        store_result(sweep, run, gid, preempted=True)
        sweep.cloud.stop(sweep.groups[0].labels)  # the spot VM went away
        out = control.start(sweep, SCHEDULER)
        if attempt < control.MAX_LAUNCHES_PER_RUN - 1:
            assert out["started"] == [gid]
    assert out["started"] == [] and out["gave_up"] == [gid]
    assert sweep.store.runs()[-1].reason == "gave up"


def test_budget_refusal_keeps_the_group_queued(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    sweep.budget_check = lambda spec, store, active, group, now: "over budget"
    out = control.start(sweep, SCHEDULER)
    assert out["started"] == [] and {r["reason"] for r in out["refused"]} == {"over budget"}
    assert sweep.store.current_run() is not None  # still open: a raised budget can start it
    sweep.budget_check = None
    assert len(control.start(sweep, SCHEDULER)["started"]) == 1


def test_a_tick_asks_again_for_members_a_capacity_error_left_off(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    gid = control.start(sweep, SCHEDULER)["started"][0]
    group = next(g for g in sweep.groups if g.id == gid)
    peer = group.members[1].name
    sweep.cloud.instances[peer] = Instance(peer, State.STOPPED, sweep.cloud.instances[peer].labels)
    out = control.start(sweep, SCHEDULER)
    assert out["resumed"] == [gid] and out["started"] == []
    assert sweep.cloud.instances[peer].state == State.RUNNING


def test_cloud_schedulers_may_name_their_sweep_but_not_another(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    assert control.start(sweep, SCHEDULER, {"sweep": "c"})["started"]
    with pytest.raises(control.BadRequest, match="serves sweep 'c', not 'other'"):
        control.stop(sweep, SCHEDULER, {"sweep": "other"})


def test_done_after_a_preempted_attempt_retries_the_group(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, trials=1)
    run = control.start(sweep, SCHEDULER)["run"]
    group = sweep.groups[0]
    store_result(sweep, run, group.id, preempted=True)
    out = control.done(sweep, Caller("member", group.members[0].name), {"group": group.id})
    assert out["started"] == [group.id] and out["completed"] == 0
    assert sweep.store.current_run() is not None
