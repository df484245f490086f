"""A search's loop in control, over an in-memory cloud and a file store: trials asked as
slots free, told from their records, never duplicated by repeated ticks or `done`, retried
when preempted, failed when they fail, pruned within one control call, priced from the
ledger; the study kept in the store and resumed by any call."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import optuna
import pytest

from spotbench import control
from spotbench.auth import Caller
from spotbench.clouds.base import ErrorKind, Instance, State
from spotbench.control.search import open_study, pruning_savings
from spotbench.lease import MemoryObjects
from spotbench.results import Result, ResultStore, utcnow
from spotbench.search.journal import ConditionalJournal
from spotbench.spec import load_spec
from tests.test_control import MemoryCloud

SCHEDULER = Caller("scheduler", "scheduler")
TrialState = optuna.trial.TrialState


def make_sweep(tmp_path: Path, search: dict, prices: str | None = None, **extra) -> control.Sweep:
    spec = load_spec({"name": "s", "workload": {"name": "container", "command": "score ${x} ${k}"},
                      "search": {"space": {"x": {"uniform": [0, 6]}, "k": {"int": [0, 5]}},
                                 "method": "random", "n": 5, "seed": 1, "parallel": 2,
                                 "objective": {"metric": "score", "direction": "maximize"}, **search},
                      **extra})
    groups = spec.plan()
    return control.Sweep(spec=spec, cloud=MemoryCloud(groups), store=ResultStore(f"file://{tmp_path}"),
                         groups=groups, prices=prices)


def score(params: dict) -> float:
    return -(params["x"] - 3) ** 2 - (params["k"] - 2) ** 2


def store(sweep: control.Sweep, run: str, gid: str, value: float | None = None, *, metric: str = "score",
          preempted: bool = False, failed: bool = False, **meta) -> None:
    group = next(g for g in sweep.groups if g.id == gid)
    params = sweep.store.assignment(run, gid) or group.record_params
    now = utcnow()
    metadata = {"failure": "exit code 1", **meta} if failed else meta
    sweep.store.write_group(run, gid, [Result(
        sweep="s", run=run, group=gid, trial=group.trial, params=params, workload="container",
        metric=metric, value=score(params) if value is None else value, unit="", cloud="local",
        machine_type="local", started_at=now, ended_at=now, preempted=preempted, metadata=metadata)])


def finish(sweep: control.Sweep, gid: str) -> dict:
    """The group's member calls done (its result is stored)."""
    group = next(g for g in sweep.groups if g.id == gid)
    return control.done(sweep, Caller("member", group.members[0].name), {"group": gid})


def running(sweep: control.Sweep) -> set[str]:
    return {gid for gid, insts in control.group_states(sweep).items()
            if any(i.state == State.RUNNING for i in insts)}


def trials(sweep: control.Sweep) -> list[optuna.trial.FrozenTrial]:
    return open_study(sweep).study.get_trials()


def test_search_random_parallel_two_keeps_both_slots_full_and_tells_each_result(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, {})
    first = control.start(sweep, SCHEDULER, {})
    run = first["run"]
    assert first["started"] == [sweep.groups[0].id, sweep.groups[1].id]
    told = 0
    while running(sweep):
        gid = sorted(running(sweep))[0]
        store(sweep, run, gid)
        out = finish(sweep, gid)
        told += 1
        # a freed slot is filled by the next trial in the same call
        assert len(running(sweep)) == min(2, 5 - told), out
    states = {t.user_attrs["spotbench_trial"]: t for t in trials(sweep)}
    assert sorted(states) == [1, 2, 3, 4, 5] and len(trials(sweep)) == 5
    for g in sweep.groups:  # each trial's parameters are the design's, its value its records'
        t = states[g.trial]
        assert t.state == TrialState.COMPLETE and t.params == {k: g.point[k] for k in ("x", "k")}
        assert t.value == pytest.approx(score(g.point))
    assert sweep.store.runs()[-1].closed_at is not None  # every trial over: the run closed


