"""The second round of fault scenarios (issue #28): launchers killed, runner and supervisors
killed with no re-run, a corrupt or full local state (the frozen members are in
`scenarios_freeze.py`). Same contract as `scenarios.py` (which lists them all in
`SCENARIOS`)."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil

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
