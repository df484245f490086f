"""Control logic over an in-memory Cloud: who may do what, idempotency, run bookkeeping."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from spotbench import control
from spotbench.auth import Caller, Forbidden
from spotbench.clouds.base import ACTIVE, ErrorKind, Instance, State, matches
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
        self.no_capacity: set[str] = set()  # instance names the cloud cannot run now
        self.slow_stop = False  # stop leaves instances STOPPING (a real VM takes a while)

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
        out = []
        for inst in self._set(labels, State.RUNNING, only_from={State.STOPPED}):
            if inst.name in self.no_capacity:
                inst = self.instances[inst.name] = Instance(
                    inst.name, State.STOPPED, inst.labels, detail="ZONE_RESOURCE_POOL_EXHAUSTED",
                    error=ErrorKind.CAPACITY)
            out.append(inst)
        return out

    def stop(self, labels):
        if self.slow_stop:
            return self._set(labels, State.STOPPING, only_from={State.PENDING, State.RUNNING})
        return self._set(labels, State.STOPPED, only_from=ACTIVE)

    def finish_stopping(self):
        for name, inst in self.instances.items():
            if inst.state == State.STOPPING:
                self.instances[name] = Instance(name, State.STOPPED, inst.labels)

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


# ---- faults (issue 14) -----------------------------------------------------------------
def test_a_capacity_failure_is_not_reported_as_started(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    first = sweep.groups[0]
    sweep.cloud.no_capacity = {first.members[1].name}  # the peer's VM cannot be had now
    out = control.start(sweep, SCHEDULER)
    assert first.id not in out["started"]
    [failed] = [u for u in out["unavailable"] if u["group"] == first.id]
    assert failed["error"] == "capacity"
    assert failed["members"][first.members[1].name]["error"] == "capacity"
    # the member that did start is stopped again: nothing bills waiting for its partner
    assert all(i.state == State.STOPPED for i in sweep.cloud.query(first.labels))
    assert sweep.store.launch_count(out["run"], first.id) == 0  # not counted as an attempt
    assert out["started"] == [sweep.groups[1].id]  # the slot went to the next group


def test_a_group_that_lost_a_member_is_stopped_not_half_restarted(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    gid = control.start(sweep, SCHEDULER)["started"][0]
    group = next(g for g in sweep.groups if g.id == gid)
    launcher = group.members[0].name
    sweep.cloud.instances[launcher] = Instance(launcher, State.STOPPED, sweep.cloud.instances[launcher].labels,
                                               detail="killed by SIGKILL", error=ErrorKind.CRASHED)
    out = control.start(sweep, SCHEDULER)
    assert out["broken"] == [gid]
    # the survivor was stopped with it, and the group then restarted whole (this cloud stops
    # at once): never the lost member alone beside a survivor of the last attempt
    assert out["started"] == [gid] and sweep.store.launch_count(out["run"], gid) == 2
    assert {i.state for i in sweep.cloud.query(group.labels)} == {State.RUNNING}
    assert all(i.error is None for i in sweep.cloud.query(group.labels))


def test_stop_with_an_empty_group_list_stops_nothing(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    run = control.start(sweep, SCHEDULER)["run"]
    before = running_groups(sweep)
    calls = sweep.cloud.start_calls
    out = control.stop(sweep, SCHEDULER, {"groups": [], "reason": "group deadline"})
    assert out["stopped"] == [] and running_groups(sweep) == before
    assert sweep.cloud.start_calls == calls and sweep.store.current_run().run == run


def test_done_never_restarts_its_own_group_while_it_is_stopping(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, trials=1)
    sweep.cloud.slow_stop = True
    run = control.start(sweep, SCHEDULER)["run"]
    group = sweep.groups[0]
    store_result(sweep, run, group.id, preempted=True)
    out = control.done(sweep, Caller("member", group.members[0].name), {"group": group.id})
    assert out["started"] == [] and out["stopping"] == [group.id]
    assert {i.state for i in sweep.cloud.query(group.labels)} == {State.STOPPING}  # none respawned
    assert sweep.store.launch_count(run, group.id) == 1  # no launch record used up
    assert sweep.store.current_run() is not None  # pending: the retry comes once it is off
    sweep.cloud.finish_stopping()
    again = control.start(sweep, SCHEDULER, {"run": run})
    assert again["started"] == [group.id]
    assert {i.state for i in sweep.cloud.query(group.labels)} == {State.RUNNING}


def test_a_repeated_tick_after_its_run_closed_starts_nothing(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, concurrency=3)
    tick = {"tick": "2026-01-05T03:00:00+00:00"}
    run = control.start(sweep, SCHEDULER, tick)["run"]
    control.stop(sweep, SCHEDULER, {})
    again = control.start(sweep, SCHEDULER, {"tick": "2026-01-05T03:00:00Z"})  # same time, other spelling
    assert again["duplicate"] and again["run"] == run and again["started"] == []
    assert running_groups(sweep) == set() and sweep.store.current_run() is None
    later = control.start(sweep, SCHEDULER, {"tick": "2026-01-06T03:00:00Z"})  # the next day's tick
    assert later["run"] != run and len(later["started"]) == 3


def test_a_runner_kick_for_a_closed_run_starts_nothing(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    run = control.start(sweep, SCHEDULER)["run"]
    control.stop(sweep, SCHEDULER, {})
    out = control.start(sweep, SCHEDULER, {"run": run})
    assert out["closed"] and out["started"] == [] and sweep.store.current_run() is None


def test_the_stop_tick_closes_every_open_run(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path)
    from spotbench.results import RunInfo

    a = sweep.store.open_run()
    other = RunInfo(run=a.run + "-race", opened_at=a.opened_at)  # opened by a racing tick
    sweep.store.write_whole(sweep.store.path("runs", other.run, "run.json"), other.model_dump_json().encode())
    assert len([r for r in sweep.store.runs() if r.closed_at is None]) == 2
    control.stop(sweep, SCHEDULER, {})
    assert all(r.closed_at is not None for r in sweep.store.runs())


def test_concurrent_starts_and_dones_never_exceed_the_limit(tmp_path: Path) -> None:
    import threading
    import time

    sweep = make_sweep(tmp_path, trials=6)
    cloud = sweep.cloud
    peak = [0]
    query = cloud.query

    def slow_query(labels):  # widen the read-then-act window, as a real cloud call does
        found = query(labels)
        time.sleep(0.01)
        return found

    def counting_start(labels, _start=cloud.start):
        out = _start(labels)
        peak[0] = max(peak[0], len(running_groups(sweep)))
        return out

    cloud.query, cloud.start = slow_query, counting_start
    lock = threading.Lock()
    cloud.lock = lambda: lock
    run = control.start(sweep, SCHEDULER)["run"]

    def tick():
        control.start(sweep, SCHEDULER, {"run": run})

    def finish():
        for gid in list(running_groups(sweep)):
            group = next(g for g in sweep.groups if g.id == gid)
            store_result(sweep, run, gid)
            try:
                control.done(sweep, Caller("member", group.members[0].name), {"group": gid})
            except Forbidden:
                pass

    threads = [threading.Thread(target=tick if i % 2 else finish) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 1


def test_attempts_that_ran_over_the_limit_are_flagged_and_retried(tmp_path: Path) -> None:
    """Overlap is judged on control's ledger (launch → end), not on the records' times."""
    sweep = make_sweep(tmp_path)  # local: one group at a time
    run = control.start(sweep, SCHEDULER)["run"]  # launches a
    a, b = sweep.groups[0], sweep.groups[1]
    # b started beside a (what a lost lock would let happen): its launch is in the ledger
    sweep.store.record_launch(run, b.id)
    sweep.cloud.start(b.labels)
    store_result(sweep, run, a.id)
    store_result(sweep, run, b.id)
    control.done(sweep, Caller("member", a.members[0].name), {"group": a.id})
    assert sweep.store.completed_groups(run) == set()  # neither counts: both are retried
    rows = sweep.store.read(run)
    assert rows and all(r.preempted and "2 groups ran at once" in r.metadata["contaminated"] for r in rows)


def test_a_done_from_an_earlier_attempt_does_not_stop_the_next(tmp_path: Path) -> None:
    """A member of attempt 1 (stopped at its deadline) whose `done` arrives after the group was
    launched again must not stop attempt 2; a member of attempt 2 still can."""
    from datetime import timedelta

    sweep = make_sweep(tmp_path, trials=1)
    run = control.start(sweep, SCHEDULER)["run"]
    group = sweep.groups[0]
    first_member_started = utcnow()
    control.stop(sweep, SCHEDULER, {"groups": [group.id]})
    launched = utcnow() + timedelta(seconds=10)  # the retry, well after attempt 1 began
    sweep.store.record_launch(run, group.id, launched)
    sweep.cloud.start(group.labels)
    caller = Caller("member", group.members[0].name)
    late = control.done(sweep, caller, {"group": group.id,
                                        "started_at": first_member_started.isoformat()})
    assert late["stopped"] == [] and "stale" in late["ignored"]
    assert running_groups(sweep) == {group.id}
    fresh = control.done(sweep, caller, {"group": group.id,
                                         "started_at": (launched + timedelta(seconds=1)).isoformat()})
    assert fresh["stopped"] == sorted(m.name for m in group.members)
    assert running_groups(sweep) == set()


def test_an_attempt_belongs_to_the_launch_that_stored_it(tmp_path: Path) -> None:
    """Attempt files are numbered by what is stored, launches by starts: a launch that
    stored nothing (crashed) does not shift the next attempt onto it."""
    from datetime import timedelta

    from spotbench.ledger import attributed, launches_of

    sweep = make_sweep(tmp_path, trials=1)
    run = control.start(sweep, SCHEDULER)["run"]
    (group,) = sweep.groups
    t0 = sweep.store.launches(run, group.id)[0]
    # launch 1's members crash before storing: the next tick sees them stopped, ends it
    sweep.cloud._set(group.labels, State.STOPPED)
    later = t0 + timedelta(seconds=30)
    control.start(sweep, SCHEDULER, {"run": run}, now=later)  # ends launch 1, starts launch 2
    store_result(sweep, run, group.id)
    launches = launches_of(sweep.store, run)
    assert [(x.n, x.stored) for x in launches] == [(1, frozenset()), (2, None)]
    assert attributed(launches, sweep.store.attempts(run))[f"{group.id}.1"].n == 2
    assert launches[0].end(later) == later and launches[1].at == later