def test_search_repeated_ticks_and_done_make_no_duplicate_trial(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, {})
    run = control.start(sweep, SCHEDULER, {"tick": "2026-01-01T00:00:00Z"})["run"]
    for _ in range(3):  # at-least-once ticks, and the local runner's kicks
        control.start(sweep, SCHEDULER, {"tick": "2026-01-01T00:00:00Z"})
        control.start(sweep, SCHEDULER, {"run": run})
    assert len(trials(sweep)) == 2
    gid = sweep.groups[0].id
    store(sweep, run, gid)
    finish(sweep, gid)
    finish(sweep, gid)  # a repeated done
    control.start(sweep, SCHEDULER, {"run": run})
    ts = trials(sweep)
    assert len(ts) == 3 and len({t.user_attrs["spotbench_trial"] for t in ts}) == 3
    assert [t.state for t in ts].count(TrialState.COMPLETE) == 1


def preempt(sweep: control.Sweep, gid: str) -> None:
    cloud: MemoryCloud = sweep.cloud  # type: ignore[assignment]
    for name, inst in cloud.instances.items():
        if inst.labels.get("spotbench-group") == gid:
            cloud.instances[name] = Instance(name, State.STOPPED, inst.labels, error=ErrorKind.PREEMPTED)


def test_search_preempted_trial_is_retried_with_its_parameters_without_a_duplicate(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, {"parallel": 1})
    run = control.start(sweep, SCHEDULER, {})["run"]
    gid = sweep.groups[0].id
    store(sweep, run, gid, preempted=True)
    preempt(sweep, gid)
    out = control.start(sweep, SCHEDULER, {"run": run})  # the next call restarts it whole
    assert out["started"] == [gid]
    assert sweep.store.launch_count(run, gid) == 2
    ts = trials(sweep)
    assert len(ts) == 1 and ts[0].state == TrialState.RUNNING  # the same trial, asked once
    store(sweep, run, gid)
    finish(sweep, gid)
    ts = trials(sweep)
    assert ts[0].state == TrialState.COMPLETE and ts[0].value == pytest.approx(score(sweep.groups[0].point))
    assert len(ts) == 2 and ts[1].state == TrialState.RUNNING  # the slot went to trial 2


def test_search_a_trial_given_up_is_failed_never_running_forever(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, {"parallel": 1})
    run = control.start(sweep, SCHEDULER, {})["run"]
    gid = sweep.groups[0].id
    for _ in range(control.MAX_LAUNCHES_PER_RUN):
        store(sweep, run, gid, preempted=True)
        preempt(sweep, gid)
        out = control.start(sweep, SCHEDULER, {"run": run})
    assert gid in out["gave_up"]
    first = next(t for t in trials(sweep) if t.user_attrs["spotbench_trial"] == 1)
    assert first.state == TrialState.FAIL
    assert out["started"] == [sweep.groups[1].id]  # and the search goes on
    nxt = control.start(sweep, SCHEDULER, {"tick": "2026-02-01T00:00:00Z"})  # a later run
    assert gid not in nxt["started"] and gid not in running(sweep)


def test_search_a_failed_command_is_told_fail_not_a_value(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, {"parallel": 1})
    run = control.start(sweep, SCHEDULER, {})["run"]
    gid = sweep.groups[0].id
    store(sweep, run, gid, failed=True, value=123.0)
    finish(sweep, gid)
    t = trials(sweep)[0]
    assert t.state == TrialState.FAIL and t.values is None


def test_search_a_trial_without_its_objective_is_told_fail(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, {"parallel": 1})
    run = control.start(sweep, SCHEDULER, {})["run"]
    store(sweep, run, sweep.groups[0].id, metric="other", value=1.0)
    finish(sweep, sweep.groups[0].id)
    assert trials(sweep)[0].state == TrialState.FAIL


def test_search_no_trial_is_asked_that_the_budget_cannot_pay(tmp_path: Path) -> None:
    prices = tmp_path / "prices.csv"
    prices.write_text("cloud,region,kind,item,provisioning,unit,usd,bundled_gpu,date,source,note\n"
                      "local,*,machine,local,,hour,36,,2026-01-01,test,\n")
    sweep = make_sweep(tmp_path, {"parallel": 2}, prices=str(prices), budget=1.0, deadline="40s")
    out = control.start(sweep, SCHEDULER, {})
    assert len(out["started"]) == 1 and out["refused"]  # ≥ 60 s billed at 36 USD/h = 0.60: one fits, not two
    assert len(trials(sweep)) == 1  # the refused group's trial was never asked


