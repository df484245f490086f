"""The second round of fault scenarios (issue #28): a frozen OSU peer, launchers killed,
runner and supervisors killed with no re-run, a corrupt or full local state. Same contract
as `scenarios.py` (which lists them all in `SCENARIOS`)."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from spotbench.ledger import attributed, launches_of

from tests.faults.harness import (
    GRACE_S,
    FaultSweep,
    can_mount,
    close_figures as _close,
    free_after,
    mount,
    summary_states,
    umount,
    wait_for,
)

def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _signal_tree(procs: list[psutil.Process], sig: signal.Signals) -> None:
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(sig)


def unflagged_across(sw: FaultSweep, windows: list[tuple[datetime, datetime]]) -> int:
    """Rows of stored attempts that ran across a fault window yet read back as complete
    (neither preempted nor flagged): numbers taken across a stall, counted as normal."""
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
            if any(launch.at < end and start < launch.end(now) for start, end in windows):
                path = store.path("runs", info.run, f"{a.key}.jsonl")
                bad += sum(1 for line in store.fs.cat_file(path).decode().splitlines() if line.strip())
    return bad


FREEZE_S = 3.0  # longer than OSU's default stall_s (2 s)


def osu_freeze(root: Path) -> dict[str, Any]:
    """SIGSTOP the OSU peer's whole process tree (member, exec agent, MPI rank) for 3 s
    mid-measurement, then SIGCONT: the attempt is stored contaminated (flagged, kept), the
    group is retried within its budget and the retry completes."""
    # long enough to still be measuring after the rank is seen and 1 s more, on an idle machine;
    # at load 20-25 on two cores an attempt takes 1-3 min: the deadline leaves the retry room
    sw = FaultSweep(root, "ffreeze", trials=1, deadline="5m", osu={"iterations": 400_000, "max_size": 1})
    sw.run()
    windows: list[tuple[datetime, datetime]] = []
    try:
        peer = wait_for(lambda: sw.running("peer"), 90, "a running peer")
        pid = sw.pid_of(peer)
        wait_for(lambda: any("osu_pt2pt" in " ".join(p.cmdline()) or "workloads.osu.harness" in
                             " ".join(p.cmdline()) for p in _tree(pid) if p.is_running()),
                 60, "the peer's MPI rank")
        time.sleep(1.0)  # inside the first size's timed loop
        frozen = _tree(pid)
        began = datetime.now(UTC)
        _signal_tree(frozen, signal.SIGSTOP)
        time.sleep(FREEZE_S)
        _signal_tree(frozen, signal.SIGCONT)
        windows.append((began, datetime.now(UTC)))
        sw.faults.append({"fault": f"SIGSTOP to the peer's process tree for {FREEZE_S:g} s",
                          "detect_s": 0.0})
        rc, out = sw.finish(600)
    finally:
        sw.kill_runner()
    store = sw.store
    attempts = []
    for info in store.runs():
        flags = store.flags(info.run)
        attempts += [{"key": a.key, "preempted": a.preempted, "flag": flags.get(a.key),
                      "contaminated": a.contaminated} for a in store.attempts(info.run)]
    return _close(sw, rc, out, attempts=attempts, unflagged_contaminated=unflagged_across(sw, windows))


LONG_OSU = {"iterations": 10_000_000, "max_size": 1}  # runs until stopped


def _sweep_gone_at(sw: FaultSweep, timeout: float) -> float | None:
    """When (time.time()) the last process of the sweep was gone, or None if some outlived
    `timeout`."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not sw.leaked():
            return time.time()
        time.sleep(0.2)
    return None


