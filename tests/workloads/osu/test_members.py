"""The OSU workload as two real member processes: launcher + peer over the exec agent."""

from __future__ import annotations

import signal
import time

import psutil
import pytest

from tests.workloads.osu.conftest import make_group

SMALL = {"max_size": 4096, "iterations": 200, "iterations_large": 50, "warmup": 20,
         "warmup_large": 5, "bw_iterations": 10, "bw_iterations_large": 5, "bw_warmup": 2,
         "bw_warmup_large": 1, "window": 16, "large_size": 1024, "implementation": "mpi4py"}


@pytest.mark.slow
def test_launcher_and_peer_store_results_and_call_done(tmp_path, done_server):
    group = make_group(tmp_path, done_server.url, SMALL)
    try:
        peer = group.start("peer")
        launcher = group.start("launcher")
        out, _ = launcher.communicate(timeout=120)
        assert launcher.returncode == 0, out
        assert done_server.event.wait(10)
        # the peer serves until its instance is stopped (done would do that): SIGTERM → exit 0
        assert peer.poll() is None
        peer.send_signal(signal.SIGTERM)
        assert peer.wait(timeout=20) == 0
    finally:
        group.stop_all()

    call = done_server.calls[0]
    assert call["body"]["group"] == "g-osu-test" and set(call["body"]) == {"group", "started_at"}
    assert call["auth"] == "Bearer g-osu-test-l0.test-token"

    records = group.store.read(group.run_id)
    lat = {r.metadata["size_bytes"]: r for r in records if r.metric == "latency"}
    bw = {r.metadata["size_bytes"]: r for r in records if r.metric == "bibw"}
    assert sorted(lat) == [0] + [2**k for k in range(13)]
    assert sorted(bw) == [2**k for k in range(13)]
    assert all(r.value > 0 and r.unit == "us" for r in lat.values())
    assert all(r.value > 0 and r.unit == "MB/s" for r in bw.values())
    assert not any(r.preempted for r in records)
    assert lat[8].metadata["iterations"] == 200 and lat[2048].metadata["iterations"] == 50
    assert lat[8].metadata["source"] == "mpi4py" and lat[8].metadata["osu_version"] == "7.5"
    assert lat[8].metadata["mpi_library"].startswith("MPICH")
    assert bw[16].metadata["window"] == 16
    raw = group.store.fs.glob(group.store.path("runs", group.run_id, "g-osu-test.1", "*"))
    assert sorted(p.rsplit("/", 1)[-1] for p in raw)[:2] == ["osu_bibw.txt", "osu_latency.txt"]


@pytest.mark.slow
def test_peer_killed_mid_run_is_recorded_as_preempted_not_hung(tmp_path, done_server):
    slow = {**SMALL, "benchmarks": ["latency"], "max_size": 1 << 22, "iterations": 3000,
            "iterations_large": 3000, "large_size": 64}
    group = make_group(tmp_path, done_server.url, slow)
    try:
        peer = group.start("peer")
        launcher = group.start("launcher")
        # rank 1 must run as the peer's own child: wait for it, let a few sizes finish, then
        # kill the peer's "instance" (SIGKILL: no chance to clean up)
        rank = _wait_for_rank(peer.pid, timeout=60)
        assert rank is not None, "rank 1 never started under the peer"
        # "a few sizes": 1.5 s of the rank's own CPU (wall time stretches on a loaded machine)
        _wait_for_cpu(rank, seconds=1.5, timeout=60)
        assert launcher.poll() is None, "the run finished before the peer could be killed"
        peer.kill()
        out, _ = launcher.communicate(timeout=90)  # must not hang
        assert launcher.returncode == 0, out
        assert done_server.event.wait(10), "done not called after the peer was lost"
    finally:
        group.stop_all()

    records = group.store.read(group.run_id)
    assert records and all(r.preempted for r in records)
    assert {r.metadata.get("interrupted") for r in records} == {"peer lost"}, out
    sizes = [r.metadata["size_bytes"] for r in records if r.metric == "latency"]
    assert sizes and sizes[-1] < 1 << 22  # cut short before the largest size
    assert all(r.value > 0 for r in records if r.metric == "latency")


def _wait_for_rank(pid: int, timeout: float) -> psutil.Process | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            kids = psutil.Process(pid).children(recursive=True)
            for k in kids:
                if "workloads.osu.harness" in " ".join(k.cmdline()):
                    return k
        except psutil.Error:
            pass
        time.sleep(0.2)
    return None


def _wait_for_cpu(proc: psutil.Process, seconds: float, timeout: float) -> None:
    """Until `proc` has run `seconds` of CPU (or `timeout` of wall time passed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            t = proc.cpu_times()
            if t.user + t.system >= seconds:
                return
        except psutil.Error:
            return
        time.sleep(0.1)


@pytest.mark.slow
def test_launcher_sigterm_stores_what_it_measured_and_calls_done(tmp_path, done_server):
    """A spot reclaim of the launcher's VM: it stores what it measured as preempted and calls
    done, so the peer's VM does not bill until the group's deadline."""
    slow = {**SMALL, "benchmarks": ["latency"], "max_size": 1 << 22, "iterations": 3000,
            "iterations_large": 3000, "large_size": 64}
    group = make_group(tmp_path, done_server.url, slow)
    try:
        peer = group.start("peer")
        launcher = group.start("launcher")
        assert _wait_for_rank(peer.pid, timeout=60), "rank 1 never started under the peer"
        time.sleep(1)
        assert launcher.poll() is None, "the run finished before the launcher could be stopped"
        launcher.send_signal(signal.SIGTERM)
        out, _ = launcher.communicate(timeout=60)
        assert launcher.returncode == 143, out
        assert done_server.event.wait(10), f"done not called after SIGTERM:\n{out}"
    finally:
        group.stop_all()
    body = done_server.calls[0]["body"]
    assert body["group"] == "g-osu-test" and set(body) == {"group", "started_at"}
    records = group.store.read(group.run_id)
    assert records and all(r.preempted for r in records)


@pytest.mark.slow
def test_a_launcher_that_boots_before_its_peer_waits_for_it(tmp_path, done_server):
    """Members' VMs boot at different times: a launcher up 8 s before its peer's sshd waits
    for it, then measures; it once started mpiexec at once and its watchdog called the
    peer lost after 2 s, retrying the whole group."""
    group = make_group(tmp_path, done_server.url, {**SMALL, "benchmarks": ["latency"]})
    try:
        launcher = group.start("launcher")
        time.sleep(8)
        assert launcher.poll() is None, "the launcher gave up before its peer booted"
        peer = group.start("peer")
        out, _ = launcher.communicate(timeout=120)
        assert launcher.returncode == 0, out
        assert done_server.event.wait(10)
        peer.send_signal(signal.SIGTERM)
        peer.wait(timeout=20)
    finally:
        group.stop_all()
    records = group.store.read(group.run_id)
    assert records and not any(r.preempted for r in records), out
    assert {r.metric for r in records} == {"latency"}