def test_search_adaptive_asks_the_sampler_and_hands_the_member_its_parameters(tmp_path: Path) -> None:
    sweep = make_sweep(tmp_path, {"method": "adaptive", "sampler": "tpe", "n": 8, "parallel": 2})
    run = control.start(sweep, SCHEDULER, {})["run"]
    for _ in range(8):
        gid = sorted(running(sweep))[0]
        assigned = sweep.store.assignment(run, gid)  # what the member reads at boot
        assert assigned is not None and 0 <= assigned["x"] <= 6 and assigned["k"] in range(6)
        assert assigned["command"] == ["score", repr(assigned["x"]), str(assigned["k"])]
        store(sweep, run, gid)
        finish(sweep, gid)
    ts = trials(sweep)
    assert len(ts) == 8 and all(t.state == TrialState.COMPLETE for t in ts)
    assert len({(t.params["x"], t.params["k"]) for t in ts}) == 8


def progress(sweep: control.Sweep, run: str, gid: str, values: list[float]) -> None:
    """The member's intermediate values, step by step, as `WorkloadRun.intermediate` stores
    them (the attempt's intermediate records: the one progress path)."""
    group = next(g for g in sweep.groups if g.id == gid)
    now, kept = utcnow(), []
    for step, v in enumerate(values):
        kept.append(Result(sweep="s", run=run, group=gid, trial=group.trial, params=group.record_params,
                           workload="container", metric="score", value=v, unit="", cloud="local",
                           machine_type="local", started_at=now, ended_at=now,
                           metadata={"intermediate": True, "step": step}))
        sweep.store.write_intermediate(run, gid, sweep.store.next_attempt(run, gid), kept)


def test_search_a_pruned_trial_stops_within_one_control_call_and_the_saving_is_noted(tmp_path: Path) -> None:
    prices = tmp_path / "prices.csv"
    prices.write_text("cloud,region,kind,item,provisioning,unit,usd,bundled_gpu,date,source,note\n"
                      "local,*,machine,local,,hour,3.6,,2026-01-01,test,\n")
    sweep = make_sweep(tmp_path, {"parallel": 1, "pruner": "median"}, prices=str(prices), deadline="10m")
    t0 = utcnow()
    run = control.start(sweep, SCHEDULER, {}, now=t0)["run"]
    for i, gid in enumerate(g.id for g in sweep.groups[:2]):  # two good trials, 100 s each
        progress(sweep, run, gid, [1.0, 2.0, 3.0])
        store(sweep, run, gid, value=3.0)
        finish_at = t0 + timedelta(seconds=100 * (i + 1))
        group = next(g for g in sweep.groups if g.id == gid)
        control.done(sweep, Caller("member", group.members[0].name), {"group": gid}, now=finish_at)
    third = sweep.groups[2].id
    assert running(sweep) == {third}
    progress(sweep, run, third, [-5.0, -6.0])  # far below the median at each step
    out = control.start(sweep, SCHEDULER, {"run": run}, now=t0 + timedelta(seconds=220))
    assert out["pruned"] == [third] and third not in running(sweep)  # stopped in this call
    t = next(t for t in trials(sweep) if t.user_attrs["spotbench_trial"] == 3)
    assert t.state == TrialState.PRUNED
    assert out["started"] == [sweep.groups[3].id]  # its slot goes to the next trial
    saved = pruning_savings(sweep.store, run)
    assert [s["group"] for s in saved] == [third]
    # it ran 20 s of the 100 s a trial takes: 80 s at 3.6 USD/h saved
    assert saved[0]["saved_usd"] == pytest.approx(80 * 3.6 / 3600, rel=0.05)
    again = control.start(sweep, SCHEDULER, {"run": run}, now=t0 + timedelta(seconds=230))
    assert third not in again["started"]  # a pruned trial is never rerun


