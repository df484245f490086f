"""Real multi-process TF training on `synthetic`: every member is its own process with its
own SPOTBENCH_CONTEXT, results go to a temporary store, `done` to a recording server.

TensorFlow takes seconds to import per process on this shared machine, so the runs are
few, tiny (batch 16, a few steps) and timeouts generous.
"""

from __future__ import annotations

import json
import signal
import time

import psutil
import pytest

from spotbench.results import ResultStore
from tests.workloads.tf_mnist.harness import Cluster, DoneServer, group_for

pytestmark = pytest.mark.slow
TINY = {"steps": 20, "batch_size": 16, "dataset": "synthetic", "warmup_steps": 5}


def _by_metric(results) -> dict[str, list]:
    out: dict[str, list] = {}
    for r in results:
        out.setdefault(r.metric, []).append(r)
    return out


def _check_complete(records, *, steps: int, strategy: str, warmup: int = 5) -> dict:
    by = _by_metric(records)
    assert not any(r.preempted for r in records)
    assert by["steps"][0].value == steps
    assert by["steps_per_s"][0].value > 0
    assert by["examples_per_s"][0].value > by["steps_per_s"][0].value
    assert by["train_time_s"][0].value > 0
    assert 0.0 <= by["test_accuracy"][0].value <= 1.0
    assert by["test_loss"][0].value > 0
    assert by["worker_examples_per_s"]
    meta = by["steps"][0].metadata
    assert meta["strategy"] == strategy and meta["tf_version"].startswith("2.")
    assert meta["warmup_steps_excluded"] == warmup
    assert meta["measured_steps"] == meta["steps_this_attempt"] - warmup
    return by


def test_multi_worker_mirrored_two_workers(tmp_path):
    """2 workers, all-reduce: worker 0 is SIGTERMed mid-run → preempted record and done
    called (TF installs its own SIGTERM handler for multi-worker; ours must win); the
    restarted group resumes from worker 0's checkpoint and completes."""
    url = f"file://{tmp_path}/results"
    store = ResultStore(url)
    run = store.open_run().run
    long = {"strategy": "multi_worker_mirrored", "workers": 2, **TINY, "steps": 100_000,
            "checkpoint_every": 10}
    group = group_for(long)
    ckpt_dir = tmp_path / "results" / "checkpoints" / group.id / run
    with DoneServer() as done:
        first = Cluster(group, url, done.url, tmp_path / "logs1")
        try:
            first.start()
            _wait_for_checkpoint(first, ckpt_dir / "latest.json", 240, lead=("worker", 0))
            first.proc("worker", 0).send_signal(signal.SIGTERM)
            assert first.wait(first.proc("worker", 0), 60) == 143, first.log_text()
            worker1 = first.proc("worker", 1)  # its peer is gone: it fails, or a SIGTERM ends it
            if worker1.poll() is None:
                worker1.send_signal(signal.SIGTERM)
            first.wait(worker1, 30)
        finally:
            first.stop()
        assert [c["group"] for c in done.calls] == [group.id] and all("started_at" in c for c in done.calls)
        preempted = store.read(run)
        assert preempted and all(r.preempted for r in preempted)
        assert _by_metric(preempted)["steps"][0].metadata["stop_reason"] == "SIGTERM"
        checkpoint_step = json.loads((ckpt_dir / "latest.json").read_text())["step"]

        second = Cluster(group_for({**long, "steps": checkpoint_step + 8}), url, done.url, tmp_path / "logs2")
        try:
            second.start()
            assert second.wait(second.proc("worker", 0), 240) == 0, second.log_text()
            assert second.wait(second.proc("worker", 1), 60) == 0, second.log_text()
        finally:
            second.stop()
        assert [c["group"] for c in done.calls] == [group.id] * 2 and all("started_at" in c for c in done.calls)
    records = [r for r in store.read(run) if not r.preempted]
    assert {r.group for r in records} == {group.id}
    by = _check_complete(records, steps=checkpoint_step + 8, strategy="multi_worker_mirrored")
    meta = by["steps"][0].metadata
    assert meta["workers"] == 2 and meta["per_worker_batch"] == 8 and meta["cluster_shape"] == "2 workers"
    assert meta["resumed_from_step"] == checkpoint_step and meta["steps_this_attempt"] == 8
    assert by["worker_examples_per_s"][0].value == pytest.approx(by["examples_per_s"][0].value / 2)


def _wait_for_checkpoint(cluster: Cluster, path, timeout: float, lead=("chief", 0)) -> None:
    chief = cluster.proc(*lead)
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert chief.poll() is None, f"chief exited early:\n{cluster.log_text()}"
        assert time.monotonic() < deadline, f"no checkpoint after {timeout}s:\n{cluster.log_text()}"
        time.sleep(0.2)


