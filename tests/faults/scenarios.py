"""The fault scenarios: each runs a small local sweep, injects its faults and returns what
happened as plain figures. `test_faults.py` asserts on them; `bench/faults.py` prints them.

Every scenario returns at least: faults (what was injected, with detect_s = seconds from
the fault until the control plane had acted on it), rc (exit of `spotbench run`), states
(each group's final state as printed), rows_lost, rows_duplicated, leaked (processes).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import requests

from tests.faults.harness import (
    GRACE_S,
    FaultSweep,
    can_mount,
    free_after,
    mount,
    summary_states,
    umount,
    wait_for,
)


def _close(sw: FaultSweep, rc: int, out: str, **extra: Any) -> dict[str, Any]:
    leaked = free_after(GRACE_S + 3, sw.leaked)
    return {"faults": sw.faults, "rc": rc, "states": summary_states(out), **sw.rows(),
            "leaked": leaked, "open_runs": [r.run for r in sw.store.runs() if r.closed_at is None],
            "output": out[-3000:], **extra}


def member_kills(root: Path) -> dict[str, Any]:
    """SIGKILL a peer, then SIGTERM a launcher, each the moment it runs: the group stops
    whole at once (no survivor idling), is retried whole, and the sweep completes."""
    sw = FaultSweep(root, "fkill", trials=2)
    sw.run()
    try:
        sw.kill_member("peer", signal.SIGKILL)
        sw.kill_member("launcher", signal.SIGTERM)
        rc, out = sw.finish()
    finally:
        sw.kill_runner()
    return _close(sw, rc, out)


def runner_sigterm(root: Path) -> dict[str, Any]:
    """SIGTERM to `spotbench run` mid-group: every group stopped, the run closed."""
    sw = FaultSweep(root, "fterm", trials=2)
    proc = sw.run()
    wait_for(lambda: sw.running("launcher"), 90, "a running launcher")
    proc.send_signal(signal.SIGTERM)
    hit = time.monotonic()
    rc, out = sw.finish(60)
    sw.faults.append({"fault": "SIGTERM to spotbench run", "detect_s": round(time.monotonic() - hit, 3)})
    return _close(sw, rc, out, instances_on=[i.name for i in sw.instances() if i.state.value != "STOPPED"])


def runner_sigkill_then_resume(root: Path) -> dict[str, Any]:
    """SIGKILL to `spotbench run` mid-group: its functions server dies with it; the next
    `spotbench run` takes over, continues the open run and completes it."""
    sw = FaultSweep(root, "fresume", trials=2)
    proc = sw.run()
    wait_for(lambda: sw.running("launcher"), 90, "a running launcher")
    first_run = sw.store.current_run()
    server = sw.state.functions_process()
    proc.kill()
    proc.communicate()
    hit = time.monotonic()
    if server is not None:
        wait_for(lambda: not server.is_running() or server.status() == "zombie", 15,
                 "the functions server to die with its runner")
    sw.faults.append({"fault": "SIGKILL to spotbench run", "detect_s": round(time.monotonic() - hit, 3),
                      "detail": "functions server ended by the parent-death signal"})
    sw.run()
    rc, out = sw.finish()
    runs = sw.store.runs()
    return _close(sw, rc, out, first_run=first_run.run if first_run else None,
                  runs=[r.run for r in runs], server_was_recorded=server is not None)


def server_kill(root: Path) -> dict[str, Any]:
    """SIGKILL to the functions server while a group runs: noticed, restarted on its port;
    the group's done gets through and the sweep completes."""
    sw = FaultSweep(root, "fserver", trials=2)
    sw.run()
    try:
        wait_for(lambda: sw.running("launcher"), 90, "a running launcher")
        before = sw.state.functions
        server = sw.state.functions_process()
        assert server is not None, before
        server.kill()
        hit = time.monotonic()
        wait_for(lambda: sw.state.functions.get("pid") not in (None, before["pid"]), 30,
                 "a restarted functions server")
        detect = time.monotonic() - hit
        after = sw.state.functions
        sw.faults.append({"fault": "SIGKILL to the functions server", "detect_s": round(detect, 3),
                          "same_port": after.get("port") == before.get("port")})
        rc, out = sw.finish()
    finally:
        sw.kill_runner()
    return _close(sw, rc, out)


