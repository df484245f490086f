"""A preempted torch run resumes from its checkpoint: the members as real processes (the tf
harness: a context each, a temporary store, a recording `done`), SIGTERM to the leader mid
run, then the same group again."""

from __future__ import annotations

import json
import signal
import time

import pytest

from spotbench.results import ResultStore
from tests.workloads.tf_mnist.harness import Cluster, DoneServer
from tests.workloads.torch_cifar.cifar_files import make_cifar
from spotbench.spec import load_spec

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def _group(workload: dict):
    return load_spec({"name": "tr", "cloud": "local",
                      "workload": {"name": "torch", **workload}}).plan()[0]


def _wait_for(path, cluster: Cluster, timeout: float) -> None:
    leader = cluster.proc("worker", 0)
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert leader.poll() is None, f"leader exited early:\n{cluster.log_text()}"
        assert time.monotonic() < deadline, f"no checkpoint after {timeout}s:\n{cluster.log_text()}"
        time.sleep(0.2)


@pytest.mark.parametrize("shape", [{"mode": "ddp", "workers": 2},
                                   {"mode": "pipeline", "workers": 1}],
                         ids=["ddp-multinode", "pipeline"])
def test_torch_preempted_run_resumes_from_its_checkpoint(tmp_path, shape):
    data = make_cifar(tmp_path / "cifar", train=1600, test=64)
    url = f"file://{tmp_path}/results"
    store = ResultStore(url)
    run = store.open_run().run
    long = {**shape, "dataset": "cifar10", "dataset_url": str(data), "batch_size": 16,
            "epochs": 1, "checkpoint_every": 4, "learning_rate": 0.05}
    group = _group(long)
    ckpt_dir = tmp_path / "results" / "checkpoints" / group.id / run
    env = {"OMP_NUM_THREADS": "1"}
    with DoneServer() as done:
        first = Cluster(group, url, done.url, tmp_path / "logs1", env)
        try:
            first.start()
            _wait_for(ckpt_dir / "latest.json", first, 240)
            time.sleep(1.0)  # a few steps past the checkpoint: steps the next attempt redoes
            first.proc("worker", 0).send_signal(signal.SIGTERM)
            assert first.wait(first.proc("worker", 0), 60) == 143, first.log_text()
        finally:
            first.stop()
        assert [c["group"] for c in done.calls] == [group.id]  # the preempted leader stops its group
        preempted = store.read(run)
        assert preempted and all(r.preempted for r in preempted)
        by = {r.metric: r for r in preempted}
        reached = by["images_per_s"].metadata["stopped_at_step"]
        assert by["images_per_s"].metadata["stop_reason"] == "SIGTERM"
        checkpoint_step = json.loads((ckpt_dir / "latest.json").read_text())["step"]
        assert 4 <= checkpoint_step <= reached and checkpoint_step % 4 == 0
        assert json.loads((ckpt_dir / "progress.json").read_text()) == {"step": reached}
        assert [p.name for p in ckpt_dir.glob("*.pt")] == [f"ckpt-{checkpoint_step}.pt"]  # the newest only

        # the group restarts: 4 more steps finish its (shortened) epoch
        resumed = _group({**long, "steps_per_epoch": checkpoint_step + 4})
        assert resumed.id == group.id
        second = Cluster(resumed, url, done.url, tmp_path / "logs2", env)
        try:
            second.start()
            assert second.wait(second.proc("worker", 0), 240) == 0, second.log_text()
        finally:
            second.stop()
        assert f"resuming from the checkpoint at step {checkpoint_step}" in second.log_text()
        assert [c["group"] for c in done.calls] == [group.id] * 2

    complete = {r.metric: r for r in store.read(run) if not r.preempted}
    meta = complete["images_per_s"].metadata
    assert meta["resumed_from_step"] == checkpoint_step
    assert meta["step"] == meta["steps_total"] == checkpoint_step + 4
    assert meta["steps_redone"] == reached - checkpoint_step
    assert complete["epochs"].value == 1.0
    # this attempt trained the 4 steps after the checkpoint only
    assert complete["images_per_s"].value == pytest.approx(4 * 16 / complete["train_time_s"].value)
    assert 0.0 <= complete["val_accuracy"].value <= 1.0
    assert not ckpt_dir.exists() or not any(ckpt_dir.iterdir())  # nothing left to resume