def test_search_the_report_shows_the_dollars_pruning_saved(tmp_path: Path) -> None:
    """The pruned trial above, then `write_report` on its store: the answer says what the
    stop saved (control's note: 80 s of a 3.6 USD/h machine = $0.08), and nothing of the
    kind when no trial was pruned."""
    from spotbench.report import write_report

    prices = tmp_path / "prices.csv"
    prices.write_text("cloud,region,kind,item,provisioning,unit,usd,bundled_gpu,date,source,note\n"
                      "local,*,machine,local,,hour,3.6,,2026-01-01,test,\n")
    sweep = make_sweep(tmp_path / "store", {"parallel": 1, "pruner": "median"}, prices=str(prices),
                       deadline="10m")
    t0 = utcnow()
    run = control.start(sweep, SCHEDULER, {}, now=t0)["run"]
    for i, gid in enumerate(g.id for g in sweep.groups[:2]):
        progress(sweep, run, gid, [1.0, 2.0, 3.0])
        store(sweep, run, gid, value=3.0)
        group = next(g for g in sweep.groups if g.id == gid)
        control.done(sweep, Caller("member", group.members[0].name), {"group": gid},
                     now=t0 + timedelta(seconds=100 * (i + 1)))
    before = write_report(sweep.store.url, tmp_path / "before", objectives=["score:max"])
    assert "Pruning saved" not in before.markdown.read_text()
    third = sweep.groups[2].id
    progress(sweep, run, third, [-5.0, -6.0])
    assert control.start(sweep, SCHEDULER, {"run": run}, now=t0 + timedelta(seconds=220))["pruned"] == [third]
    store(sweep, run, third, value=-6.0, preempted=True)  # what it measured before the stop
    paths = write_report(sweep.store.url, tmp_path / "after", objectives=["score:max"])
    first = paths.markdown.read_text().split("\n## ", 2)[1]  # the answer, before anything else
    assert first.startswith("Best trial")
    assert "Pruning saved $0.0800: the pruner stopped 1 trial early (trial 3)" in first
    assert "1.333 machine-minutes" in first  # 80 s it would still have run


def test_search_cost_objective_comes_from_the_ledger_and_gives_a_pareto_front(tmp_path: Path) -> None:
    prices = tmp_path / "prices.csv"
    prices.write_text("cloud,region,kind,item,provisioning,unit,usd,bundled_gpu,date,source,note\n"
                      "local,*,machine,local,,hour,3.6,,2026-01-01,test,\n")
    sweep = make_sweep(tmp_path, {"parallel": 1, "objective": [
        {"metric": "score", "direction": "maximize"}, {"metric": "cost", "direction": "minimize"}]},
        prices=str(prices))
    t0 = utcnow()
    run = control.start(sweep, SCHEDULER, {}, now=t0)["run"]
    at = t0
    for i, g in enumerate(sweep.groups):
        store(sweep, run, g.id, cost_usd=999.0)  # what a VM says it cost is never read
        at += timedelta(seconds=60 * (i + 1))
        control.done(sweep, Caller("member", g.members[0].name), {"group": g.id}, now=at)
    ts = sorted(trials(sweep), key=lambda t: t.number)
    costs = [t.values[1] for t in ts]
    assert costs == pytest.approx([60 * (i + 1) * 3.6 / 3600 for i in range(5)], rel=0.02)
    front = open_study(sweep).study.best_trials
    assert front and all(t.state == TrialState.COMPLETE for t in front)
    assert ts[0] in front  # the cheapest trial is on the front whatever its score


def test_search_the_study_is_resumed_by_any_call_from_the_store(tmp_path: Path) -> None:
    a = make_sweep(tmp_path, {})
    run = control.start(a, SCHEDULER, {})["run"]
    b = make_sweep(tmp_path, {})  # another function instance: nothing shared but the store
    b.cloud = a.cloud
    store(b, run, a.groups[0].id)
    finish(b, a.groups[0].id)
    assert [t.state for t in trials(a)].count(TrialState.COMPLETE) == 1
    journal = list((tmp_path / "search").glob("*.journal"))
    assert len(journal) == 1 and journal[0].stat().st_size > 0