def runner_sigkill_no_rerun(root: Path, deadline_s: int = 12) -> dict[str, Any]:
    """SIGKILL to `spotbench run` and to every supervisor mid-group, and nobody runs it
    again: the members stop by themselves at their group's deadline + grace (the host's
    deadline), not later. Billing tail: how long the last process outlived the deadline.
    Only then is `spotbench run` run again: it continues the open run and closes it."""
    sw = FaultSweep(root, "fnorerun", trials=1, deadline=f"{deadline_s}s", osu=LONG_OSU)
    proc = sw.run()
    try:
        wait_for(lambda: sw.running("launcher") and sw.running("peer"), 90, "a running group")
        supervisors = [p for p in psutil.process_iter(["cmdline"])
                       if "spotbench.clouds.local._local_supervisor" in (p.info["cmdline"] or [])
                       and str(sw.state.db_path) in (p.info["cmdline"] or [])]
        proc.kill()
        proc.communicate()
        _signal_tree(supervisors, signal.SIGKILL)
        run = sw.store.runs()[-1].run
        group = sw.instances()[0].group()
        launched = sw.store.last_launch(run, group)
        gone = _sweep_gone_at(sw, deadline_s + GRACE_S + 60)
        leaked = free_after(1, sw.leaked)
        open_before = [r.run for r in sw.store.runs() if r.closed_at is None]
        sw.run()
        rc, out = sw.finish()
    finally:
        sw.kill_runner()
    assert launched is not None
    tail = None if gone is None else round(gone - launched.timestamp() - deadline_s, 2)
    sw.faults.append({"fault": "SIGKILL to spotbench run and every supervisor, no re-run",
                      "billed_after_deadline_s": tail, "supervisors_killed": len(supervisors)})
    closed = _close(sw, rc, out, billing_tail_s=tail, open_before_rerun=open_before)
    return {**closed, "leaked": leaked + closed["leaked"]}


def _corrupt(path: Path, text: bytes = b"\x00garbage{") -> None:
    path.write_bytes(text)


def corrupt_run_ledger(root: Path) -> dict[str, Any]:
    """The open run's run.json turns to garbage mid-group: `spotbench run` stops every
    group and exits with one message naming the file and the fix; the next `spotbench
    run` says the same at once, starts nothing and does not wait for a tick."""
    sw = FaultSweep(root, "fledger", trials=1, osu=LONG_OSU)
    sw.run()
    try:
        wait_for(lambda: sw.running("launcher"), 90, "a running launcher")
        ledger = sw.results / "runs" / sw.store.runs()[-1].run / "run.json"
        _corrupt(ledger)
        hit = time.monotonic()
        rc, out = sw.finish(90)
        sw.faults.append({"fault": "run.json of the open run corrupt", "run_ended_s":
                          round(time.monotonic() - hit, 3)})
        leaked = free_after(GRACE_S + 3, sw.leaked)
        sw.run()
        rc2, out2 = sw.finish(60)
    finally:
        sw.kill_runner()
    return {"faults": sw.faults, "rc": rc, "output": out[-3000:], "rc_again": rc2,
            "output_again": out2[-3000:], "ledger": str(ledger), "states": summary_states(out),
            "rows_lost": 0, "rows_duplicated": 0, "leaked": leaked + free_after(GRACE_S + 3, sw.leaked),
            "instances_on": [i.name for i in sw.instances() if i.state.value != "STOPPED"]}


STATE_FILES = ("cloud.db", "secret", "schedule.json")


def corrupt_state_file(root: Path, name: str) -> dict[str, Any]:
    """A file of the sweep's local state is garbage before `spotbench run`: one message
    naming it and the fix, exit non-zero, nothing started, nothing left running."""
    sw = FaultSweep(root, "fcorrupt", trials=1)
    sw.state.secret()  # the folder as a first run leaves it
    sw.state.update_schedule(paused=False)
    from spotbench.clouds.local.cloud import LocalCloud as _Cloud  # creates cloud.db

    _Cloud(sw.state.db_path)
    _corrupt(sw.state.dir / name, b"SQLite format 3\x00" + b"\xff" * 200 if name == "cloud.db" else b"\x00{[")
    sw.run()
    try:
        rc, out = sw.finish(60)
    finally:
        sw.kill_runner()
    sw.faults.append({"fault": f"{name} corrupt", "detect_s": 0.0})
    return {"faults": sw.faults, "rc": rc, "output": out[-3000:], "file": str(sw.state.dir / name),
            "states": {}, "rows_lost": 0, "rows_duplicated": 0,
            "leaked": free_after(GRACE_S + 3, sw.leaked), "results": sorted(
                str(p.relative_to(sw.results)) for p in sw.results.rglob("*.jsonl"))
            if sw.results.exists() else []}


