"""The local cloud: every instance is a real process on this machine.

    cloud = LocalCloud(".spotbench/<sweep>/cloud.db", grace_s=30)
    cloud.deploy([LocalInstanceSpec(name, labels, [sys.executable, "-m", "workloads.osu"], env)])
    cloud.start({"spotbench-group": g})      # PENDING → RUNNING
    cloud.stop({"spotbench-group": g})       # SIGTERM, SIGKILL after grace_s → STOPPED

The instance table lives in SQLite (WAL) so the runner, the functions server and the CLI —
separate processes, possibly restarted — share one truth; check-and-spawn happens inside
`BEGIN IMMEDIATE`, so no instance is ever started twice. Each started instance runs under a
detached supervisor (`_local_supervisor`) that outlives the caller and records STOPPED with
the exit code the moment the workload exits. If a supervisor is lost, `query`/`stop`
reconcile from the process table (pid + create time, so reused PIDs are never touched).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

import spotbench
from spotbench._private import open_private_append, private_dir
from spotbench.clouds.local import db
from spotbench.clouds.base import ACTIVE, ConsoleOutput, ErrorKind, Instance, State, Sweeper, matches

SPAWN_TIMEOUT_S = 30.0  # a supervisor that has not registered by then is counted as failed
WAIT_POLL_S = 0.05
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True)
class LocalInstanceSpec:
    name: str
    labels: dict[str, str]
    command: list[str]  # e.g. [sys.executable, "-m", "workloads.osu"]
    env: dict[str, str] = field(default_factory=dict)  # on top of os.environ
    cwd: str | None = None
    ip: str = "127.0.0.1"
    max_run_s: float | None = None  # the supervisor stops it after this long (like GCE max-run-duration)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"local instance name {self.name!r}: use letters, digits, '.', '_', '-'")
        if not self.command or not all(isinstance(a, str) for a in self.command):
            raise ValueError(f"local instance {self.name!r}: command must be a non-empty list of strings")

    def to_json(self) -> str:
        return json.dumps({"command": list(self.command), "env": dict(self.env), "cwd": self.cwd, "ip": self.ip,
                           "max_run_s": self.max_run_s})


class LocalCloud:
    name = "local"

    def __init__(self, db_path: str | Path, grace_s: float = 30.0, log_dir: str | Path | None = None):
        self.db_path = Path(db_path).resolve()
        private_dir(self.db_path.parent)
        self.grace_s = float(grace_s)
        self.log_dir = Path(log_dir).resolve() if log_dir else self.db_path.parent / "logs"
        with closing(db.connect(self.db_path)):
            pass  # creates the table, switches to WAL

    def __repr__(self) -> str:
        return f"LocalCloud({str(self.db_path)!r}, grace_s={self.grace_s:g})"

    def log_path(self, name: str) -> Path:
        """The instance's combined stdout/stderr (and its supervisor's notes), appended per start."""
        return self.log_dir / f"{name}.log"

    def console_output(self, instance: Instance, start: int = 0, limit: int = 1 << 20) -> ConsoleOutput:
        """The instance's log from byte `start` (at most `limit` bytes: a follower asks again)."""
        path = self.log_path(instance.name)
        try:
            with open(path, "rb") as fh:
                size = fh.seek(0, 2)
                begin = min(max(0, start), size)
                fh.seek(begin)
                data = fh.read(limit)
        except FileNotFoundError:
            return ConsoleOutput("", start, start)
        return ConsoleOutput(data.decode("utf-8", "replace"), begin, begin + len(data))

    # --- verbs ---------------------------------------------------------------------------

    def deploy(self, specs: list[LocalInstanceSpec]) -> list[Instance]:
        """Declare instances (STOPPED). A running one keeps its process; its new spec applies
        at the next start. A TERMINATED one is declared anew."""
        now = time.time()
        with self._txn() as conn:
            for spec in specs:
                row = db.get(conn, spec.name)
                labels = json.dumps(dict(spec.labels), sort_keys=True)
                if row is None:
                    conn.execute(
                        "INSERT INTO instances (name, labels, spec, state, updated_at) VALUES (?, ?, ?, ?, ?)",
                        (spec.name, labels, spec.to_json(), State.STOPPED.value, now))
                elif row.state == State.TERMINATED:
                    db.update(conn, spec.name, labels=labels, spec=spec.to_json(), state=State.STOPPED.value,
                              terminating=0, detail="deployed again", error=None, token=None)
                else:
                    db.update(conn, spec.name, labels=labels, spec=spec.to_json())
            return [self._instance(db.get(conn, s.name)) for s in specs]

    def start(self, labels: Mapping[str, str], zones: Sequence[str] = ()) -> list[Instance]:
        """Spawn every matching STOPPED instance; PENDING/RUNNING/STOPPING ones are left alone."""
        out = []
        with self._txn() as conn:
            for row in self._select(conn, labels):
                if row.state == State.TERMINATED or row.terminating:
                    out.append(self._instance(row, "not started: the instance is terminated; deploy it again",
                                              ErrorKind.GONE))
                    continue
                if row.state == State.STOPPED:
                    token = uuid.uuid4().hex
                    db.update(conn, row.name, state=State.PENDING.value, token=token, detail="", error=None,
                              sup_pid=None, sup_ctime=None, sup_spawned_at=time.time(), pid=None,
                              ctime=None, exit_code=None, stop_deadline=None, started_at=None, stopped_at=None)
                    self._spawn(row.name, token)
                    row = db.get(conn, row.name)
                out.append(self._instance(row))
        return out

    def stop(self, labels: Mapping[str, str]) -> list[Instance]:
        """Soft-off: SIGTERM now, SIGKILL after grace_s (in the background). Returns at once."""
        return self._power_off(labels, terminate=False)

    def terminate(self, labels: Mapping[str, str]) -> list[Instance]:
        """Stop if needed, then TERMINATED for good. Nothing matching = nothing to do."""
        return self._power_off(labels, terminate=True)

    def query(self, labels: Mapping[str, str]) -> list[Instance]:
        """Matching instances as they are; rows whose supervisor was lost are reconciled."""
        with closing(db.connect(self.db_path)) as conn:
            found = [r for r in db.rows(conn) if matches(r.labels, labels)]
        if any(r.state in ACTIVE and not self._supervised(r) for r in found):
            with self._txn() as conn:
                found = self._select(conn, labels)
        return [self._instance(r) for r in found]

    def wait(self, labels: Mapping[str, str], states: set[State], timeout: float) -> list[Instance]:
        """Poll until every matching instance is in `states`; TimeoutError names the others."""
        deadline = time.monotonic() + timeout
        while True:
            instances = self.query(labels)
            late = [i for i in instances if i.state not in states]
            if not late:
                return instances
            if time.monotonic() >= deadline:
                who = ", ".join(f"{i.name} ({i.state}{': ' + i.detail if i.detail else ''})" for i in late)
                want = "/".join(sorted(s.value for s in states))
                raise TimeoutError(f"after {timeout:g} s not {want}: {who}")
            time.sleep(WAIT_POLL_S)

    def halt(self) -> list[str]:
        """Stop every process of this cloud without the instance table (`halt`)."""
        return halt(self.db_path, self.grace_s)

    @contextmanager
    def lock(self) -> Iterator[None]:
        """The sweep's control lock: start/stop/done hold it from reading the state to acting
        on it (a file lock, so it serializes every thread and process of the machine)."""
        fd = os.open(self.db_path.with_suffix(".lock"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    # --- internals -----------------------------------------------------------------------

    def _power_off(self, labels: Mapping[str, str], terminate: bool) -> list[Instance]:
        out = []
        with self._txn() as conn:
            for row in self._select(conn, labels):
                if row.state == State.TERMINATED:
                    pass
                elif row.state == State.STOPPED:
                    if terminate:
                        db.update(conn, row.name, state=State.TERMINATED.value, terminating=1, token=None,
                                  detail="terminated")
                else:
                    if terminate:
                        db.update(conn, row.name, terminating=1)
                    if row.state != State.STOPPING:
                        db.update(conn, row.name, state=State.STOPPING.value,
                                  stop_deadline=time.time() + self.grace_s,
                                  detail="terminating" if terminate else "stopping")
                        self._deliver_stop(conn, db.get(conn, row.name))
                out.append(self._instance(db.get(conn, row.name)))
        return out

    def _deliver_stop(self, conn: sqlite3.Connection, row: db.Row) -> None:
        if row.sup_pid is None:
            return  # its supervisor is starting up: it sees STOPPING when it registers
        if db.signal_pid(row.sup_pid, row.sup_ctime, signal.SIGTERM):
            return  # the supervisor terminates the group and escalates after the deadline
        # supervisor lost: terminate the group ourselves, a watcher escalates to SIGKILL
        db.signal_processes(db.group_members(row.pid, row.ctime) if row.pid else [], signal.SIGTERM)
        token = uuid.uuid4().hex
        db.update(conn, row.name, token=token, sup_pid=None, sup_ctime=None, sup_spawned_at=time.time(),
                  detail="stopping (its supervisor was lost)")
        self._spawn(row.name, token, watch=True)

    def _supervised(self, row: db.Row) -> bool:
        if row.sup_pid is None:
            return (row.sup_spawned_at or 0) > time.time() - SPAWN_TIMEOUT_S
        return db.alive(row.sup_pid, row.sup_ctime)

    def _select(self, conn: sqlite3.Connection, labels: Mapping[str, str]) -> list[db.Row]:
        """Matching rows, reconciled; call inside a transaction."""
        return [self._reconcile(conn, r) for r in db.rows(conn) if matches(r.labels, labels)]

    def _reconcile(self, conn: sqlite3.Connection, row: db.Row) -> db.Row:
        if row.state not in ACTIVE or self._supervised(row):
            return row
        members = db.group_members(row.pid, row.ctime) if row.pid else []
        error = None
        if not row.pid:
            detail = f"supervisor did not start; see {self.log_path(row.name)}"
            error = ErrorKind.CRASHED.value
        elif not members:
            detail = "stopped: exited, exit code unknown (its supervisor was lost)"
        elif row.state == State.STOPPING and row.stop_deadline and time.time() >= row.stop_deadline:
            db.signal_processes(members, signal.SIGKILL)
            detail = "stopped: killed with SIGKILL after the grace period (its supervisor was lost)"
        else:
            lost = "running; its supervisor was lost, exit is noticed on query"
            if row.detail != lost and row.state == State.RUNNING:
                db.update(conn, row.name, detail=lost)
            return db.get(conn, row.name) or row
        db.update(conn, row.name, state=(State.TERMINATED if row.terminating else State.STOPPED).value,
                  detail=detail, error=error, pid=None, sup_pid=None, token=None, stop_deadline=None, stopped_at=time.time())
        return db.get(conn, row.name) or row

    def _spawn(self, name: str, token: str, watch: bool = False) -> None:
        """Start a supervisor detached (double fork through sh): no child is left to reap."""
        private_dir(self.log_dir)
        argv = [sys.executable, "-m", "spotbench.clouds.local._local_supervisor", "--db", str(self.db_path),
                "--name", name, "--token", token, "--grace", repr(self.grace_s)]
        if watch:
            argv.append("--watch")
        root = str(spotbench.PROJECT_ROOT)
        env = {**os.environ, "PYTHONPATH": _prepend(root, os.environ.get("PYTHONPATH"))}
        with open_private_append(self.log_path(name)) as log:
            done = subprocess.run(["/bin/sh", "-c", '"$@" &', "spotbench-spawn", *argv], env=env,
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"could not start the supervisor of {name!r} (sh exit {done.returncode}); "
                               f"see {self.log_path(name)}")

    @contextmanager
    def _txn(self) -> Iterator[sqlite3.Connection]:
        with closing(db.connect(self.db_path)) as conn, db.transaction(conn):
            yield conn

    def _instance(self, row: db.Row | None, detail: str | None = None,
                  error: ErrorKind | None = None) -> Instance:
        assert row is not None
        return Instance(name=row.name, state=State(row.state), labels=dict(row.labels), zone="local",
                        ip=row.spec.get("ip"), detail=row.detail if detail is None else detail,
                        error=error or (ErrorKind(row.error) if row.error else None))


def halt(db_path: Path, grace_s: float) -> list[str]:
    """Stop every process of the local cloud at `db_path` without its instance table (a full
    disk, a corrupt file): its supervisors and every process carrying the table's path in
    `SPOTBENCH_LOCAL_DB` get SIGTERM, what is left after `grace_s` SIGKILL. Returns what
    was still alive after that (empty: nothing is left running)."""
    procs = _own_processes(Path(db_path).resolve())
    db.signal_processes(procs, signal.SIGTERM)
    end = time.monotonic() + grace_s
    while time.monotonic() < end and any(db.alive(p.pid, None) and p.is_running() for p in procs):
        time.sleep(WAIT_POLL_S)
    db.signal_processes(_own_processes(Path(db_path).resolve()), signal.SIGKILL)
    time.sleep(WAIT_POLL_S)
    return [f"{p.pid} {' '.join(p.cmdline())[:80]}" for p in _own_processes(Path(db_path).resolve())]


def _own_processes(db_path: Path) -> list[psutil.Process]:
    mine = str(db_path)
    out = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid == os.getpid():
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            cmd = proc.info["cmdline"] or []
            supervisor = "spotbench.clouds.local._local_supervisor" in cmd and mine in cmd
            if supervisor or proc.environ().get(db.DB_ENV) == mine:
                out.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


def _prepend(path: str, current: str | None) -> str:
    parts = [p for p in (current or "").split(":") if p]
    return ":".join([path, *[p for p in parts if p != path]])
