"""The local cloud with real processes: tiny `python -c` workloads, a SQLite db in tmp_path."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import closing
from pathlib import Path

import psutil
import pytest

from spotbench.clouds import get_cloud
from spotbench.clouds.local import db
from spotbench.clouds.base import Cloud, State
from spotbench.clouds.local.cloud import LocalCloud, LocalInstanceSpec

GRACE = 1.0
T = 20.0  # generous: 2 shared cores


def py(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def sleeper(mark: Path) -> list[str]:
    """Appends its pid to `mark` (one line per start), then sleeps."""
    return py(f"""
        import os, time
        with open({str(mark)!r}, "a") as fh:
            fh.write(f"{{os.getpid()}}\\n")
        time.sleep(60)
    """)


def wait_for(predicate, timeout: float = T, what: str = "condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def pids(mark: Path) -> list[int]:
    return [int(x) for x in mark.read_text().split()] if mark.exists() else []


def gone(pid: int) -> bool:
    return not db.alive(pid, None)


@pytest.fixture
def cloud(tmp_path):
    c = LocalCloud(tmp_path / "cloud.db", grace_s=GRACE)
    yield c
    c.terminate({})
    c.wait({}, {State.TERMINATED}, timeout=T)


def deploy(cloud: LocalCloud, name: str, command: list[str], **labels: str):
    return cloud.deploy([LocalInstanceSpec(name, {"sweep": "s", **labels}, command, {"X_TEST": name})])


def test_get_cloud_builds_a_local_cloud_that_speaks_the_protocol(tmp_path):
    cloud = get_cloud("local", db_path=tmp_path / "c.db", grace_s=2)
    assert isinstance(cloud, LocalCloud) and isinstance(cloud, Cloud)
    assert (tmp_path / "c.db").exists() and cloud.name == "local"


def test_start_query_stop_terminate(cloud, tmp_path):
    mark = tmp_path / "a.pids"
    [inst] = deploy(cloud, "a", sleeper(mark))
    assert inst.state == State.STOPPED and inst.zone == "local" and inst.ip == "127.0.0.1"

    [inst] = cloud.start({"sweep": "s"})
    assert inst.state in (State.PENDING, State.RUNNING)
    [inst] = cloud.wait({"sweep": "s"}, {State.RUNNING}, T)
    [pid] = wait_for(lambda: pids(mark), what="workload pid")
    assert psutil.Process(pid).environ()["X_TEST"] == "a"

    [inst] = cloud.stop({"sweep": "s"})
    assert inst.state in (State.STOPPING, State.STOPPED)
    [inst] = cloud.wait({"sweep": "s"}, {State.STOPPED}, T)
    assert "stopped" in inst.detail and gone(pid)

    [inst] = cloud.terminate({"sweep": "s"})
    assert inst.state == State.TERMINATED
    [inst] = cloud.start({"sweep": "s"})
    assert inst.state == State.TERMINATED and "terminated" in inst.detail
    assert pids(mark) == [pid]  # never started again
    assert "spotbench-local" in cloud.log_path("a").read_text()


def test_start_twice_is_one_process_and_stop_twice_is_fine(cloud, tmp_path):
    mark = tmp_path / "a.pids"
    deploy(cloud, "a", sleeper(mark))
    cloud.start({})
    [again] = cloud.start({})
    assert again.state in (State.PENDING, State.RUNNING)
    cloud.wait({}, {State.RUNNING}, T)
    assert cloud.start({})[0].state == State.RUNNING
    wait_for(lambda: pids(mark), what="workload pid")
    time.sleep(0.3)
    assert len(pids(mark)) == 1

    first, second = cloud.stop({}), cloud.stop({})
    assert {first[0].state, second[0].state} <= {State.STOPPING, State.STOPPED}
    cloud.wait({}, {State.STOPPED}, T)
    assert cloud.stop({})[0].state == State.STOPPED


def test_stopped_instance_starts_again_with_a_new_process(cloud, tmp_path):
    mark = tmp_path / "a.pids"
    deploy(cloud, "a", sleeper(mark))
    cloud.start({})
    wait_for(lambda: pids(mark), what="first start")
    cloud.stop({})
    cloud.wait({}, {State.STOPPED}, T)
    cloud.start({})
    first, second = wait_for(lambda: pids(mark) if len(pids(mark)) == 2 else None, what="second start")
    assert first != second and gone(first) and not gone(second)


def test_process_exiting_by_itself_is_stopped_with_its_exit_code(cloud):
    deploy(cloud, "ok", py("print('fine')"), role="x")
    deploy(cloud, "bad", py("import sys; sys.exit(3)"), role="y")
    cloud.start({})
    ok, bad = cloud.wait({}, {State.STOPPED}, T)
    assert (ok.name, ok.detail) == ("bad", "exited with code 3") or (bad.name, bad.detail) == ("bad", "exited with code 3")
    by_name = {i.name: i.detail for i in (ok, bad)}
    assert by_name == {"ok": "exited with code 0", "bad": "exited with code 3"}
    assert "fine" in cloud.log_path("ok").read_text()


def test_a_command_that_cannot_run_is_stopped_with_a_reason(cloud, tmp_path):
    deploy(cloud, "nope", [str(tmp_path / "no-such-binary")])
    cloud.start({})
    [inst] = cloud.wait({}, {State.STOPPED}, T)
    assert "could not start" in inst.detail and "no-such-binary" in inst.detail


def test_sigterm_handled_exits_within_grace(cloud, tmp_path):
    mark, ready = tmp_path / "term.txt", tmp_path / "ready"
    deploy(cloud, "polite", py(f"""
        import signal, sys, time, pathlib
        def bye(*_):
            pathlib.Path({str(mark)!r}).write_text("got SIGTERM")
            sys.exit(0)
        signal.signal(signal.SIGTERM, bye)
        pathlib.Path({str(ready)!r}).touch()
        time.sleep(60)
    """))
    cloud.start({})
    wait_for(ready.exists, what="workload ready")
    cloud.stop({})
    [inst] = cloud.wait({}, {State.STOPPED}, T)
    assert inst.detail == "stopped: exit code 0"
    assert mark.read_text() == "got SIGTERM"


def test_sigterm_ignored_is_killed_after_the_grace_period(tmp_path):
    cloud, grace = LocalCloud(tmp_path / "cloud.db", grace_s=2.5), 2.5
    ready = tmp_path / "ready"
    deploy(cloud, "stubborn", py(f"""
        import signal, time, pathlib
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        pathlib.Path({str(ready)!r}).write_text(str(__import__("os").getpid()))
        time.sleep(60)
    """))
    cloud.start({})
    pid = int(wait_for(lambda: ready.exists() and ready.read_text(), what="workload ready"))
    t0 = time.monotonic()
    [inst] = cloud.stop({})
    assert inst.state == State.STOPPING  # returns at once, escalation happens in the background
    time.sleep(0.5)
    assert cloud.query({})[0].state == State.STOPPING and not gone(pid)
    [inst] = cloud.wait({}, {State.STOPPED}, T)
    assert time.monotonic() - t0 >= grace * 0.9
    assert "SIGKILL" in inst.detail and gone(pid)
    cloud.terminate({})


def test_the_whole_process_group_is_stopped(cloud, tmp_path):
    """Like mpiexec → proxies → ranks: a grandchild that even ignores SIGTERM is killed."""
    child_pid = tmp_path / "child.pid"
    grandchild = (f"import os, signal, time, pathlib; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                  f"pathlib.Path({str(child_pid)!r}).write_text(str(os.getpid())); time.sleep(60)")
    deploy(cloud, "launcher", py(f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", {grandchild!r}])
        time.sleep(60)
    """))
    cloud.start({})
    pid = int(wait_for(lambda: child_pid.exists() and child_pid.read_text(), what="grandchild"))
    cloud.stop({})
    [inst] = cloud.wait({}, {State.STOPPED}, T)
    wait_for(lambda: gone(pid), timeout=5, what="grandchild gone")
    assert inst.state == State.STOPPED


