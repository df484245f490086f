"""The process that plays one local "VM": spawns the workload, watches it, powers it off.

Started detached by `LocalCloud.start` (double fork, own session) so it outlives its caller:

    python -m spotbench.clouds.local._local_supervisor --db DB --name NAME --token TOKEN --grace S

It spawns the workload command as the leader of its own process group, records pid and
create time in the instance table, and waits on a pidfd (no polling): the moment the
workload exits it kills what is left of the group and records STOPPED with the exit code.
A SIGTERM to the supervisor is a stop request (`LocalCloud.stop` sends it): SIGTERM to the
whole group, SIGKILL after the row's `stop_deadline`. An instance with `max_run_s` in its
spec is stopped the same way once it has run that long, whoever else is (or is not) left
to stop it: the local stand-in for a cloud's max run duration.

With `max_run_s` the workload runs under coreutils `timeout` (the group's leader): the
host's own deadline, max_run_s then SIGKILL after the grace period, which holds when no
supervisor is left (one that crashed, or could not write the instance table).

A supervisor never dies of its bookkeeping: a table it cannot write (a full disk, a corrupt
file) is logged, and it goes on stopping and reaping the workload; the row is reconciled
from the process table later. If it cannot record that the workload started, it stops the
workload at once: a process nobody knows of is never left running.

Every workload and its descendants carry `SPOTBENCH_LOCAL_DB` (the instance table's path):
`LocalCloud.halt` finds and stops them by it when the table itself cannot be used.

`--watch` takes over a workload whose supervisor died (no exit code is available then):
it polls the group and escalates to SIGKILL at the deadline.
"""

from __future__ import annotations

import argparse
import os
import selectors
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timezone

import psutil

from spotbench.clouds.local import db

WATCH_POLL_S = 0.2
# The operator's shell settings that must not reach a "VM": SPOTBENCH_RUN (which `spotbench
# report --run` reads) would make a workload store into that run instead of the open one.
HOST_ONLY_ENV = frozenset({"SPOTBENCH_RUN"})
TIMEOUT_EXIT = 124  # coreutils `timeout`: the command ran past its time and was stopped


def workload_env(host: dict[str, str] | os._Environ, spec_env: dict[str, str],
                 db_path: str | None = None) -> dict[str, str]:
    """The workload's environment: the host's (a local VM shares the machine's tools), less
    the operator's host-only settings, plus the instance's own (and its table's path)."""
    env = {**{k: v for k, v in host.items() if k not in HOST_ONLY_ENV}, **spec_env}
    if db_path:
        env[db.DB_ENV] = db_path
    return env


def host_deadline(command: list[str], max_run_s: float | None, grace: float) -> list[str]:
    """`command` under coreutils `timeout`: SIGTERM to its group at max_run_s, SIGKILL after
    the grace period, whether or not a supervisor is left to do it."""
    exe = shutil.which("timeout")
    if not max_run_s or exe is None:
        return command
    return [exe, f"--kill-after={max(grace, 0.1):g}s", f"{max_run_s:g}s", *command]


