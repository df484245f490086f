"""Frozen members (issue #40): a fault placed provably inside a workload's timed window, or
provably after it, never by a sleep. Same contract as `scenarios.py`.

How a freeze is placed: the members mark the edges of their timed region as files in a
folder (`SPOTBENCH_FAULT_EDGES`, `workloads.common.mark_edge`; the OSU harnesses mark
each size's timed loop) and, while `<edge>.hold` exists there, hold at that edge, outside
the timed region. A scenario creates the hold, waits for the mark, freezes the member's
process tree, then lifts the hold: the member resumes with its peer frozen, so a freeze at
`measuring` lies inside the timed window on any machine (the chief cannot finish a timed
step without its only worker), and one at `measured` lies after the last timed step.

What counts as measured across a fault is `spotbench.timed`'s rule, the detector's own:
a row is contaminated when a fault window overlaps the window the row says it was timed
over (its `metadata.timed`; a row with none is taken over its launch's whole life).
"""

from __future__ import annotations

import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spotbench.ledger import attributed, launches_of
from spotbench.timed import Window, contaminated
from workloads.common import EDGES_ENV

from tests.faults.harness import FaultSweep, close_figures as _close, wait_for
from tests.faults.scenarios_stall_state import _signal_tree, _tree


def unflagged_across(sw: FaultSweep, windows: list[Window]) -> int:
    """Rows of stored attempts measured across a fault window (the one rule, above) yet
    read back as complete (neither preempted nor flagged): numbers taken across a stall,
    counted as normal."""
    store, bad = sw.store, 0
    now = datetime.now(UTC)
    for info in store.runs():
        flags = store.flags(info.run)
        attempts = store.attempts(info.run)
        owners = attributed(launches_of(store, info.run), attempts)  # control's own times
        for a in attempts:
            if a.preempted or a.key in flags or a.key not in owners:
                continue
            launch = owners[a.key]
            life = Window(launch.at, launch.end(now))
            rows = store.load_attempt(store.path("runs", info.run, f"{a.key}.jsonl")) or []
            bad += sum(1 for r in rows if any(contaminated(Window.of(r.metadata) or life, w) for w in windows))
    return bad


def in_launch(sw: FaultSweep, window: Window) -> bool:
    """Whether a fault window lies within some launch's life (so a rule taking an attempt's
    whole life, not its timed window, would count the attempt's rows)."""
    now = datetime.now(UTC)
    for info in sw.store.runs():
        for launch in launches_of(sw.store, info.run):
            if Window(launch.at, launch.end(now)).overlaps(window):
                return True
    return False


def _freeze(pid: int, seconds: float, *, then: Any = None) -> Window:
    """SIGSTOP a process tree, run `then()` (lift a hold), wait `seconds`, SIGCONT."""
    frozen = _tree(pid)
    began = time.time()
    _signal_tree(frozen, signal.SIGSTOP)
    if then is not None:
        then()
    time.sleep(seconds)
    _signal_tree(frozen, signal.SIGCONT)
    return Window.between(began, time.time())


def _attempts(sw: FaultSweep) -> list[dict[str, Any]]:
    store, out = sw.store, []
    for info in store.runs():
        flags = store.flags(info.run)
        for a in store.attempts(info.run):
            rows = store.load_attempt(store.path("runs", info.run, f"{a.key}.jsonl")) or []
            rate = next((r.value for r in rows if r.metric == "steps_per_s"), None)
            out.append({"key": a.key, "preempted": a.preempted, "flag": flags.get(a.key),
                        "contaminated": a.contaminated, "steps_per_s": rate,
                        "launches": store.launch_count(info.run, a.group),
                        "stalls": rows[0].metadata.get("stalls") if rows else None,
                        "timed": [r.metadata.get("timed") for r in rows]})
    return out


def _edges(root: Path, *holds: str) -> Path:
    folder = root / "edges"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)  # members may run as another uid
    for edge in holds:
        (folder / f"{edge}.hold").touch()
    return folder


FREEZE_S = 3.0  # longer than OSU's default stall_s (2 s)


def osu_freeze(root: Path) -> dict[str, Any]:
    """SIGSTOP the OSU peer's whole process tree (member, exec agent, MPI rank) for 3 s the
    moment rank 0 marks the start of the first latency size's timed loop (400,000 round
    trips: far longer than the poll that sees the mark), then SIGCONT: the attempt is
    stored contaminated (flagged, kept), the group is retried within its budget and the
    retry completes."""
    edges = _edges(root)
    # at load 20-25 on two cores an attempt takes 1-3 min: the deadline leaves the retry room
    sw = FaultSweep(root, "ffreeze", trials=1, deadline="5m", osu={"iterations": 400_000, "max_size": 1},
                    env={EDGES_ENV: str(edges)})
    sw.run()
    windows: list[Window] = []
    try:
        peer = wait_for(lambda: sw.running("peer"), 90, "a running peer")
        wait_for(lambda: (edges / "osu.latency.0.timing").exists(), 180, "the first size's timed loop")
        windows.append(_freeze(sw.pid_of(peer), FREEZE_S))
        sw.faults.append({"fault": f"SIGSTOP to the peer's process tree for {FREEZE_S:g} s",
                          "detect_s": 0.0})
        rc, out = sw.finish(600)
    finally:
        sw.kill_runner()
    return _close(sw, rc, out, attempts=_attempts(sw), unflagged_contaminated=unflagged_across(sw, windows))