def test_parameter_server_preempted_then_resumed(tmp_path):
    """chief + 1 ps + 1 worker: SIGTERM to the chief mid-run → preempted record, done called;
    the restarted group resumes from the stored checkpoint and completes."""
    url = f"file://{tmp_path}/results"
    store = ResultStore(url)
    run = store.open_run().run
    long = {"strategy": "parameter_server", "workers": 1, "ps": 1, **TINY,
            "steps": 100_000, "warmup_steps": 2, "checkpoint_every": 10}
    group = group_for(long)
    ckpt_dir = tmp_path / "results" / "checkpoints" / group.id / run
    env = {"SPOTBENCH_TF_SYNC_EVERY": "3"}
    with DoneServer() as done:
        first = Cluster(group, url, done.url, tmp_path / "logs1", env)
        try:
            first.start()
            _wait_for_checkpoint(first, ckpt_dir / "latest.json", 240)
            first.proc("chief").send_signal(signal.SIGTERM)
            assert first.wait(first.proc("chief"), 60) == 143, first.log_text()
            # ps and worker never exit by themselves: still serving after the chief is gone
            assert first.proc("ps").poll() is None and first.proc("worker").poll() is None
        finally:
            first.stop()
        assert [c["group"] for c in done.calls] == [group.id] and all("started_at" in c for c in done.calls)  # the preempted chief still stops its group

        preempted = store.read(run)
        assert preempted and all(r.preempted for r in preempted)
        by = _by_metric(preempted)
        reached = int(by["steps"][0].value)
        assert by["steps"][0].metadata["stopped_at_step"] == reached
        checkpoint_step = json.loads((ckpt_dir / "latest.json").read_text())["step"]
        assert 10 <= checkpoint_step <= reached and checkpoint_step % 10 == 0
        assert json.loads((ckpt_dir / "progress.json").read_text()) == {"step": reached}

        # the group restarts (same group, same run); 6 more steps finish it
        resumed = group_for({**long, "steps": checkpoint_step + 6})
        assert resumed.id == group.id
        second = Cluster(resumed, url, done.url, tmp_path / "logs2")
        try:
            second.start()
            assert second.wait(second.proc("chief"), 240) == 0, second.log_text()
        finally:
            second.stop()
        assert [c["group"] for c in done.calls] == [group.id] * 2 and all("started_at" in c for c in done.calls)

    records = [r for r in store.read(run) if not r.preempted]
    by = _check_complete(records, steps=checkpoint_step + 6, strategy="parameter_server", warmup=2)
    meta = by["steps"][0].metadata
    assert meta["resumed_from_step"] == checkpoint_step
    assert meta["steps_redone"] == reached - checkpoint_step
    assert meta["steps_this_attempt"] == 6
    assert meta["cluster_shape"] == "1 chief + 1 ps + 1 workers"
    assert [r.metadata["worker"] for r in by["worker_examples_per_s"]] == [0]
    assert sorted(p.name for p in (tmp_path / "results" / "runs" / run).glob("*.jsonl")) == [
        f"{group.id}.1.jsonl", f"{group.id}.2.jsonl"]
    assert not ckpt_dir.exists()  # a complete run leaves nothing to resume


def test_parameter_server_two_workers(tmp_path):
    """chief + 1 ps + 2 workers, no checkpoints: steps counted, throughput split by worker."""
    url = f"file://{tmp_path}/results"
    store = ResultStore(url)
    store.open_run()
    group = group_for({"strategy": "parameter_server", "workers": 2, "ps": 1, **TINY})
    with DoneServer() as done:
        cluster = Cluster(group, url, done.url, tmp_path / "logs")
        try:
            cluster.start()
            assert cluster.wait(cluster.proc("chief"), 240) == 0, cluster.log_text()
            assert all(cluster.proc(r, i).poll() is None for r, i in [("ps", 0), ("worker", 0), ("worker", 1)])
        finally:
            cluster.stop()
        assert [c["group"] for c in done.calls] == [group.id] and all("started_at" in c for c in done.calls)
    by = _check_complete(store.read(), steps=20, strategy="parameter_server")
    meta = by["steps"][0].metadata
    assert meta["cluster_shape"] == "1 chief + 1 ps + 2 workers" and meta["tasks"] == 4
    assert meta["resumed_from_step"] == 0 and meta["steps_redone"] == 0
    per_worker = by["worker_examples_per_s"]
    assert {r.metadata["worker"] for r in per_worker} <= {0, 1}
    assert sum(r.value for r in per_worker) == pytest.approx(by["examples_per_s"][0].value)
    assert not (tmp_path / "results" / "checkpoints").exists()