def test_leftover_children_of_an_exited_workload_are_killed(cloud, tmp_path):
    child_pid = tmp_path / "child.pid"
    deploy(cloud, "leaky", py(f"""
        import subprocess, sys, pathlib
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        pathlib.Path({str(child_pid)!r}).write_text(str(child.pid))
    """))
    cloud.start({})
    [inst] = cloud.wait({}, {State.STOPPED}, T)
    assert inst.detail == "exited with code 0"
    wait_for(lambda: gone(int(child_pid.read_text())), timeout=5, what="leftover child gone")


def test_state_survives_a_runner_restart_and_is_never_started_twice(cloud, tmp_path):
    mark = tmp_path / "a.pids"
    deploy(cloud, "a", sleeper(mark))
    cloud.start({})
    cloud.wait({}, {State.RUNNING}, T)

    restarted = LocalCloud(cloud.db_path, grace_s=GRACE)  # a new runner object
    assert [i.state for i in restarted.query({})] == [State.RUNNING]
    assert [i.state for i in restarted.start({})] == [State.RUNNING]

    other = subprocess.run(  # a separate process (the CLI, the functions server)
        [sys.executable, "-c", textwrap.dedent(f"""
            import json
            from spotbench.clouds.local.cloud import LocalCloud
            c = LocalCloud({str(cloud.db_path)!r})
            print(json.dumps([(i.name, i.state) for i in c.query({{}})] + [(i.name, i.state) for i in c.start({{}})]))
        """)], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(other.stdout) == [["a", "RUNNING"], ["a", "RUNNING"]]
    time.sleep(0.3)
    assert len(pids(mark)) == 1


def test_concurrent_start_from_two_processes_spawns_once(cloud, tmp_path):
    mark, go = tmp_path / "a.pids", tmp_path / "go"
    deploy(cloud, "a", sleeper(mark))
    starter = textwrap.dedent(f"""
        import os, time, json
        from spotbench.clouds.local.cloud import LocalCloud
        c = LocalCloud({str(cloud.db_path)!r})
        while not os.path.exists({str(go)!r}):
            time.sleep(0.005)
        print(json.dumps([i.state for i in c.start({{}})]))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", starter], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    time.sleep(1.0)  # let both import and reach the barrier
    go.touch()
    outs = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sorted(o[0] for o in outs) in (["PENDING", "PENDING"], ["PENDING", "RUNNING"], ["RUNNING", "RUNNING"])
    cloud.wait({}, {State.RUNNING}, T)
    wait_for(lambda: pids(mark), what="workload")
    time.sleep(0.5)
    assert len(pids(mark)) == 1


def test_labels_select_instances(cloud, tmp_path):
    for name, group, role in [("a", "g1", "launcher"), ("b", "g1", "peer"), ("c", "g2", "launcher")]:
        deploy(cloud, name, sleeper(tmp_path / f"{name}.pids"), group=group, role=role)
    assert sorted(i.name for i in cloud.start({"group": "g1"})) == ["a", "b"]
    assert [i.name for i in cloud.query({"role": "peer"})] == ["b"]
    assert sorted(i.name for i in cloud.query({})) == ["a", "b", "c"]
    assert cloud.query({"group": "g2"})[0].state == State.STOPPED
    cloud.wait({"group": "g1"}, {State.RUNNING}, T)
    assert [i.name for i in cloud.stop({"role": "peer"})] == ["b"]
    cloud.wait({"role": "peer"}, {State.STOPPED}, T)
    assert cloud.query({"name-does-not": "exist"}) == []
    assert {i.name: i.state for i in cloud.query({})} == {"a": State.RUNNING, "b": State.STOPPED, "c": State.STOPPED}


def test_missing_instances_are_a_no_op(cloud):
    assert cloud.terminate({"group": "nope"}) == []
    assert cloud.stop({"group": "nope"}) == []
    assert cloud.start({"group": "nope"}) == []
    assert cloud.wait({"group": "nope"}, {State.RUNNING}, 1) == []


def test_terminate_a_running_instance_stops_it_for_good(cloud, tmp_path):
    mark = tmp_path / "a.pids"
    deploy(cloud, "a", sleeper(mark))
    cloud.start({})
    [pid] = wait_for(lambda: pids(mark), what="workload")
    [inst] = cloud.terminate({})
    assert inst.state in (State.STOPPING, State.TERMINATED)
    assert cloud.start({})[0].state != State.PENDING
    [inst] = cloud.wait({}, {State.TERMINATED}, T)
    assert gone(pid) and pids(mark) == [pid]


def test_deploy_updates_the_spec_of_a_running_instance_for_its_next_start(cloud, tmp_path):
    old, new = tmp_path / "old.pids", tmp_path / "new.pids"
    deploy(cloud, "a", sleeper(old))
    cloud.start({})
    [pid] = wait_for(lambda: pids(old), what="old workload")
    [inst] = deploy(cloud, "a", sleeper(new))
    assert inst.state == State.RUNNING and not gone(pid)
    cloud.stop({})
    cloud.wait({}, {State.STOPPED}, T)
    cloud.start({})
    wait_for(lambda: pids(new), what="new workload")


def test_stop_right_after_start_leaves_nothing_running(cloud, tmp_path):
    mark = tmp_path / "a.pids"
    deploy(cloud, "a", sleeper(mark))
    cloud.start({})
    cloud.stop({})
    cloud.wait({}, {State.STOPPED}, T)
    time.sleep(0.3)
    assert all(gone(p) for p in pids(mark))


def test_a_lost_supervisor_is_reconciled_and_leftovers_are_killed(cloud, tmp_path):
    ready = tmp_path / "ready"
    deploy(cloud, "a", py(f"""
        import os, signal, time, pathlib
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        pathlib.Path({str(ready)!r}).write_text(str(os.getpid()))
        time.sleep(60)
    """))
    deploy(cloud, "b", sleeper(tmp_path / "b.pids"))
    cloud.start({})
    pid = int(wait_for(lambda: ready.exists() and ready.read_text(), what="workload a"))
    [b_pid] = wait_for(lambda: pids(tmp_path / "b.pids"), what="workload b")
    with closing(db.connect(cloud.db_path)) as conn:
        sups = [db.get(conn, n) for n in ("a", "b")]
    for row in sups:
        os.kill(row.sup_pid, signal.SIGKILL)
    wait_for(lambda: all(gone(r.sup_pid) for r in sups), what="supervisors gone")

    [a, b] = cloud.query({})
    assert a.state == State.RUNNING and "supervisor was lost" in a.detail

    os.kill(b_pid, signal.SIGKILL)  # b dies with nobody watching: query notices
    wait_for(lambda: gone(b_pid), what="b gone")
    [b] = [i for i in cloud.query({}) if i.name == "b"]
    assert b.state == State.STOPPED and "exit code unknown" in b.detail

    [a] = [i for i in cloud.stop({}) if i.name == "a"]
    assert a.state == State.STOPPING
    [a] = [i for i in cloud.wait({}, {State.STOPPED}, T) if i.name == "a"]
    assert "SIGKILL" in a.detail and gone(pid)


def test_no_zombies_or_children_are_left_in_the_caller(cloud, tmp_path):
    deploy(cloud, "a", sleeper(tmp_path / "a.pids"), role="sleeps")
    deploy(cloud, "b", py("pass"), role="exits")
    cloud.start({})
    cloud.wait({"role": "exits"}, {State.STOPPED}, T)
    cloud.stop({})
    cloud.wait({}, {State.STOPPED}, T)
    children = psutil.Process().children(recursive=True)
    assert [c for c in children if c.status() == psutil.STATUS_ZOMBIE] == []
    assert not any("_local_supervisor" in " ".join(c.cmdline()) for c in children if c.is_running())


# ---- typed outcomes and the host's environment (issue 14) ---------------------------------
def test_each_way_an_instance_ends_has_a_typed_error_kind(cloud, tmp_path):
    ready = tmp_path / "ready"
    deploy(cloud, "ok", py("print('fine')"), role="x")
    deploy(cloud, "bad", py("import sys; sys.exit(3)"), role="y")
    deploy(cloud, "nope", [str(tmp_path / "no-such-binary")], role="z")
    deploy(cloud, "reclaimed", py(f"import pathlib, time; pathlib.Path({str(ready)!r}).touch(); time.sleep(60)"),
           role="w")
    cloud.start({})
    wait_for(ready.exists, what="workload ready")
    [victim] = [i for i in cloud.query({"role": "w"})]
    with closing(db.connect(cloud.db_path)) as conn:
        pid = db.get(conn, victim.name).pid
    os.kill(pid, signal.SIGTERM)  # from outside, as a spot reclaim delivers it
    got = {i.name: i for i in cloud.wait({}, {State.STOPPED}, T)}
    assert {n: (i.error and str(i.error)) for n, i in got.items()} == {
        "ok": None, "bad": "crashed", "nope": "crashed", "reclaimed": "preempted"}
    cloud.start({"role": "x"})
    cloud.stop({"role": "x"})  # stopped by the cloud: not an error
    [ok] = cloud.wait({"role": "x"}, {State.STOPPED}, T)
    assert ok.error is None and ok.member == "ok"
    cloud.terminate({"role": "y"})
    [gone_one] = cloud.start({"role": "y"})
    assert gone_one.error == "gone" and gone_one.unavailable


def test_the_operators_spotbench_run_does_not_reach_workloads(cloud, tmp_path, monkeypatch):
    out = tmp_path / "env.txt"
    monkeypatch.setenv("SPOTBENCH_RUN", "20200101T000000Z")  # e.g. set for `spotbench report`
    deploy(cloud, "w", py(f"import os, pathlib; pathlib.Path({str(out)!r}).write_text("
                          "os.environ.get('SPOTBENCH_RUN', 'unset') + ' ' + os.environ['X_TEST'])"))
    cloud.start({})
    cloud.wait({}, {State.STOPPED}, T)
    assert out.read_text() == "unset w"


def test_a_new_connection_keeps_the_locks_of_the_process_open_ones(tmp_path):
    """The flaky 'disk I/O error' (SQLITE_IOERR_SHORT_READ) of the local teardown test.

    POSIX locks belong to the process: closing any descriptor of a file drops every lock the
    process holds on it. `connect()` used to open and close the database file (to create it
    0600) before each connection, so an open connection in the same process silently lost
    its shared lock; another process closing its own connection then took the exclusive
    lock, believed it was the last one, checkpointed and deleted the WAL under the open
    connection. A second `connect()` must leave the first connection's lock in place."""
    path = tmp_path / "cloud.db"
    with closing(db.connect(path)) as first:
        db.rows(first)
        with closing(db.connect(path)) as second:
            db.rows(second)
            # SQLite's shared-lock range on the database file (unix VFS: PENDING_BYTE + 2, 510 bytes)
            probe = textwrap.dedent(f"""
                import fcntl, os, sys
                fd = os.open({str(path)!r}, os.O_RDWR)
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 510, 0x40000000 + 2)
                except OSError:
                    sys.exit(0)  # held by the connections above, as it must be
                sys.exit(1)
            """)
            taken = subprocess.run([sys.executable, "-c", probe], timeout=30).returncode
            assert taken == 0, "another process could lock the database exclusively"
