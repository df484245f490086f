"""Searches end to end on the local cloud (`spotbench run`, real members, the functions
server, the study in the results folder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml

from spotbench.ledger import launches_of
from spotbench.results import ResultStore
from spotbench.search.study import TRIAL_ATTR
from spotbench.spec import load_spec

BIN = Path(sys.executable).parent
SCORE = "print('score=%f' % (-(${x} - 3) ** 2 - (${k} - 2) ** 2))"


def write(tmp_path: Path, search: dict, command: str = SCORE, name: str = "srch") -> Path:
    spec = {"name": name, "cloud": "local", "deadline": "1m", "results": str(tmp_path / "results"),
            "workload": {"name": "container", "command": [sys.executable, "-c", command]},
            "search": search}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def run(tmp_path: Path, spec: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPOTBENCH_STATE_ROOT": str(tmp_path / "state"), "SPOTBENCH_GRACE_S": "3",
           "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([str(BIN / "spotbench"), "run", str(spec), "--no-report"], env=env,
                          cwd=tmp_path, text=True, capture_output=True, timeout=timeout)


def study(tmp_path: Path) -> optuna.Study:
    journal = next((tmp_path / "results" / "search").glob("*.journal"))
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))
    return optuna.load_study(study_name=journal.stem, storage=storage)


def max_overlap(store: ResultStore) -> int:
    launches = launches_of(store)
    edges = sorted([(x.at, 1) for x in launches] + [(x.ended, -1) for x in launches if x.ended])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_search_local_random_with_two_in_flight_runs_the_seeded_points(tmp_path: Path) -> None:
    search = {"space": {"x": {"uniform": [0, 6]}, "k": {"int": [0, 5]}}, "method": "random", "n": 6,
              "seed": 11, "parallel": 2, "objective": {"metric": "score", "direction": "maximize"}}
    spec = write(tmp_path, search)
    points = load_spec(spec).points()
    assert points == load_spec(write(tmp_path, search, name="again")).points()  # same seed
    done = run(tmp_path, spec)
    assert done.returncode == 0, done.stdout + done.stderr
    store = ResultStore(f"file://{tmp_path}/results")
    records = [r for r in store.read() if r.metric == "score"]
    assert sorted((r.trial, r.params["x"], r.params["k"]) for r in records) == [
        (i, p["x"], p["k"]) for i, p in enumerate(points, start=1)]  # exactly the design, once each
    assert max_overlap(store) == 2  # two trials in flight, never more
    trials = study(tmp_path).trials
    assert sorted(t.user_attrs[TRIAL_ATTR] for t in trials) == [1, 2, 3, 4, 5, 6]
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    by_trial = {r.trial: r.value for r in records}
    assert {t.user_attrs[TRIAL_ATTR]: t.value for t in trials} == pytest.approx(by_trial)


def test_search_local_csv_design_runs_exactly_its_ten_rows(tmp_path: Path) -> None:
    rows = [(round(0.6 * i, 1), i % 6) for i in range(10)]
    (tmp_path / "design.csv").write_text("x,k\n" + "".join(f"{x},{k}\n" for x, k in rows))
    spec = write(tmp_path, {"method": "csv", "points": str(tmp_path / "design.csv"), "parallel": 2,
                            "objective": {"metric": "score"}})
    done = run(tmp_path, spec)
    assert done.returncode == 0, done.stdout + done.stderr
    records = [r for r in ResultStore(f"file://{tmp_path}/results").read() if r.metric == "score"]
    assert sorted((r.trial, r.params["x"], r.params["k"]) for r in records) == [
        (i, x, k) for i, (x, k) in enumerate(rows, start=1)]
    assert {r.trial: r.value for r in records} == pytest.approx(
        {i: -(x - 3) ** 2 - (k - 2) ** 2 for i, (x, k) in enumerate(rows, start=1)}, abs=1e-5)


PROGRESS = ("import json, time\n"
            "for s in range(1, 13):\n"
            "    print(json.dumps({'metric': 'score', 'value': ${x} * s, 'labels': {'step': s}}), flush=True)\n"
            "    time.sleep(0.5)\n"
            "print('score=%s' % (${x} * 12))\n")


def test_search_local_a_losing_trial_is_pruned_and_its_member_stopped_early(tmp_path: Path) -> None:
    (tmp_path / "design.csv").write_text("x\n1\n2\n-5\n")
    spec = write(tmp_path, {"method": "csv", "points": str(tmp_path / "design.csv"), "parallel": 1,
                            "pruner": "median", "objective": {"metric": "score"}}, command=PROGRESS)
    done = run(tmp_path, spec, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pruned" in done.stdout
    store = ResultStore(f"file://{tmp_path}/results")
    run_id = store.runs()[-1].run
    pruned = spec_group = load_spec(spec).plan()[2].id
    assert store.pruned_groups(run_id) == {pruned}
    launch = next(x for x in launches_of(store) if x.group == spec_group)
    assert (launch.ended - launch.at).total_seconds() < 5  # 12 steps × 0.5 s, stopped after ~1
    states = {t.user_attrs[TRIAL_ATTR]: t.state for t in study(tmp_path).trials}
    assert states == {1: optuna.trial.TrialState.COMPLETE, 2: optuna.trial.TrialState.COMPLETE,
                      3: optuna.trial.TrialState.PRUNED}
    note = json.loads((tmp_path / "results" / "runs" / run_id / "pruned" / f"{pruned}.json").read_text())
    assert note["step"] >= 1 and note["expected_s"] > note["ran_s"]


@pytest.mark.slow
def test_search_local_tf_mnist_random_search_trains_each_trials_parameters(tmp_path: Path) -> None:
    """A tf-mnist search (chief + ps + worker per trial): each trial's learning rate and batch
    size reach the training by name, and the records carry them."""
    search = {"space": {"learning_rate": {"loguniform": [1e-3, 1e-1]}, "batch_size": {"choice": [8, 16]}},
              "method": "random", "n": 2, "seed": 4, "parallel": 1}
    path = tmp_path / "tf.yaml"
    path.write_text(yaml.safe_dump({
        "name": "tfs", "cloud": "local", "deadline": "4m", "results": str(tmp_path / "results"),
        "workload": {"name": "tf-mnist", "strategy": "parameter_server", "dataset": "synthetic",
                     "steps": 10, "warmup_steps": 2},
        "search": search}))
    points = load_spec(path).points()
    done = run(tmp_path, path, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    records = [r for r in ResultStore(f"file://{tmp_path}/results").read() if r.metric == "steps"]
    assert sorted((r.trial, r.params["learning_rate"], r.params["batch_size"]) for r in records) == [
        (i, p["learning_rate"], p["batch_size"]) for i, p in enumerate(points, start=1)]


def test_search_local_a_preempted_trial_is_retried_with_its_parameters_no_duplicate(tmp_path: Path) -> None:
    """Trial 1's member is SIGTERMed from outside on its first attempt (a spot reclaim on the
    local cloud): the group is retried whole with the same parameters, the study keeps one
    trial per group, each complete."""
    marker = tmp_path / "preempted-once"
    command = ("import os, signal, time\n"
               f"if ${{x}} == 1 and not os.path.exists({str(marker)!r}):\n"
               f"    open({str(marker)!r}, 'w').close()\n"
               "    os.kill(os.getppid(), signal.SIGTERM)\n"
               "    time.sleep(30)\n"
               "print('score=%s' % (${x} * 2))\n")
    spec = write(tmp_path, {"space": {"x": {"choice": [1, 2, 3]}}, "method": "grid", "parallel": 1,
                            "objective": {"metric": "score"}}, command=command)
    done = run(tmp_path, spec)
    assert done.returncode == 0, done.stdout + done.stderr
    assert marker.exists()
    store = ResultStore(f"file://{tmp_path}/results")
    run_id = store.runs()[-1].run
    first = next(g for g in load_spec(spec).plan() if g.point["x"] == 1)
    assert store.launch_count(run_id, first.id) == 2
    attempts = [a for a in store.attempts(run_id) if a.group == first.id]
    assert [a.preempted for a in attempts] == [True, False]
    trials = study(tmp_path).trials
    assert len(trials) == 3 and sorted(t.value for t in trials) == [2.0, 4.0, 6.0]
