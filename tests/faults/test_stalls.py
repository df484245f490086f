"""Stall detection below the process level (`pytest -m faults`): a training loop's sync
points as its heartbeat (TF; the OSU harness's is proven end to end in test_faults.py), and
what a stalled attempt becomes in the store: kept, flagged, not complete, with its reason;
every stored attempt says why it ended; rows the store refused are logged once."""

from __future__ import annotations

import logging
import types
from pathlib import Path

import pytest

from spotbench.member import MemberContext, Peer
from spotbench.results import ResultStore, StoreError
from workloads.common import WorkloadRun
from workloads.tf_mnist.measure import Outcome, StepTimer

pytestmark = pytest.mark.faults


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _timer(gaps: list[float], wall_extra: float = 0.0, paused_after: float = 0.0) -> StepTimer:
    """Ten steps per sync point at 0.1 s/step, with extra seconds added to some stretches;
    `wall_extra`: the VM paused before the last sync point (its monotonic clock did not see
    it); `paused_after`: the same after the last timed step (the upload, teardown)."""
    mono, wall = Clock(), Clock()
    timer = StepTimer(first_step=0, warmup=10, clock=mono, wall=wall)
    timer.start()
    step = 0
    stretches = [0.0, *gaps]  # the first stretch is warm-up
    for i, extra in enumerate(stretches):
        mono.t += 1.0 + extra
        wall.t += 1.0 + extra + (wall_extra if i == len(stretches) - 1 else 0.0)
        step += 10
        timer.at(step)
    wall.t += paused_after
    return timer


def test_a_training_loop_that_stalled_between_sync_points_is_found() -> None:
    assert _timer([0.0] * 8).stalls(10.0) == []
    [stall] = _timer([0.0, 0.0, 60.0, 0.0, 0.0]).stalls(10.0)
    assert stall["step"] == 40 and stall["gap_s"] == pytest.approx(60.0), stall
    [skew] = _timer([0.0] * 5, wall_extra=30.0).stalls(10.0)
    assert skew["clock_skew_s"] == pytest.approx(30.0), skew
    assert _timer([0.0, 60.0, 0.0]).stalls(0) == []  # off


def test_freeze_after_the_last_timed_step_is_no_stall_of_the_training_loop() -> None:
    """The clocks are compared over the timed window (warm-up end to the last sync point):
    a pause after it (evaluation, the upload) changes no number the loop timed."""
    timer = _timer([0.0] * 5, paused_after=30.0)
    assert timer.stalls(10.0) == []
    window = timer.window
    assert window is not None and (window.end - window.start).total_seconds() == pytest.approx(5.0)


def _run(tmp_path: Path, store: ResultStore | None = None) -> WorkloadRun:
    store = store or ResultStore("file://" + str(tmp_path / "res"))
    store.open_run()
    peers = [Peer(name=f"m{i}", role="peer", index=i, rank=i, host="127.0.0.1", port=1) for i in range(2)]
    ctx = MemberContext(sweep="s", group="g", trial=1, cloud="local", workload="tf-mnist", params={},
                        name="m0", role="chief", index=0, rank=0, members=peers,
                        results_url=store.url, machine_type="local")
    return WorkloadRun(ctx, store)


def test_a_stalled_attempt_is_stored_contaminated_flagged_and_not_complete(tmp_path: Path) -> None:
    run = _run(tmp_path)
    outcome = Outcome(_timer([0.0, 0.0, 60.0, 0.0]), examples_per_step=64, stall_s=10.0)
    outcome.record(run)
    run.finish()
    store, rid = run.store, run.run_id
    [attempt] = store.attempts(rid)
    assert attempt.preempted and attempt.contaminated and "60 s" in attempt.contaminated, attempt
    assert store.flags(rid) == {"g.1": attempt.contaminated}
    assert store.completed_groups(rid) == set()  # retried within the group's budget
    rows = store.read(rid)
    assert rows and all(r.metadata["stop_reason"] == "finished" and r.metadata["stalls"] for r in rows)


