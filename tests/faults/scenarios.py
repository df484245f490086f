"""The fault scenarios: each runs a small local sweep, injects its faults and returns what
happened as plain figures. `test_faults.py` asserts on them; `bench/faults.py` prints them.

Every scenario returns at least: faults (what was injected, with detect_s = seconds from
the fault until the control plane had acted on it), rc (exit of `spotbench run`), states
(each group's final state as printed), rows_lost, rows_duplicated, leaked (processes).
The second round's scenarios (stalls, killed launchers, runner and supervisors killed with
no re-run, a corrupt or full local state) are in `scenarios_stall_state.py`, the frozen
members (placed inside or after the timed window) in `scenarios_freeze.py`; `SCENARIOS`
lists them all.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import requests

from tests.faults.harness import (
    GRACE_S,
    FaultSweep,
    can_mount,
    mount,
    umount,
    wait_for,
)
from tests.faults.harness import close_figures as _close
from tests.faults.scenarios_freeze import container_freeze, osu_freeze, tf_freeze, tf_freeze_after
from tests.faults.scenarios_stall_state import (
    STATE_FILES,
    corrupt_run_ledger,
    corrupt_state_file,
    launcher_kills,
    runner_sigkill_no_rerun,
    state_disk_full,
)


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
    from spotbench.clouds.local.cloud import LocalCloud, LocalInstanceSpec
    from spotbench.localrun.server import FunctionsServer
    from spotbench.clouds.local.state import LocalState
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
    sched = {"Authorization": f"Bearer {scheduler_token(secret, server.session)}"}
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
    "tf_freeze": tf_freeze,
    "tf_freeze_after": tf_freeze_after,
    "container_freeze": container_freeze,
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