def test_parameter_server_losing_its_ps_is_recorded_as_preempted(tmp_path):
    """A ps VM preempted mid-run (SIGTERM ends its process): the chief stores what it
    measured with preempted=true and the reason, and still stops the group."""
    url = f"file://{tmp_path}/results"
    store = ResultStore(url)
    store.open_run()
    group = group_for({"strategy": "parameter_server", "workers": 1, "ps": 1, **TINY,
                       "steps": 100_000, "warmup_steps": 2})
    with DoneServer() as done:
        cluster = Cluster(group, url, done.url, tmp_path / "logs", {"SPOTBENCH_TF_SYNC_EVERY": "3"})
        try:
            cluster.start()
            _train_a_few_steps(cluster)
            cluster.proc("ps").send_signal(signal.SIGTERM)
            assert cluster.wait(cluster.proc("ps"), 30) == -signal.SIGTERM  # just exits
            assert cluster.wait(cluster.proc("chief"), 120) == 143, cluster.log_text()
        finally:
            cluster.stop()
        assert [c["group"] for c in done.calls] == [group.id] and all("started_at" in c for c in done.calls)
    records = store.read()
    assert records and all(r.preempted for r in records)
    by = _by_metric(records)
    assert by["steps"][0].value >= 2
    assert by["steps"][0].metadata["stop_reason"].startswith("peer lost (")


def _train_a_few_steps(cluster: Cluster) -> None:
    """Until training has begun and worker 0 has run 2 s of CPU (a few steps, even when the
    machine is loaded and wall time stretches)."""
    deadline = time.monotonic() + 240
    while "training steps" not in cluster.log_text():
        assert time.monotonic() < deadline and cluster.proc("chief").poll() is None, cluster.log_text()
        time.sleep(0.3)
    _run_on_cpu(cluster.proc("worker").pid, seconds=2, timeout=90)


def _run_on_cpu(pid: int, seconds: float, timeout: float) -> None:
    """Until process `pid` has used `seconds` more CPU than now (or `timeout` of wall time)."""
    proc = psutil.Process(pid)
    t = proc.cpu_times()
    start, deadline = t.user + t.system, time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = proc.cpu_times()
        if t.user + t.system - start >= seconds:
            return
        time.sleep(0.1)


def _kill_a_worker_mid_run(tmp_path, workers: int, index: int) -> tuple:
    """A ps/worker group of `workers` training; worker `index` SIGKILLed after a few steps.
    Returns (group, done calls, stored records, seconds from the kill until the chief ended)."""
    url = f"file://{tmp_path}/results"
    store = ResultStore(url)
    store.open_run()
    group = group_for({"strategy": "parameter_server", "workers": workers, "ps": 1, **TINY,
                       "steps": 100_000, "warmup_steps": 2})
    with DoneServer() as done:
        cluster = Cluster(group, url, done.url, tmp_path / "logs", {"SPOTBENCH_TF_SYNC_EVERY": "3"})
        try:
            cluster.start()
            _train_a_few_steps(cluster)
            killed = time.monotonic()
            cluster.proc("worker", index).send_signal(signal.SIGKILL)
            assert cluster.wait(cluster.proc("chief"), 60) == 143, cluster.log_text()
            detected_s = time.monotonic() - killed
        finally:
            cluster.stop()
    return group, done.calls, store.read(), detected_s


def test_parameter_server_losing_a_worker_is_not_stored_as_complete(tmp_path):
    """2 workers, one killed mid-run: TF's coordinator would quietly carry on with the other
    (a fraction of the throughput stored as a normal result); the chief's watch ends the
    attempt as preempted, naming the lost worker, and still stops the group."""
    group, calls, records, detected_s = _kill_a_worker_mid_run(tmp_path, workers=2, index=1)
    assert [c["group"] for c in calls] == [group.id] and all("started_at" in c for c in calls)
    assert records and all(r.preempted for r in records)
    reason = _by_metric(records)["steps"][0].metadata["stop_reason"]
    assert reason.startswith("worker lost: worker 1"), reason
    assert detected_s < 30


@pytest.mark.faults
def test_parameter_server_losing_its_only_worker_ends_the_attempt_not_the_deadline(tmp_path):
    """ps/worker with ONE worker, that worker SIGKILLed mid-run: no worker is left for TF's
    coordinator to reschedule on, so `join()` would wait forever (until the deadline stop).
    The chief gives up within seconds, stores what it measured as preempted naming the lost
    worker, and stops the group."""
    group, calls, records, detected_s = _kill_a_worker_mid_run(tmp_path, workers=1, index=0)
    assert [c["group"] for c in calls] == [group.id] and all("started_at" in c for c in calls)
    assert records and all(r.preempted for r in records)
    by = _by_metric(records)
    reason = by["steps"][0].metadata["stop_reason"]
    assert reason.startswith("worker lost: worker 0"), reason
    assert by["steps"][0].value >= 2
    assert detected_s < 30