def state_disk_full(root: Path) -> dict[str, Any]:
    """The disk under the sweep's state folder (`.spotbench/`: cloud.db, logs) fills up
    mid-group: `spotbench run` ends with one message naming cloud.db and the fix, exit
    non-zero, and no process of the sweep is left running (the supervisors do not crash
    and leave a member without a time limit)."""
    why = can_mount(root)
    if why:
        return {"skipped": why}
    state = root / "state"
    state.mkdir()
    mount("-t", "tmpfs", "-o", "size=4m", "tmpfs", str(state))
    try:
        sw = FaultSweep(root, "fstatefull", trials=2, deadline="20s",
                        osu={"iterations": 20_000, "max_size": 1})
        sw.run()
        try:
            wait_for(lambda: sw.running("launcher"), 90, "a running launcher")
            subprocess.run(["dd", "if=/dev/zero", f"of={state}/filler", "bs=4k"], capture_output=True)
            hit = time.monotonic()
            sw.faults.append({"fault": "state disk full"})
            rc, out = sw.finish(120)
            sw.faults[-1]["run_ended_s"] = round(time.monotonic() - hit, 3)
            leaked = free_after(GRACE_S + 3, sw.leaked)
        finally:
            sw.kill_runner()
    finally:
        (state / "filler").unlink(missing_ok=True)
        umount(state)
    return {"faults": sw.faults, "rc": rc, "output": out[-3000:], "states": summary_states(out),
            "rows_lost": 0, "rows_duplicated": 0, "leaked": leaked,
            "open_runs": [r.run for r in sw.store.runs() if r.closed_at is None]}


def stored_attempts(sw: FaultSweep) -> list[dict[str, Any]]:
    """Every stored attempt: its file's number, the launches of its group, why it ended."""
    store, out = sw.store, []
    for info in store.runs():
        for a in store.attempts(info.run):
            path = store.path("runs", info.run, f"{a.key}.jsonl")
            first = json.loads(store.fs.cat_file(path).decode().splitlines()[0])
            out.append({"key": a.key, "attempt": a.attempt, "preempted": a.preempted,
                        "launches": store.launch_count(info.run, a.group),
                        "stop_reason": first["metadata"].get("stop_reason")})
    return out


def launcher_kills(root: Path) -> dict[str, Any]:
    """SIGKILL to the launcher (it stores nothing), then SIGTERM to the retry's launcher:
    the killed launch gets a marker attempt from the launch ledger (numbers in file names
    match launches), the SIGTERMed one says SIGTERM, the third completes."""
    sw = FaultSweep(root, "flaunch", trials=1, osu={"iterations": 20_000, "max_size": 1})
    sw.run()

    def measuring(launch: int) -> bool:  # the launch-th attempt's launcher runs mpiexec
        runs = sw.store.runs()
        inst = sw.running("launcher")
        if not runs or inst is None or sw.store.launch_count(runs[-1].run, inst.group() or "") != launch:
            return False
        return any("mpiexec" in " ".join(p.cmdline()) for p in _tree(sw.pid_of(inst))[1:])

    try:
        for launch, sig in ((1, signal.SIGKILL), (2, signal.SIGTERM)):
            wait_for(lambda launch=launch: measuring(launch), 90, f"launch {launch} measuring")
            sw.kill_member("launcher", sig)
        rc, out = sw.finish()
    finally:
        sw.kill_runner()
    return _close(sw, rc, out, attempts=stored_attempts(sw))


TF_FREEZE_S = 6.0  # twice the spec's stall_s below
# chief + ps + one worker on 2048 synthetic images, a sync point every 5 steps (0.2-1 s at
# 5-25 steps/s on two shared cores): 25 steps measured after a warm-up of 5, so the freeze
# lands inside the measurement and the other stretches set the median pace
TINY_TF = {"name": "tf-mnist", "strategy": "parameter_server", "workers": 1, "dataset": "synthetic",
           "steps": 30, "warmup_steps": 5, "batch_size": 16, "stall_s": 3.0}