def test_every_attempt_says_why_it_ended(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.record("steps", 1.0, "steps")
    run.finish(preempted=True, interrupted="worker lost: w1")
    [row] = run.store.read(run.run_id)
    assert row.metadata["stop_reason"] == "worker lost: w1"


def test_rows_the_store_refuses_are_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(tmp_path)
    monkeypatch.setattr("workloads.common.STORE_RETRY_S", 0.0)

    def refuse(*args: object, **kwargs: object) -> str:
        raise StoreError("results store: Read-only file system")

    monkeypatch.setattr(run.store, "write_group", refuse)
    run.record("latency", 1.0, "us")
    with caplog.at_level(logging.ERROR, logger="spotbench.workload"):
        for preempted in (False, True):  # finish, then the SIGTERM that done's stop sends
            with pytest.raises(StoreError):
                run.finish(preempted=preempted)
    assert sum("records follow as JSON lines" in r.message for r in caplog.records) == 1


HEARTBEAT_CHILD = """
import json, time
from unittest import mock
from workloads.common import WorkloadRun
run = WorkloadRun.__new__(WorkloadRun)
run.stalls = []
print("ready", flush=True)
with run.heartbeat("a command", stall_s=1.0, period=0.1):
    time.sleep(4.0)
print(json.dumps(run.stalls), flush=True)
"""


def test_a_heartbeat_thread_sees_its_process_stopped(tmp_path: Path) -> None:
    """The container runner's heartbeat: SIGSTOP the process for 2 s mid-measurement."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-c", HEARTBEAT_CHILD], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGSTOP)
    time.sleep(2.0)
    os.kill(proc.pid, signal.SIGCONT)
    out, _ = proc.communicate(timeout=30)
    [stall] = json.loads(out.strip().splitlines()[-1])
    assert stall["what"] == "a command" and stall["loop_gap_s"] > 1.5, stall


TWICE_CHILD = """
import os, signal, time
import workloads.common as common
from workloads.common import WorkloadRun

def warning(*args, **kwargs):  # the second SIGTERM lands while the first is being handled
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.2)

common.log.warning = warning
run = WorkloadRun.__new__(WorkloadRun)
run.stored_path = None
stored = []
run.finish = lambda **kw: stored.append(kw)
try:
    with run.preemptible():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
except SystemExit as exc:
    print("stored", len(stored), "exit", exc.code, flush=True)
"""


def test_a_second_sigterm_while_storing_does_not_lose_the_attempt() -> None:
    """Under the host deadline a member's group gets SIGTERM from its supervisor and from
    coreutils `timeout` at once: the second must not interrupt storing the first's rows."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", TWICE_CHILD], capture_output=True, text=True, timeout=30)
    assert "stored 1 exit 143" in out.stdout, (out.stdout, out.stderr[-2000:])


class FakeComm:
    """Rank `rank` of two; rank 1's figures as rank 0 receives them."""

    def __init__(self, rank: int, theirs: list[float] | None = None) -> None:
        self.rank, self.theirs, self.sent = rank, theirs, []

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's name
        return self.rank

    def send(self, obj, dest: int, tag: int) -> None:
        self.sent.append(obj)

    def recv(self, source: int, tag: int):
        return self.theirs


def _beat(monkeypatch: pytest.MonkeyPatch, *, mono_step: float, wall_step: float):
    """An OSU harness heartbeat over ten iterations 0.01 s apart, then one stretch where the
    monotonic clock moved `mono_step` and the wall clock `wall_step`."""
    from workloads.osu import harness

    mono, wall = Clock(), Clock()
    monkeypatch.setattr(harness.time, "monotonic", mono)
    monkeypatch.setattr(harness.time, "time", wall)
    beat = harness.Beat(stall_s=2.0)
    for _ in range(10):
        mono.t += 0.01
        wall.t += 0.01
        beat()
    mono.t += mono_step
    wall.t += wall_step
    beat()
    return beat


def test_a_paused_vm_is_found_by_its_clocks_disagreeing(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture) -> None:
    """A paused VM's monotonic clock misses the pause and its wall clock is stepped back in
    line (kvmclock, docs/platform.md): no gap on its own loop, a clock skew instead."""
    beat = _beat(monkeypatch, mono_step=0.01, wall_step=30.0)
    beat.report(FakeComm(0, theirs=[0.01, 0.0]), size=8, stall_s=2.0)
    err = capsys.readouterr().err
    from workloads.osu.launch import stalls

    [stall] = stalls(err)
    assert stall["rank"] == 0 and stall["clock_skew_s"] == pytest.approx(29.99, abs=0.02), err
    assert stall["gap_s"] < 2.0, err