TF_FREEZE_S = 6.0  # twice the spec's stall_s below
# chief + ps + one worker on 2048 synthetic images, a sync point every 5 steps: 25 steps
# measured after a warm-up of 5; the other stretches set the median pace
TINY_TF = {"name": "tf-mnist", "strategy": "parameter_server", "workers": 1, "dataset": "synthetic",
           "steps": 30, "warmup_steps": 5, "batch_size": 16, "stall_s": 3.0}
TF_ENV = {"SPOTBENCH_TF_SYNC_EVERY": "5", "TF_CPP_MIN_LOG_LEVEL": "3"}


def _tf_frozen_at(root: Path, edge: str, name: str) -> tuple[FaultSweep, int, str, list[Window]]:
    """A tiny TF sweep whose chief holds at `edge`; the worker's tree frozen for 6 s there."""
    edges = _edges(root, edge)
    sw = FaultSweep(root, name, trials=1, deadline="4m", workload=TINY_TF,
                    env={**TF_ENV, EDGES_ENV: str(edges)})
    sw.run()
    try:
        chief = wait_for(lambda: sw.running("chief"), 90, "a running chief")
        wait_for(lambda: (edges / f"{chief.name}.{edge}").exists(), 180, f"the chief at {edge}")
        worker = wait_for(lambda: sw.running("worker"), 10, "a running worker")
        window = _freeze(sw.pid_of(worker), TF_FREEZE_S, then=(edges / f"{edge}.hold").unlink)
        sw.faults.append({"fault": f"SIGSTOP to a TF worker's process tree for {TF_FREEZE_S:g} s "
                                   f"at the chief's `{edge}` edge", "detect_s": 0.0})
        rc, out = sw.finish()
    finally:
        sw.kill_runner()
    return sw, rc, out, [window]


def tf_freeze(root: Path) -> dict[str, Any]:
    """The worker's tree frozen for 6 s as the chief's timed steps begin (stall_s 3 s), then
    SIGCONT: the chief's sync points see the stretch; the attempt is stored contaminated
    (kept, flagged), the group is retried within its budget, the retry completes, and the
    report shows the flagged attempt apart from the averages."""
    sw, rc, out, windows = _tf_frozen_at(root, "measuring", "ftffreeze")
    return _close(sw, rc, out, attempts=_attempts(sw), unflagged_contaminated=unflagged_across(sw, windows),
                  report=_report_text(sw))


def tf_freeze_after(root: Path) -> dict[str, Any]:
    """The worker's tree frozen for 6 s right after the chief's last timed step (while it
    evaluates and stores): no number was timed across it, so the attempt is complete and
    counted, nothing is flagged or retried, and no row counts as measured across it."""
    sw, rc, out, windows = _tf_frozen_at(root, "measured", "ftfafter")
    return _close(sw, rc, out, attempts=_attempts(sw), unflagged_contaminated=unflagged_across(sw, windows),
                  freeze_in_launch=in_launch(sw, windows[0]), freeze=windows[0].span())


def _report_text(sw: FaultSweep) -> str:
    """The Markdown report of the sweep's results."""
    from spotbench.report import write_report

    return write_report(sw.store.url, sw.root / "report").markdown.read_text()


CONTAINER_FREEZE_S = 8.0  # longer than the container runner's heartbeat threshold (STALL_S, 5 s)
# the user's command: marks that it works, then waits for the scenario's release (after the
# freeze), then reports its metric: its run, the values' timed window, outlasts the freeze
HELD_COMMAND = ("import pathlib, sys, time; d = pathlib.Path(sys.argv[1]); (d / 'command.working').touch(); "
                "[time.sleep(0.05) for _ in iter(lambda: (d / 'command.release').exists(), True)]; "
                "print('work_s=6 s', flush=True)")


def container_freeze(root: Path) -> dict[str, Any]:
    """SIGSTOP a `container` member's process tree (the runner and the user's command) for
    8 s while the command works, then SIGCONT: the runner's heartbeat thread sees its ticks
    late; the attempt is stored contaminated (kept, flagged), the group retried, the retry
    completes."""
    from workloads.common import STALL_S

    assert CONTAINER_FREEZE_S > STALL_S
    edges = _edges(root)
    sw = FaultSweep(root, "fcfreeze", trials=1, deadline="2m",
                    workload={"name": "container", "command": [sys.executable, "-c", HELD_COMMAND, str(edges)]})
    sw.run()
    windows: list[Window] = []
    try:
        member = wait_for(lambda: sw.running("member"), 90, "a running member")
        wait_for(lambda: (edges / "command.working").exists(), 60, "the user's command at work")
        windows.append(_freeze(sw.pid_of(member), CONTAINER_FREEZE_S))
        (edges / "command.release").touch()
        sw.faults.append({"fault": f"SIGSTOP to a container member's process tree for "
                                   f"{CONTAINER_FREEZE_S:g} s", "detect_s": 0.0})
        rc, out = sw.finish()
    finally:
        sw.kill_runner()
    return _close(sw, rc, out, attempts=_attempts(sw), unflagged_contaminated=unflagged_across(sw, windows))