def deadline_overrun(root: Path) -> dict[str, Any]:
    """A group that never finishes in time: each attempt is stopped at the deadline (later
    attempts too), the group is given up after its retries, `spotbench run` exits non-zero.

    Attempts are told apart by the store's launch records (`runs/<run>/launches/<group>.<n>`),
    not by a moment when the group is seen off: the runner relaunches a group the moment it
    sees it off, so that moment can be shorter than any poll and two attempts would look like
    one. An attempt runs from its launch record's time until its group was last seen active
    while that launch was the latest."""
    sw = FaultSweep(root, "fdeadline", trials=1, deadline="10s",
                    osu={"iterations": 10_000_000, "max_size": 1})
    sw.run()
    last_seen: dict[int, float] = {}  # launch number → when its group was last seen active
    run = group = None
    try:
        while sw.proc and sw.proc.poll() is None:
            time.sleep(0.05)
            if group is None:
                group = next((i.group() for i in sw.instances()), None)
            if run is None:
                run = next((r.run for r in sw.store.runs()), None)
            if group is None or run is None:
                continue
            before = sw.store.launch_count(run, group)
            active = not sw.group_off(group)
            if active and before and sw.store.launch_count(run, group) == before:
                last_seen[before] = time.time()  # the same attempt throughout the look
        rc, out = sw.finish()
    finally:
        sw.kill_runner()
    attempts: list[dict[str, float]] = []
    if run is not None and group is not None:
        for n, launched in enumerate(sw.store.launches(run, group), start=1):
            began = launched.timestamp()
            attempts.append({"launch": n, "ran_s": round(last_seen.get(n, began) - began, 2)})
    for a in attempts:
        sw.faults.append({"fault": "deadline overrun", "billed_after_deadline_s": round(a["ran_s"] - 10, 2),
                          "detect_s": round(max(0.0, a["ran_s"] - 10), 2)})
    return _close(sw, rc, out, attempts=attempts)


