"""Issue #35's search as a user writes it: 60 `random` trials of tf-mnist over filters
16–256 × kernel size 1–10 on the local cloud, two in flight, on tiny IDX files this test
writes (one training step a trial, so TF's start dominates: ~10–30 s a trial on a shared
2-core machine). The same seed gives the same points; each trial trains the network its
point says; `spotbench artifacts --best` hands back the best trial's weights."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import optuna
import pytest
import yaml

from spotbench.results import ResultStore
from spotbench.search.study import TRIAL_ATTR
from spotbench.spec import load_spec
from tests.search.test_search_local import max_overlap, study
from tests.workloads.tf_mnist.test_search_knobs import _write_mnist

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]
BIN = Path(sys.executable).parent
N = 60


def tf_spec(tmp_path: Path, seed: int, name: str = "tfsrch") -> Path:
    data = tmp_path / "mnist"
    if not data.exists():
        _write_mnist(data, n_train=16, n_test=4)  # 12 train (one step of 12), 4 validation, 4 test
    spec = {"name": name, "cloud": "local", "deadline": "4m", "results": str(tmp_path / "results"),
            "workload": {"name": "tf-mnist", "strategy": "multi_worker_mirrored", "workers": 1,
                         "dataset": "mnist", "dataset_url": str(data), "epochs": 1, "batch_size": 12,
                         "dense_units": 8, "dropout": 0.0, "validation_fraction": 0.25,
                         "warmup_steps": 0},
            "search": {"space": {"filters": {"int": [16, 256]}, "kernel_size": {"int": [1, 10]}},
                       "method": "random", "n": N, "seed": seed, "parallel": 2,
                       "objective": {"metric": "val_accuracy", "direction": "maximize"}}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def cli(tmp_path: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPOTBENCH_STATE_ROOT": str(tmp_path / "state"), "SPOTBENCH_GRACE_S": "3",
           "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([str(BIN / "spotbench"), *args], env=env, cwd=tmp_path, text=True,
                          capture_output=True, timeout=timeout)


def test_search_tf_mnist_sixty_random_trials_of_filters_by_kernel_size_two_in_flight(tmp_path: Path) -> None:
    path = tf_spec(tmp_path, seed=35)
    points = load_spec(path).points()
    assert len(points) == N and points == load_spec(tf_spec(tmp_path, 35, "again")).points()  # same seed
    assert points != load_spec(tf_spec(tmp_path, 36, "other")).points()  # the seed is what fixes them
    assert all(16 <= p["filters"] <= 256 and 1 <= p["kernel_size"] <= 10 for p in points)
    assert len({p["kernel_size"] for p in points}) >= 8 and len({p["filters"] for p in points}) >= 40

    done = cli(tmp_path, "run", str(path), "--no-report", timeout=2300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]

    store = ResultStore(f"file://{tmp_path}/results")
    records = store.read()
    val = {r.trial: r for r in records if r.metric == "val_accuracy"}
    assert sorted((t, r.params["filters"], r.params["kernel_size"]) for t, r in val.items()) == [
        (i, p["filters"], p["kernel_size"]) for i, p in enumerate(points, start=1)]  # the design, once each
    trained = {r.trial: (r.metadata["filters"], r.metadata["kernel_size"]) for r in records if r.metric == "steps"}
    assert trained == {i: (p["filters"], p["kernel_size"]) for i, p in enumerate(points, start=1)}
    assert {r.trial for r in records if r.metric == "test_accuracy"} == set(val)  # reported apart
    assert max_overlap(store) == 2  # two trials in flight, never more

    trials = study(tmp_path).trials
    assert len(trials) == N and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    assert {t.user_attrs[TRIAL_ATTR]: t.value for t in trials} == pytest.approx(
        {t: r.value for t, r in val.items()})  # told the validation accuracy, never the test one

    out = tmp_path / "best"
    got = cli(tmp_path, "artifacts", str(path), "--best", "--out", str(out), timeout=300)
    assert got.returncode == 0, got.stdout + got.stderr
    shape = json.loads((out / "model.json").read_text())
    winner = next(t for t, r in val.items()
                  if (r.params["filters"], r.params["kernel_size"]) == (shape["filters"], shape["kernel_size"]))
    assert val[winner].value == max(r.value for r in val.values())  # the best trial's files
    weights = np.load(io.BytesIO((out / "weights.npz").read_bytes()))
    k, f = shape["kernel_size"], shape["filters"]
    assert weights["conv1_w"].shape == (k, k, 1, f)
    run = store.runs()[-1].run
    again = tmp_path / "again-best"
    store.download_artifacts(run, val[winner].group, 1, again)
    assert (again / "weights.npz").read_bytes() == (out / "weights.npz").read_bytes()