def tf_freeze(root: Path) -> dict[str, Any]:
    """SIGSTOP the TF worker's process tree for 6 s while the chief measures (stall_s 3 s),
    then SIGCONT: the chief's sync points see the stretch; the attempt is stored
    contaminated (kept, flagged), the group is retried within its budget, the retry
    completes, and the report shows the flagged attempt apart from the averages."""
    from workloads.tf_mnist.measure import MEASURING

    sw = FaultSweep(root, "ftffreeze", trials=1, deadline="4m", workload=TINY_TF,
                    env={"SPOTBENCH_TF_SYNC_EVERY": "5", "TF_CPP_MIN_LOG_LEVEL": "3"})
    sw.run()
    windows: list[tuple[datetime, datetime]] = []
    measuring = MEASURING.split("%d")[-1]
    try:
        chief = wait_for(lambda: sw.running("chief"), 90, "a running chief")
        wait_for(lambda: measuring in sw.cloud.log_path(chief.name).read_text(errors="replace"),
                 120, "the chief's measurement")
        worker = wait_for(lambda: sw.running("worker"), 10, "a running worker")
        time.sleep(1.0)  # a sync point or two at the normal pace first
        frozen = _tree(sw.pid_of(worker))
        began = datetime.now(UTC)
        _signal_tree(frozen, signal.SIGSTOP)
        time.sleep(TF_FREEZE_S)
        _signal_tree(frozen, signal.SIGCONT)
        windows.append((began, datetime.now(UTC)))
        sw.faults.append({"fault": f"SIGSTOP to a TF worker's process tree for {TF_FREEZE_S:g} s",
                          "detect_s": 0.0})
        rc, out = sw.finish()
    finally:
        sw.kill_runner()
    store = sw.store
    attempts = []
    for info in store.runs():
        flags = store.flags(info.run)
        for a in store.attempts(info.run):
            rows = store.load_attempt(store.path("runs", info.run, f"{a.key}.jsonl")) or []
            rate = next((r.value for r in rows if r.metric == "steps_per_s"), None)
            attempts.append({"key": a.key, "preempted": a.preempted, "flag": flags.get(a.key),
                             "contaminated": a.contaminated, "steps_per_s": rate,
                             "launches": store.launch_count(info.run, a.group),
                             "stalls": rows[0].metadata.get("stalls") if rows else None})
    return _close(sw, rc, out, attempts=attempts, unflagged_contaminated=unflagged_across(sw, windows),
                  report=_report_text(sw))


def _report_text(sw: FaultSweep) -> str:
    """The Markdown report of the sweep's results."""
    from spotbench.report import write_report

    return write_report(sw.store.url, sw.root / "report").markdown.read_text()


CONTAINER_FREEZE_S = 8.0  # longer than the container runner's heartbeat threshold (STALL_S, 5 s)
# the user's command: 6 s of work, then its metric
SLOW_COMMAND = "import time; time.sleep(6); print('work_s=6 s', flush=True)"


def container_freeze(root: Path) -> dict[str, Any]:
    """SIGSTOP a `container` member's process tree (the runner and the user's command) for
    8 s while the command runs, then SIGCONT: the runner's heartbeat thread sees its ticks
    late; the attempt is stored contaminated (kept, flagged), the group retried, the retry
    completes."""
    import sys

    from workloads.common import STALL_S

    assert CONTAINER_FREEZE_S > STALL_S
    sw = FaultSweep(root, "fcfreeze", trials=1, deadline="2m",
                    workload={"name": "container", "command": [sys.executable, "-c", SLOW_COMMAND]})
    sw.run()
    windows: list[tuple[datetime, datetime]] = []
    try:
        member = wait_for(lambda: sw.running("member"), 90, "a running member")
        wait_for(lambda: "running: " in sw.cloud.log_path(member.name).read_text(errors="replace"),
                 60, "the user's command")
        time.sleep(1.0)
        frozen = _tree(sw.pid_of(member))
        began = datetime.now(UTC)
        _signal_tree(frozen, signal.SIGSTOP)
        time.sleep(CONTAINER_FREEZE_S)
        _signal_tree(frozen, signal.SIGCONT)
        windows.append((began, datetime.now(UTC)))
        sw.faults.append({"fault": f"SIGSTOP to a container member's process tree for "
                                   f"{CONTAINER_FREEZE_S:g} s", "detect_s": 0.0})
        rc, out = sw.finish()
    finally:
        sw.kill_runner()
    store = sw.store
    attempts = []
    for info in store.runs():
        flags = store.flags(info.run)
        attempts += [{"key": a.key, "preempted": a.preempted, "flag": flags.get(a.key),
                      "contaminated": a.contaminated,
                      "launches": store.launch_count(info.run, a.group)} for a in store.attempts(info.run)]
    return _close(sw, rc, out, attempts=attempts, unflagged_contaminated=unflagged_across(sw, windows))