def duplicate_ticks_and_storm(root: Path, calls: int = 50) -> dict[str, Any]:
    """50 concurrent start/done calls never run more groups than allowed nor open two runs;
    a start tick delivered again after its run closed starts nothing."""
    from spotbench.auth.local import member_token, scheduler_token
    from spotbench.clouds.base import State
    from spotbench.clouds.local import LocalCloud, LocalInstanceSpec
    from spotbench.localrun.server import FunctionsServer
    from spotbench.localrun.state import LocalState
    from spotbench.results import ResultStore
    from spotbench.spec import load_spec

    spec = load_spec({"name": "fstorm", "workload": {"name": "osu"}, "trials": 4})
    groups = spec.plan()
    state = LocalState("fstorm", root / "state")
    secret = state.secret()
    cloud = LocalCloud(state.db_path, grace_s=GRACE_S, log_dir=state.dir / "logs")
    sleeper = [sys.executable, "-c", "import time; time.sleep(300)"]
    cloud.deploy([LocalInstanceSpec(m.name, g.member_labels(m), sleeper) for g in groups for m in g.members])
    env = {"SPOTBENCH_CLOUD": "local", "SPOTBENCH_SPEC": spec.model_dump_json(),
           "SPOTBENCH_RESULTS_URL": f"file://{root}/results", "SPOTBENCH_STATE_DIR": str(state.dir),
           "SPOTBENCH_GRACE_S": str(GRACE_S)}
    server = FunctionsServer(env, root / "functions.log").start()
    store = ResultStore(f"file://{root}/results")
    sched = {"Authorization": f"Bearer {scheduler_token(secret)}"}
    peak = {"groups": 0, "open_runs": 0}
    stop_sampling = threading.Event()

    def sample() -> None:
        while not stop_sampling.is_set():
            by_group: dict[str, bool] = {}
            for inst in cloud.query({"spotbench-sweep": "fstorm"}):
                if inst.state in (State.PENDING, State.RUNNING):
                    by_group[inst.group() or ""] = True
            peak["groups"] = max(peak["groups"], len(by_group))
            peak["open_runs"] = max(peak["open_runs"], sum(r.closed_at is None for r in store.runs()))
            time.sleep(0.01)

    statuses: list[int] = []

    def call(i: int) -> None:
        if i % 2:
            resp = requests.post(server.url + "/start", json={}, headers=sched, timeout=60)
        else:
            member = groups[i % len(groups)].members[0].name
            resp = requests.post(server.url + "/done", json={"group": groups[i % len(groups)].id},
                                 headers={"Authorization": f"Bearer {member_token(secret, member)}"},
                                 timeout=60)
        statuses.append(resp.status_code)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        threads = [threading.Thread(target=call, args=(i,)) for i in range(calls)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(0.3)
        stop_sampling.set()
        sampler.join()
        requests.post(server.url + "/stop", json={}, headers=sched, timeout=60).raise_for_status()
        # a tick, its run closed, then the same tick delivered again (three times at once)
        tick = {"tick": "2026-01-05T03:00:00Z"}
        first = requests.post(server.url + "/start", json=tick, headers=sched, timeout=60).json()
        requests.post(server.url + "/stop", json={}, headers=sched, timeout=60).raise_for_status()
        cloud.wait({"spotbench-sweep": "fstorm"}, {State.STOPPED}, timeout=GRACE_S + 20)
        repeats: list[dict] = []
        rt = [threading.Thread(target=lambda: repeats.append(requests.post(
            server.url + "/start", json=tick, headers=sched, timeout=60).json())) for _ in range(3)]
        for t in rt:
            t.start()
        for t in rt:
            t.join()
        on_after = [i.name for i in cloud.query({"spotbench-sweep": "fstorm"}) if i.state != State.STOPPED]
    finally:
        stop_sampling.set()
        server.stop()
        cloud.terminate({"spotbench-sweep": "fstorm"})
        cloud.wait({"spotbench-sweep": "fstorm"}, {State.TERMINATED}, timeout=GRACE_S + 20)
    return {
        "faults": [{"fault": f"{calls} concurrent start/done", "detect_s": 0.0},
                   {"fault": "start tick delivered again after its run closed", "detect_s": 0.0}],
        "statuses": sorted(set(statuses)), "peak_groups": peak["groups"],
        "limit": spec.max_concurrency, "peak_open_runs": peak["open_runs"],
        "first_run": first.get("run"), "repeats": repeats, "instances_on_after_repeat": on_after,
        "rows_lost": 0, "rows_duplicated": 0, "leaked": [],
    }


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
    for info in store.runs():
        flags = store.flags(info.run)
        for a in store.attempts(info.run):
            if a.preempted or a.key in flags:
                continue
            if any(a.started_at < end and start < a.ended_at for start, end in windows):
                path = store._p("runs", info.run, f"{a.key}.jsonl")
                bad += sum(1 for line in store.fs.cat_file(path).decode().splitlines() if line.strip())
    return bad


FREEZE_S = 3.0  # longer than OSU's default stall_s (2 s)


def osu_freeze(root: Path) -> dict[str, Any]:
    """SIGSTOP the OSU peer's whole process tree (member, exec agent, MPI rank) for 3 s
    mid-measurement, then SIGCONT: the attempt is stored contaminated (flagged, kept), the
    group is retried within its budget and the retry completes."""
    sw = FaultSweep(root, "ffreeze", trials=1, osu={"iterations": 40_000, "max_size": 1})
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
        rc, out = sw.finish()
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
                       if "spotbench.clouds._local_supervisor" in (p.info["cmdline"] or [])
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
    from spotbench.clouds.local import LocalCloud as _Cloud  # creates cloud.db

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
            path = store._p("runs", info.run, f"{a.key}.jsonl")
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


# a store that stays read-only or full fails every retry: the same retries, 10x shorter pauses
STORE_DOWN_RETRY_SCALE = 0.1


def _bind_readonly(path: Path) -> None:
    mount("--bind", str(path), str(path))
    mount("-o", "remount,ro,bind", str(path))


def readonly_store(root: Path) -> dict[str, Any]:
    """The results folder turns read-only (a read-only bind mount: root ignores chmod)
    after the first group stored: no row stored before is lost, the rows that could not
    be stored are in the member's log, done still stopped the group, the runner exits 3
    naming the store, nothing is left running."""
    why = can_mount(root)
    if why:
        return {"skipped": why}
    results = root / "results"
    results.mkdir()
    sw = FaultSweep(root, "freadonly", trials=2, results=results, retry_scale=STORE_DOWN_RETRY_SCALE)
    sw.run()
    try:
        wait_for(lambda: sw.store.runs() and sw.store.completed_groups(sw.store.runs()[-1].run),
                 120, "the first group's results")
        _bind_readonly(results)
        hit = time.monotonic()
        sw.faults.append({"fault": "results store read-only"})
        rc, out = sw.finish()
        sw.faults[-1]["run_ended_s"] = round(time.monotonic() - hit, 3)  # stopped, exit 3
        figures = _close(sw, rc, out)
    finally:
        sw.kill_runner()
        umount(results)
    # a read-only store cannot record that its run closed: once it is writable again, the
    # next `spotbench run` continues that run and closes it
    open_before = figures["open_runs"]
    sw.run()
    try:
        rc_again, out_again = sw.finish()
    finally:
        sw.kill_runner()
    again = _close(sw, rc_again, out_again)
    return {**figures, "open_before_rerun": open_before, "rc_again": rc_again,
            "open_runs": again["open_runs"], "leaked": figures["leaked"] + again["leaked"],
            "rows_lost": figures["rows_lost"] + again["rows_lost"]}


def readonly_store_at_start(root: Path) -> dict[str, Any]:
    """A results folder that is read-only from the start: nothing starts, a clear error."""
    why = can_mount(root)
    if why:
        return {"skipped": why}
    results = root / "results"
    results.mkdir()
    _bind_readonly(results)
    try:
        sw = FaultSweep(root, "freadonly0", trials=1, results=results)
        sw.run()
        rc, out = sw.finish(60)
        sw.faults.append({"fault": "results store read-only at start", "detect_s": 0.0})
        return {**_close(sw, rc, out), "instances_started": [i.name for i in sw.instances()
                                                             if i.state.value != "STOPPED"]}
    finally:
        umount(results)


def full_store(root: Path) -> dict[str, Any]:
    """The results disk fills up after the first group stored (a small tmpfs): no stored
    row is lost, the run still closes (an empty marker fits on a full disk), exit 3."""
    why = can_mount(root)
    if why:
        return {"skipped": why}
    results = root / "results"
    results.mkdir()
    mount("-t", "tmpfs", "-o", "size=512k", "tmpfs", str(results))
    try:
        sw = FaultSweep(root, "ffull", trials=2, results=results, retry_scale=STORE_DOWN_RETRY_SCALE)
        sw.run()
        try:
            wait_for(lambda: sw.store.runs() and sw.store.completed_groups(sw.store.runs()[-1].run),
                     120, "the first group's results")
            subprocess.run(["dd", "if=/dev/zero", f"of={results}/filler", "bs=4k"], capture_output=True)
            hit = time.monotonic()
            sw.faults.append({"fault": "results disk full"})
            rc, out = sw.finish()
            sw.faults[-1]["run_ended_s"] = round(time.monotonic() - hit, 3)  # stopped, exit 3
            figures = _close(sw, rc, out)
        finally:
            sw.kill_runner()
    finally:
        shutil.rmtree(results / "filler", ignore_errors=True)
        (results / "filler").unlink(missing_ok=True)
        umount(results)
    return figures


SCENARIOS = {
    "member_kills": member_kills,
    "runner_sigterm": runner_sigterm,
    "runner_sigkill_then_resume": runner_sigkill_then_resume,
    "server_kill": server_kill,
    "deadline_overrun": deadline_overrun,
    "duplicate_ticks_and_storm": duplicate_ticks_and_storm,
    "osu_freeze": osu_freeze,
    "launcher_kills": launcher_kills,
    "runner_sigkill_no_rerun": runner_sigkill_no_rerun,
    "corrupt_run_ledger": corrupt_run_ledger,
    **{f"corrupt_{name.split('.')[0]}": (lambda root, name=name: corrupt_state_file(root, name))
       for name in STATE_FILES},
    "state_disk_full": state_disk_full,
    "readonly_store_at_start": readonly_store_at_start,
    "readonly_store": readonly_store,
    "full_store": full_store,
}