def test_search_conditional_journal_never_loses_a_line_under_racing_writers() -> None:
    import fsspec

    objects = MemoryObjects()
    fs = fsspec.filesystem("memory")
    backends = [ConditionalJournal(fs, "/j/study.journal", objects) for _ in range(4)]

    def write(b: ConditionalJournal, who: int) -> None:
        for i in range(25):
            b.append_logs([{"who": who, "i": i}])

    threads = [threading.Thread(target=write, args=(b, n)) for n, b in enumerate(backends)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    logs = list(backends[0].read_logs(0))
    assert sorted((e["who"], e["i"]) for e in logs) == [(w, i) for w in range(4) for i in range(25)]
    assert list(backends[1].read_logs(90)) == logs[90:]


def test_search_study_on_an_object_store_uses_conditional_writes(tmp_path: Path) -> None:
    spec = load_spec({"name": "s", "workload": {"name": "container", "command": "score ${x}"},
                      "search": {"space": {"x": {"uniform": [0, 6]}}, "method": "random", "n": 3,
                                 "objective": {"metric": "score"}}})
    groups = spec.plan()
    sweep = control.Sweep(spec=spec, cloud=MemoryCloud(groups), store=ResultStore(f"memory://{tmp_path.name}"),
                          groups=groups)
    study = open_study(sweep)
    assert isinstance(study.storage._backend, ConditionalJournal)  # noqa: SLF001 - what backs it
    run = control.start(sweep, SCHEDULER, {})["run"]
    assert run and len(trials(sweep)) == 1


def test_search_no_member_grant_reaches_the_study_or_controls_notes(tmp_path: Path) -> None:
    """A group's grant (the neutral one GCP encodes, and AWS's session policy) covers its own
    progress values, never the study's journal, another group's progress, the pruned notes
    or the run ledger holding adaptive parameters."""
    import fnmatch
    from datetime import UTC, datetime

    from spotbench.auth.instance import Grant
    from spotbench.clouds.aws.grants import session_policy

    sweep = make_sweep(tmp_path, {})
    run = "20260101T000000Z"
    mine, other = sweep.groups[0].id, sweep.groups[1].id
    journal = f"search/{open_study(sweep).name}.journal"
    allowed = [f"runs/{run}/{mine}.1/intermediate.jsonl"]  # its progress: the one path
    refused = [journal, f"runs/{run}/{other}.1/intermediate.jsonl", f"runs/{run}/pruned/{mine}.json",
               f"runs/{run}/run.json"]
    grant = Grant.for_group(mine, run, datetime(2030, 1, 1, tzinfo=UTC), checkpoints=True)
    now = datetime(2029, 1, 1, tzinfo=UTC)
    assert all(grant.allows(k, now) for k in allowed)
    assert not any(grant.allows(k, now) for k in refused)
    policy = session_policy("b", "s", mine, records=f"runs/{run}/{mine}.", checkpoints=True,
                            until=datetime(2030, 1, 1, tzinfo=UTC))
    puts = [r for st in policy["Statement"] if "s3:PutObject" in st["Action"] for r in
            ([st["Resource"]] if isinstance(st["Resource"], str) else st["Resource"])]

    def iam_match(key: str) -> bool:  # IAM: `*` any characters, `?` exactly one
        return any(fnmatch.fnmatchcase(f"arn:aws:s3:::b/s/{key}", r) for r in puts)

    assert all(iam_match(k) for k in allowed) and not any(iam_match(k) for k in refused)


def test_search_every_member_reads_its_adaptive_trials_parameters(tmp_path: Path, monkeypatch) -> None:
    """tf-mnist's parameter server and workers read their params before any WorkloadRun: the
    trial's assigned ones reach them too (`trial_context`), not the plan's placeholders."""
    from spotbench.member import MemberContext
    from workloads.common import trial_context

    spec = load_spec({"name": "tfa", "workload": {"name": "tf-mnist"},
                      "search": {"space": {"learning_rate": {"loguniform": [1e-3, 1e-1]}},
                                 "method": "adaptive", "sampler": "tpe", "n": 2,
                                 "objective": {"metric": "val_accuracy"}}})
    groups = spec.plan()
    sweep = control.Sweep(spec=spec, cloud=MemoryCloud(groups), store=ResultStore(f"file://{tmp_path}"),
                          groups=groups)
    run = control.start(sweep, SCHEDULER, {})["run"]
    group = groups[0]
    assigned = sweep.store.assignment(run, group.id)
    assert assigned is not None and assigned["learning_rate"] != group.params.learning_rate
    monkeypatch.delenv("SPOTBENCH_RUN", raising=False)
    for member in group.members:  # chief, ps and worker alike
        ctx = MemberContext.for_member(group, member, addresses={m.name: ("127.0.0.1", 1) for m in group.members},
                                       cloud="local", results_url=f"file://{tmp_path}", done_url=None)
        assert ctx.params["learning_rate"] == group.params.learning_rate  # the plan's placeholder
        assert trial_context(ctx).params["learning_rate"] == assigned["learning_rate"]
    other = MemberContext.for_member(groups[1], groups[1].members[0], cloud="local", done_url=None,
                                     addresses={m.name: ("127.0.0.1", 1) for m in groups[1].members},
                                     results_url=f"file://{tmp_path}")
    assert trial_context(other) == other  # not started yet: nothing assigned
