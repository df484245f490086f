"""`spotbench run` tells a person what happens: each deadline retry announced once as a
sentence ("attempt 1 of 3: deadline 10 s exceeded"), faults summed up in sentences (no
dicts), and a second `run` of a live sweep says "already running" instead of stopping the
first one's functions server (issue #27, items 4 and 6)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from spotbench import control
from spotbench.localrun import live, runner, takeover
from spotbench.clouds.local.state import LocalState
from spotbench.results import ResultStore
from spotbench.spec import load_spec
from tests.test_control import MemoryCloud


class Enough(Exception):
    pass


def test_a_deadline_overrun_is_announced_once_per_attempt(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(runner, "POLL_S", 0.0)
    clock = iter(range(0, 10_000, 4))  # every poll is 4 s later: the 10 s deadline passes
    monkeypatch.setattr(runner.time, "monotonic", lambda: float(next(clock)))
    spec = load_spec({"name": "w", "workload": {"name": "container", "command": "sleep 60"},
                      "deadline": "10s"})
    groups = spec.plan()
    gid = groups[0].id
    store = ResultStore(f"file://{tmp_path}")
    cloud = MemoryCloud(groups)
    sweep = control.Sweep(spec=spec, cloud=cloud, store=store, groups=groups)
    run = store.open_run().run
    store.record_launch(run, gid)
    cloud.start(groups[0].labels)
    stops = []

    def stop_tick(overdue, reason):
        stops.append((list(overdue), reason))
        cloud.stop(groups[0].labels)

    scheduler = SimpleNamespace(answers=[{"action": "start", "run": run}], state=None, stop_tick=stop_tick)
    server = SimpleNamespace(proc=None, url="http://127.0.0.1:9")
    seen: list[list[str]] = []

    def on_progress(p: runner.Progress) -> None:
        seen.append(list(p.events))
        assert len(seen) < 20

    def kick(url, token, body):  # the group ended: the runner asks start for a retry
        raise Enough

    monkeypatch.setattr(runner, "post", kick)

    faults: list[dict] = []
    with pytest.raises(Enough):
        runner._watch(sweep, scheduler, server, "token", False, on_progress, faults)
    assert stops == [([gid], "group deadline")]
    assert seen[-1] == [f"{gid}: attempt 1 of 3: deadline 10 s exceeded; stopped, attempt 2 of 3 follows"]
    assert runner.overrun_sentence(gid, 3, 10).endswith("no attempt left in this run: the group gave up")
    # the end of the run sums it up in a sentence, not a dict
    faults += faults * 2
    text = live.fault_sentences(faults, 10)
    assert text == [f"{gid} passed its 10 s deadline 3 times and was stopped each time "
                    "(each group gets up to 3 attempts per run)"]


def test_progress_without_a_terminal_is_plain_lines_with_elapsed_time(capsys) -> None:
    from rich.console import Console

    reporter = live._Reporter(Console(file=sys.stdout, force_terminal=False, width=200))
    progress = runner.Progress(total=2, running={"g1"}, message="running")
    reporter(progress)
    reporter(progress)  # unchanged: not printed again
    progress.events.append("g1: attempt 1 of 3: deadline 10 s exceeded; stopped, attempt 2 of 3 follows")
    progress.completed = {"g2"}
    reporter(progress)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "0s · 0/2 groups complete · running (g1)"
    assert lines[1].startswith("g1: attempt 1 of 3") and lines[2] == "0s · 1/2 groups complete · running (g1)"
    assert len(lines) == 3 and "\x1b" not in "".join(lines)


def test_progress_says_stopping_once_every_live_group_is_complete() -> None:
    assert runner.run_state({"g1", "g2"}, {"g2"}, True) == "running"
    assert runner.run_state({"g2"}, {"g1", "g2"}, True) == "stopping"  # complete, shutting down
    assert runner.run_state(set(), {"g1"}, True) == "idle"
    assert runner.run_state(set(), {"g1"}, False) == "run closed"


def test_a_second_run_of_a_live_sweep_says_already_running(tmp_path: Path) -> None:
    state = LocalState("busy", root=tmp_path)
    # a live runner (this test's parent stands in) and its functions server (a child that
    # says 'functions' on its command line, as the real one does)
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "functions"])
    try:
        runner_proc = psutil.Process(os.getppid())
        state.functions = {"url": "http://127.0.0.1:1", "port": 1, "pid": server.pid,
                           "ctime": psutil.Process(server.pid).create_time(),
                           "runner_pid": runner_proc.pid, "runner_ctime": runner_proc.create_time()}
        with pytest.raises(takeover.AlreadyRunning, match=rf"busy is already running: `spotbench run` pid "
                                                          rf"{runner_proc.pid}.*kill {runner_proc.pid}"):
            takeover.take_over_server(state, [])
        assert server.poll() is None  # its server was left alone
        # the runner gone (killed): its leftover server is taken over as before
        state.functions = {**state.functions, "runner_pid": 2**22 + 7}
        faults: list[dict] = []
        takeover.take_over_server(state, faults)
        assert server.wait(timeout=10) is not None and faults[0]["fault"] == "orphaned functions server"
    finally:
        server.kill()
