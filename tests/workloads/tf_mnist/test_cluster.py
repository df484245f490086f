"""TF_CONFIG from members, thread settings, peer waiting, step timing, checkpoint store."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from spotbench.member import MemberContext
from spotbench.results import ResultStore
from tests.workloads.tf_mnist.harness import group_for
from workloads.tf_mnist import cluster
from workloads.tf_mnist.checkpoints import CheckpointStore, steps_redone
from workloads.tf_mnist.measure import Outcome, StepTimer, effective_warmup, sync_points


def _contexts(workload: dict, cloud: str = "local") -> dict[tuple[str, int], MemberContext]:
    group = group_for(workload)
    addresses = {m.name: (f"10.0.0.{m.rank + 2}", 2223) for m in group.members}
    return {
        (m.role, m.index): MemberContext.for_member(group, m, addresses=addresses, cloud=cloud,
                                                    results_url="memory://r", done_url=None)
        for m in group.members
    }


def test_tf_config_parameter_server():
    ctxs = _contexts({"strategy": "parameter_server", "workers": 3, "ps": 2})
    config = cluster.tf_config(ctxs[("worker", 2)])
    assert config == {
        "cluster": {
            "chief": ["10.0.0.2:2223"],
            "ps": ["10.0.0.3:2223", "10.0.0.4:2223"],
            "worker": ["10.0.0.5:2223", "10.0.0.6:2223", "10.0.0.7:2223"],
        },
        "task": {"type": "worker", "index": 2},
    }
    assert cluster.tf_config(ctxs[("ps", 1)])["task"] == {"type": "ps", "index": 1}
    assert [k for k, c in ctxs.items() if cluster.records_results(c)] == [("chief", 0)]


def test_tf_config_multi_worker_mirrored_and_env(monkeypatch):
    ctxs = _contexts({"strategy": "multi_worker_mirrored", "workers": 2})
    assert set(ctxs) == {("worker", 0), ("worker", 1)}
    monkeypatch.delenv("TF_CONFIG", raising=False)
    config = cluster.prepare_env(ctxs[("worker", 1)])
    assert json.loads(__import__("os").environ["TF_CONFIG"]) == config == {
        "cluster": {"worker": ["10.0.0.2:2223", "10.0.0.3:2223"]},
        "task": {"type": "worker", "index": 1},
    }
    assert [k for k, c in ctxs.items() if cluster.records_results(c)] == [("worker", 0)]


def test_cluster_rejects_members_that_do_not_fit_the_strategy():
    ctx = _contexts({"strategy": "parameter_server", "workers": 1})[("chief", 0)]
    bad = ctx.model_copy(update={"members": [p for p in ctx.members if p.role != "ps"]})
    with pytest.raises(ValueError, match="needs one chief, ≥1 ps and ≥1 worker"):
        cluster.cluster_spec(bad)


def test_threads(monkeypatch):
    monkeypatch.delenv(cluster.THREADS_ENV, raising=False)
    local = _contexts({"workers": 1})[("chief", 0)]
    gcp = local.model_copy(update={"cloud": "gcp"})
    assert cluster.threads(local) == (1, 2)
    assert cluster.threads(gcp) == (0, 0)
    monkeypatch.setenv(cluster.THREADS_ENV, "4")
    assert cluster.threads(gcp) == (4, 4)


def test_wait_for_peers():
    with socket.socket() as listening, socket.socket() as closed:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        closed.bind(("127.0.0.1", 0))  # bound, not listening: refuses connections
        up = f"127.0.0.1:{listening.getsockname()[1]}"
        down = f"127.0.0.1:{closed.getsockname()[1]}"
        cluster.wait_for_peers([up], timeout=5)
        with pytest.raises(TimeoutError, match=f"TF tasks at {down} did not start within 1s"):
            cluster.wait_for_peers([up, down], timeout=1, interval=0.1)


# ---- timing -----------------------------------------------------------------------------
class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_step_timer_excludes_warmup():
    clock = FakeClock()
    timer = StepTimer(first_step=40, warmup=5, clock=clock)
    timer.start()
    clock.t = 110.0  # 5 slow warm-up steps
    timer.at(45)
    clock.t = 112.0  # 20 steps in 2 s
    timer.at(65)
    assert timer.train_time_s == 12.0
    assert timer.steps_run == 25 and timer.step == 65
    assert timer.measured == (20, 2.0)
    assert timer.steps_per_s() == 10.0


def test_outcome_records(tmp_path):
    class Run:
        def __init__(self):
            self.rows = []

        def record(self, metric, value, unit, **meta):
            self.rows.append((metric, value, unit, meta))

    clock = FakeClock()
    timer = StepTimer(first_step=0, warmup=2, clock=clock)
    timer.start()
    clock.t += 1
    timer.at(2)
    clock.t += 4
    timer.at(10)
    from collections import Counter

    run = Run()
    Outcome(timer, examples_per_step=16, metadata={"strategy": "parameter_server"}, accuracy=0.5,
            loss=1.25, worker_steps=Counter({0: 6, 1: 2})).record(run)
    values = {(m, r[3].get("worker")): r[1] for r in run.rows for m in [r[0]]}
    assert values[("steps", None)] == 10
    assert values[("steps_per_s", None)] == 2.0
    assert values[("examples_per_s", None)] == 32.0
    assert values[("worker_examples_per_s", 0)] == 6 * 16 / 4
    assert values[("worker_examples_per_s", 1)] == 2 * 16 / 4
    assert values[("test_accuracy", None)] == 0.5
    assert all(r[3]["warmup_steps_excluded"] == 2 for r in run.rows)


def test_sync_points_and_warmup():
    assert effective_warmup(10, 20) == 10
    assert effective_warmup(10, 3) == 2
    assert effective_warmup(10, 1) == 0
    assert sync_points(0, 20, warmup=5, every=10, checkpoint_every=0) == [5, 10, 20]
    assert sync_points(30, 70, warmup=5, every=100, checkpoint_every=15) == [35, 45, 60, 70]


# ---- checkpoints ---------------------------------------------------------------------------
class FakeCheckpoint:
    """Stands in for tf.train.Checkpoint: write(prefix) makes the two files TF makes."""

    def __init__(self, value: str = ""):
        self.value = value

    def write(self, prefix: str) -> str:
        Path(prefix + ".index").write_text("index")
        Path(prefix + ".data-00000-of-00001").write_text(self.value)
        return prefix

    def read(self, prefix: str):
        self.value = Path(prefix + ".data-00000-of-00001").read_text()
        return self

    def assert_existing_objects_matched(self):
        return self


def test_checkpoint_store_round_trip(tmp_path):
    url = f"file://{tmp_path}/results"
    store = CheckpointStore(url, "g1", "run1")
    assert store.latest() is None and store.restore(FakeCheckpoint()) == 0
    store.save(FakeCheckpoint("weights@10"), 10)
    store.save(FakeCheckpoint("weights@20"), 20)
    store.save(FakeCheckpoint("ignored"), 30, upload=False)  # a non-chief's throwaway copy
    root = tmp_path / "results/checkpoints/g1/run1"
    assert sorted(p.name for p in root.iterdir()) == [
        "ckpt-20.data-00000-of-00001", "ckpt-20.index", "latest.json"]
    fresh = CheckpointStore(url, "g1", "run1")  # a restarted process
    restored = FakeCheckpoint()
    assert fresh.restore(restored) == 20 and restored.value == "weights@20"
    fresh.write_progress(27)
    assert fresh.progress() == 27 and steps_redone(27, 20) == 7 and steps_redone(None, 20) == 0
    assert CheckpointStore(url, "g1", "run2").latest() is None  # the next run starts afresh
    fresh.clear()
    assert not root.exists()


def test_checkpoint_store_on_object_store():
    store = CheckpointStore("memory://ckpt-test", "g", "r")
    store.save(FakeCheckpoint("x"), 5)
    back = FakeCheckpoint()
    assert CheckpointStore("memory://ckpt-test", "g", "r").restore(back) == 5 and back.value == "x"
    store.clear()


def test_results_store_is_untouched_by_checkpoints(tmp_path):
    url = f"file://{tmp_path}"
    run = ResultStore(url).open_run()
    CheckpointStore(url, "g", run.run).save(FakeCheckpoint("x"), 1)
    assert ResultStore(url).read() == []


def test_local_example_spec():
    from spotbench.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[3] / "examples" / "tf-local.yaml")
    groups = spec.plan()
    assert spec.cloud == "local" and spec.trials == 3
    assert spec.workload.strategy == "parameter_server" and spec.workload.dataset == "digits"
    assert sorted({g.params.workers for g in groups}) == [1, 2, 3] and len(groups) == 9
    assert {len(g.members) for g in groups} == {3, 4, 5}  # chief + ps + workers