def _say(msg: str) -> None:
    """A note in the instance's log; a log that cannot be written (full disk) is skipped:
    the supervisor's job is the workload, not its notes."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    try:
        print(f"[spotbench-local {stamp}] {msg}", flush=True)
    except OSError:
        pass


def _killpg(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Supervisor:
    def __init__(self, db_path: str, name: str, token: str, grace: float):
        self.conn = db.connect(db_path)
        self.db_path = str(db_path)
        self.name, self.token, self.grace = name, token, grace
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: None)  # handled through the wakeup fd
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.pid = 0
        self.ctime: float | None = None
        self.termed = False
        self.killed = False
        self.deadline: float | None = None
        self.run_deadline: float | None = None  # max_run_s after the start
        self.escaped: list[psutil.Process] = []  # descendants that left the group

    def _me(self) -> dict[str, object]:
        return {"sup_pid": os.getpid(), "sup_ctime": db.create_time(os.getpid())}

    def _finish(self, detail: str, exit_code: int | None = None, error: str | None = None) -> None:
        try:
            with db.transaction(self.conn):
                row = db.get(self.conn, self.name)
                if row is None or row.token != self.token:
                    _say(f"{self.name}: superseded, not recording {detail!r}")
                    return
                state = "TERMINATED" if row.terminating else "STOPPED"
                db.update(self.conn, self.name, self.token, state=state, detail=detail,
                          exit_code=exit_code, error=error, pid=None, sup_pid=None,
                          stop_deadline=None, stopped_at=time.time())
        except sqlite3.Error as exc:  # the workload is gone: the row is reconciled on query
            _say(f"{self.name}: {detail}; could not record it in {self.db_path}: {exc}")
            return
        _say(f"{self.name}: {state} ({detail})")

    # --- run: spawn and watch ------------------------------------------------------------

    def run(self) -> None:
        try:
            if not self._spawn():
                return
        except sqlite3.Error as exc:
            if self.pid:  # spawned, but the table does not know: never leave it running
                self._unrecorded(exc)
            raise
        rc = self._wait_leader()
        self._after_exit(rc)

    def _spawn(self) -> bool:
        """Spawn the workload and record it RUNNING (one transaction); False: nothing to run."""
        with db.transaction(self.conn):
            row = db.get(self.conn, self.name)
            if row is None or row.token != self.token:
                _say(f"{self.name}: superseded before start")
                return False
            if row.state == "STOPPING":
                state = "TERMINATED" if row.terminating else "STOPPED"
                db.update(self.conn, self.name, self.token, state=state, detail="stopped before it started",
                          sup_pid=None, stop_deadline=None, stopped_at=time.time())
                return False
            command = row.spec["command"]
            _say(f"{self.name}: starting {command!r}")
            max_run_s = float(row.spec["max_run_s"]) if row.spec.get("max_run_s") else None
            try:
                proc = subprocess.Popen(host_deadline(command, max_run_s, self.grace),
                                        env=workload_env(os.environ, row.spec.get("env", {}), self.db_path),
                                        cwd=row.spec.get("cwd"), stdin=subprocess.DEVNULL,
                                        start_new_session=True)
            except OSError as exc:
                db.update(self.conn, self.name, self.token, state="STOPPED", sup_pid=None, error="crashed",
                          detail=f"could not start {command[0]!r}: {exc}", stopped_at=time.time())
                _say(f"{self.name}: could not start: {exc}")
                return False
            self.pid, self.ctime = proc.pid, db.create_time(proc.pid)
            if max_run_s:
                self.run_deadline = time.time() + max_run_s
            proc.returncode = 0  # we reap it ourselves; keep Popen.__del__ out of it
            db.update(self.conn, self.name, self.token, state="RUNNING", pid=self.pid,
                      ctime=self.ctime, started_at=time.time(), detail="", exit_code=None,
                      **self._me())
        return True

    def _unrecorded(self, exc: sqlite3.Error) -> None:
        """The workload runs but its row cannot say so: stop it now (SIGTERM, SIGKILL after
        the grace period) rather than leave a process nobody knows of."""
        _say(f"{self.name}: could not record the start in {self.db_path} ({exc}): stopping it")
        _killpg(self.pid, signal.SIGTERM)
        end = time.time() + self.grace
        while time.time() < end and db.group_members(self.pid, self.ctime):
            time.sleep(0.05)
        _killpg(self.pid, signal.SIGKILL)
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass

    def _wait_leader(self) -> int:
        """Block until the leader exits (pidfd: no polling), serving stop requests meanwhile."""
        sel = selectors.DefaultSelector()
        sel.register(self.wake_r, selectors.EVENT_READ, "signal")
        try:
            pidfd: int | None = os.pidfd_open(self.pid)
            sel.register(pidfd, selectors.EVENT_READ, "exit")
        except (AttributeError, OSError):  # Linux < 5.3: fall back to a short poll
            pidfd = None
        try:
            while True:
                info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
                if info is not None:  # peeked, not reaped: the zombie leader keeps the pgid ours
                    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
                wake = self.deadline if self.termed else self.run_deadline
                timeout = None if wake is None else max(0.0, wake - time.time())
                if pidfd is None:
                    timeout = WATCH_POLL_S / 4 if timeout is None else min(timeout, WATCH_POLL_S / 4)
                events = sel.select(timeout)
                if any(key.data == "signal" for key, _ in events):
                    self._drain()
                    self._on_stop_request()
                elif self.deadline is not None and time.time() >= self.deadline:
                    self._kill()
                elif (not self.termed and self.run_deadline is not None
                      and time.time() >= self.run_deadline):
                    _say(f"{self.name}: ran past its max run time: stopping it")
                    self._on_stop_request("stopping: ran past its max run time")
        finally:
            sel.close()
            if pidfd is not None:
                os.close(pidfd)

    def _drain(self) -> None:
        try:
            while os.read(self.wake_r, 512):
                pass
        except BlockingIOError:
            pass

    def _on_stop_request(self, why: str = "stopping (supervisor signalled)") -> None:
        try:
            with db.transaction(self.conn):
                row = db.get(self.conn, self.name)
                if row is None or row.token != self.token:
                    return
                deadline = row.stop_deadline
                if row.state != "STOPPING" or deadline is None:  # a signal not sent by LocalCloud.stop
                    deadline = time.time() + self.grace
                    db.update(self.conn, self.name, self.token, state="STOPPING",
                              stop_deadline=deadline, detail=why)
        except sqlite3.Error as exc:  # stop it all the same: the table is bookkeeping
            _say(f"{self.name}: could not record the stop in {self.db_path} ({exc}); stopping anyway")
            deadline = time.time() + self.grace
        self.deadline = deadline if self.deadline is None else min(self.deadline, deadline)
        if not self.termed:
            self.termed = True
            try:
                self.escaped = [p for p in psutil.Process(self.pid).children(recursive=True)
                                if os.getpgid(p.pid) != self.pid]
            except (psutil.NoSuchProcess, ProcessLookupError):
                pass
            _say(f"{self.name}: SIGTERM to process group {self.pid}")
            _killpg(self.pid, signal.SIGTERM)
            db.signal_processes(self.escaped, signal.SIGTERM)

    def _kill(self) -> None:
        _say(f"{self.name}: grace period over, SIGKILL to process group {self.pid}")
        _killpg(self.pid, signal.SIGKILL)
        db.signal_processes(self.escaped, signal.SIGKILL)
        self.killed = True
        self.deadline = None

    def _after_exit(self, rc: int) -> None:
        killed = self.killed
        if self.termed and not killed:  # give the rest of the group its grace period too
            while self.deadline is not None and time.time() < self.deadline:
                others = [p for p in db.group_members(self.pid, self.ctime) if p.pid != self.pid]
                if not others:
                    break
                time.sleep(0.05)
        _killpg(self.pid, signal.SIGKILL)  # a powered-off VM keeps no stragglers
        db.signal_processes(self.escaped, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        error = None
        if not self.termed and self.run_deadline is not None and rc == TIMEOUT_EXIT:
            detail = "stopped: ran past its max run time (the host's deadline)"
        elif not self.termed:
            detail = f"exited with code {rc}" if rc >= 0 else f"killed by {db.signame(-rc)}"
            error = _exit_error(rc)
        elif killed:
            detail = "stopped: still running when the grace period ended, killed with SIGKILL"
        else:
            detail = f"stopped: exit code {rc}" if rc >= 0 else f"stopped: {db.signame(-rc)}"
        self._finish(detail, rc, error)

    # --- watch: take over an orphaned workload -----------------------------------------

    def watch(self) -> None:
        with db.transaction(self.conn):
            row = db.get(self.conn, self.name)
            if row is None or row.token != self.token or row.pid is None:
                return
            self.pid, self.ctime, self.deadline = row.pid, row.ctime, row.stop_deadline
            db.update(self.conn, self.name, self.token, **self._me())
        _say(f"{self.name}: watching process group {self.pid} (its supervisor was lost)")
        while members := db.group_members(self.pid, self.ctime):
            if self.deadline is not None and time.time() >= self.deadline:
                db.signal_processes(members, signal.SIGKILL)
                self.deadline, self.killed = None, True
            time.sleep(WATCH_POLL_S)
        how = "killed with SIGKILL after the grace period" if self.killed else "exited"
        self._finish(f"stopped: {how} (exit code unknown: its supervisor was lost)")


def _exit_error(rc: int) -> str | None:
    """The error kind of a workload that ended on its own (not stopped by the cloud):
    SIGTERM from outside (or the 143 a workload exits with after handling it) is the local
    stand-in for a spot reclaim; any other non-zero end is a crash."""
    if rc == 0:
        return None
    if rc in (-signal.SIGTERM, 128 + signal.SIGTERM):
        return "preempted"
    return "crashed"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="spotbench-local-supervisor")
    ap.add_argument("--db", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--grace", type=float, default=30.0)
    ap.add_argument("--watch", action="store_true")
    args = ap.parse_args(argv)
    sup = Supervisor(args.db, args.name, args.token, args.grace)
    try:
        sup.watch() if args.watch else sup.run()
    except Exception as exc:  # leave a trace in the instance log; query() reconciles the row
        _say(f"{args.name}: supervisor failed: {exc!r}")
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