def test_a_rank_whose_own_clocks_saw_nothing_is_caught_by_its_peers_view(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """The heartbeat's arrival: rank 0's VM paused and its clocks noticed nothing (no gap, no
    skew yet); rank 1 waited on rank 0 for 6 s by its own clock, and its figures reach rank 0,
    which reports the stall."""
    beat = _beat(monkeypatch, mono_step=0.01, wall_step=0.01)
    beat.report(FakeComm(0, theirs=[6.0, 0.0]), size=1024, stall_s=2.0)
    from workloads.osu.launch import stalls

    [stall] = stalls(capsys.readouterr().err)
    assert stall == {"size_bytes": 1024, "rank": 1, "gap_s": 6.0, "clock_skew_s": 0.0}, stall


def test_rank_one_sends_its_figures_to_rank_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    beat = _beat(monkeypatch, mono_step=5.0, wall_step=5.0)
    comm = FakeComm(1)
    beat.report(comm, size=8, stall_s=2.0)
    [(gap, skew)] = comm.sent
    assert gap == pytest.approx(5.0) and skew == pytest.approx(0.0), comm.sent


def test_the_container_heartbeat_sees_a_paused_vm_by_its_clocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The container runner's heartbeat thread: its monotonic ticks on time, the wall clock
    jumps 30 s (a paused VM, stepped back in line): a stall with its clock skew."""
    import time

    import workloads.common as common

    jump = {"s": 0.0}
    real = time.time
    monkeypatch.setattr(common.time, "time", lambda: real() + jump["s"])
    run = WorkloadRun.__new__(WorkloadRun)
    run.stalls = []
    with run.heartbeat("a command", stall_s=2.0, period=0.05):
        time.sleep(0.2)
        jump["s"] = 30.0
        time.sleep(0.2)
    [stall] = run.stalls
    assert stall["clock_skew_s"] == pytest.approx(30.0, abs=0.5) and stall["loop_gap_s"] < 2.0, stall


def test_a_vm_paused_while_a_users_image_ran_makes_collect_note_a_stall(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a cloud VM no spotbench process lives while the user's image runs: `check` notes
    the host's clocks, `collect` compares them. A pause (monotonic missed 30 s the wall
    clock was stepped over) is a stall; clocks that agree are none."""
    import time

    import workloads.container.__main__ as container

    monkeypatch.setattr(container, "exit_if_outside_run", lambda ctx: None)
    one_node = types.SimpleNamespace(params={"name": "container", "command": ["true"]})  # check reads `nodes`
    monkeypatch.setattr(container.MemberContext, "from_env", classmethod(lambda cls: one_node))
    monkeypatch.delenv("SPOTBENCH_RUN", raising=False)
    assert container.check(tmp_path) == 0
    run = WorkloadRun.__new__(WorkloadRun)
    run.stalls, run.records = [], []
    container.clock_stall(run, tmp_path)
    assert run.stalls == []  # the clocks agree
    real = time.time
    monkeypatch.setattr(container.time, "time", lambda: real() + 30.0)
    container.clock_stall(run, tmp_path)
    [stall] = run.stalls
    assert stall["clock_skew_s"] == pytest.approx(30.0, abs=0.5), stall
    assert run.contamination().startswith("stalled: the VM while the user's command ran"), run.stalls
    (tmp_path / container.CLOCKS_FILE).write_text("garbage\n")  # unreadable: checks nothing
    run.stalls = []
    container.clock_stall(run, tmp_path)
    assert run.stalls == []


def test_collect_stores_an_attempt_across_a_paused_vm_contaminated_and_flagged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`collect` after the user's image, the VM paused meanwhile: the attempt is stored
    contaminated and flagged (here through the stopped path, which calls no `done`)."""
    import time

    import workloads.container.__main__ as container
    from spotbench.spec import load_spec

    store = ResultStore("file://" + str(tmp_path / "res"))
    run_id = store.open_run().run
    spec = load_spec({"name": "c", "cloud": "local",
                      "workload": {"name": "container", "command": ["true"]}})
    group = spec.plan()[0]
    me = group.members[0]
    ctx = MemberContext.for_member(group, me, addresses={me.name: ("127.0.0.1", 1)}, cloud="local",
                                   results_url=store.url, done_url="http://127.0.0.1:9/done")
    for key, value in ctx.to_env().items():
        monkeypatch.setenv(key, value)
    folder = tmp_path / "dir"
    (folder / container.RESULTS).mkdir(parents=True)
    (folder / container.RUN_FILE).write_text(run_id + "\n")
    (folder / container.STDOUT).write_text("work_s=6 s\n")
    (folder / container.CLOCKS_FILE).write_text(f"{time.monotonic() - 10!r} {time.time() - 40!r}\n")
    with pytest.raises(SystemExit):
        container.collect(folder, 143, stopped=True)
    [attempt] = store.attempts(run_id)
    assert attempt.contaminated and "the VM while the user's command ran" in attempt.contaminated, attempt
    assert store.flags(run_id) == {attempt.key: attempt.contaminated}


def test_freeze_counts_only_where_it_overlaps_a_records_timed_window(tmp_path: Path) -> None:
    """The one rule (spotbench.timed), as the detector applies it: a stall after the last
    timed value (the upload) leaves the attempt complete; one inside the window
    contaminates it; a stall with no known time always counts."""
    from spotbench.timed import Window

    timed = Window.between(1000.0, 1010.0)
    after = _run(tmp_path / "after")
    after.record("steps_per_s", 10.0, "steps/s", timed=timed)
    after.stalled("the upload", 6.0, window=Window.between(1011.0, 1017.0))
    assert after.contamination() is None
    after.finish()
    [attempt] = after.store.attempts(after.run_id)
    assert not attempt.preempted and after.store.flags(after.run_id) == {}
    [row] = after.store.read(after.run_id)
    assert Window.of(row.metadata) == timed and "stalls" not in row.metadata

    inside = _run(tmp_path / "inside")
    inside.record("steps_per_s", 10.0, "steps/s", timed=timed)
    inside.stalled("training", 6.0, window=Window.between(1004.0, 1010.5))
    assert (inside.contamination() or "").startswith("stalled: training")

    unknown = _run(tmp_path / "unknown")
    unknown.record("steps_per_s", 10.0, "steps/s", timed=timed)
    unknown.stalled("a loop", 6.0)
    assert unknown.contamination() is not None


def test_freeze_windows_from_the_osu_harness_time_its_rows(tmp_path: Path) -> None:
    """The harness says each size's timed loop (`spotbench-timed`); the launcher gives the
    size's row that window, and a stall of that size the same one."""
    from spotbench.timed import Window
    from workloads.osu import launch

    err = ("spotbench-timed size=0 from=1000.000000 to=1002.000000\n"
           "spotbench-timed size=1 from=1002.100000 to=1009.000000\n"
           "spotbench-stall size=1 rank=1 gap_s=3.100 clock_skew_s=0.000\n")
    windows = launch.timed_windows(err)
    assert windows == {0: Window.between(1000.0, 1002.0), 1: Window.between(1002.1, 1009.0)}
    run = _run(tmp_path)
    for size in (0, 1):
        run.record("latency", 1.0 + size, "us", benchmark="latency", size_bytes=size)
    for size, window in windows.items():
        run.retime(window, benchmark="latency", size_bytes=size)
    assert [Window.of(r.metadata) for r in run.records] == [windows[0], windows[1]]


def test_freeze_timing_marks_and_windows_from_the_c_and_python_harnesses(tmp_path: Path) -> None:
    """Both OSU harnesses (C and mpi4py) print each size's timed window and, for fault
    injection, mark each timed loop's start as a file before it is timed."""
    import os
    import subprocess
    import sys

    from workloads.osu import cbuild, launch

    mpiexec = Path(sys.executable).with_name("mpiexec")
    if not mpiexec.exists():
        pytest.skip("mpiexec (the mpich wheel) is not installed")
    heads = [[sys.executable, "-m", "workloads.osu.harness"]]
    exe = cbuild.harness_binary()
    if exe is not None:
        heads.append([str(exe)])
    for i, head in enumerate(heads):
        edges = tmp_path / f"edges{i}"
        edges.mkdir()
        env = {**os.environ, "SPOTBENCH_FAULT_EDGES": str(edges)}
        out = subprocess.run([str(mpiexec), "-n", "2", *head, "latency", "-m", "1", "-i", "50", "-x", "5",
                              "--stall-s", "30"], capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        windows = launch.timed_windows(out.stderr)
        assert sorted(windows) == [0, 1] and windows[0].end <= windows[1].start, out.stderr
        assert sorted(p.name for p in edges.iterdir()) == ["osu.latency.0.timing", "osu.latency.1.timing"]
