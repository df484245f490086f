"""The local cloud's instance table (SQLite) and the process checks it relies on.

Shared by `LocalCloud` (in the runner, the functions server, the CLI) and by the
per-instance supervisor process, so it imports nothing heavier than psutil.

One row per instance. `token` names the supervisor in charge of the row: a supervisor
writes only while its token is the row's token, so a superseded one can never overwrite a
newer run. The workload is the leader of its own process group (pgid == pid); `ctime` is
its create time, checked before any signal so a reused PID is never hit.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from spotbench._private import FILE_MODE as PRIVATE_FILE_MODE, trusted_path

BUSY_TIMEOUT_S = 30.0
DB_ENV = "SPOTBENCH_LOCAL_DB"  # on every local VM's processes: which instance table owns them

SCHEMA = """
CREATE TABLE IF NOT EXISTS instances (
    name TEXT PRIMARY KEY,
    labels TEXT NOT NULL,          -- JSON object
    spec TEXT NOT NULL,            -- JSON: command, env, cwd, ip
    state TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    error TEXT,                    -- ErrorKind value of the last life, NULL when none
    terminating INTEGER NOT NULL DEFAULT 0,
    token TEXT,
    sup_pid INTEGER, sup_ctime REAL, sup_spawned_at REAL,
    pid INTEGER, ctime REAL,
    exit_code INTEGER,
    stop_deadline REAL,
    started_at REAL, stopped_at REAL,
    updated_at REAL NOT NULL
)
"""


@dataclass(frozen=True)
class Row:
    name: str
    labels: dict[str, str]
    spec: dict[str, Any]
    state: str
    detail: str
    error: str | None
    terminating: bool
    token: str | None
    sup_pid: int | None
    sup_ctime: float | None
    sup_spawned_at: float | None
    pid: int | None
    ctime: float | None
    exit_code: int | None
    stop_deadline: float | None
    started_at: float | None
    stopped_at: float | None

    @classmethod
    def from_sql(cls, r: sqlite3.Row) -> Row:
        d = dict(r)
        d.pop("updated_at", None)
        d["labels"] = json.loads(d["labels"])
        d["spec"] = json.loads(d["spec"])
        d["terminating"] = bool(d["terminating"])
        return cls(**d)


def connect(path: str | Path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, busy timeout.

    The database is created 0600 before SQLite opens it (its -wal/-shm files take that mode):
    member tokens are in the instances' env. Every folder above it is checked first, at each
    connection (`trusted_path`): a swapped parent would hand us another user's instances."""
    trusted_path(path)
    _create_private(Path(path))
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(SCHEMA)
    columns = {r[1] for r in conn.execute("PRAGMA table_info(instances)")}
    if "error" not in columns:  # a table made by an older spotbench
        conn.execute("ALTER TABLE instances ADD COLUMN error TEXT")
    return conn


def _create_private(path: Path) -> None:
    """Create the database file 0600 if it does not exist, without ever opening an existing
    one: POSIX locks belong to the process, so closing any descriptor of the file would drop
    the locks of this process's open connections (SQLite's unix VFS cannot see it), and
    another process could then delete the WAL under them (SQLITE_IOERR_SHORT_READ)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)  # a file this call created: no connection can hold locks on it yet


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`BEGIN IMMEDIATE`: takes the write lock up front, so check-then-act is atomic."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:  # SQLite may have rolled back already (busy, I/O, full)
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def rows(conn: sqlite3.Connection) -> list[Row]:
    return [Row.from_sql(r) for r in conn.execute("SELECT * FROM instances ORDER BY name")]


def get(conn: sqlite3.Connection, name: str) -> Row | None:
    r = conn.execute("SELECT * FROM instances WHERE name = ?", (name,)).fetchone()
    return Row.from_sql(r) if r else None


def update(conn: sqlite3.Connection, name: str, guard: str | None = None, **cols: Any) -> bool:
    """Set columns of one row; with `guard` (a supervisor's token), only while it is in charge."""
    cols["updated_at"] = time.time()
    sets = ", ".join(f"{k} = ?" for k in cols)
    sql, args = f"UPDATE instances SET {sets} WHERE name = ?", [*cols.values(), name]
    if guard is not None:
        sql += " AND token = ?"
        args.append(guard)
    return conn.execute(sql, args).rowcount == 1


# --- processes ---------------------------------------------------------------------------


def _same(proc: psutil.Process, ctime: float | None) -> bool:
    try:
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return ctime is None or abs(proc.create_time() - ctime) < 0.05
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def alive(pid: int | None, ctime: float | None) -> bool:
    """Is this exact process (pid + create time) running? Zombies count as dead."""
    if not pid:
        return False
    try:
        return _same(psutil.Process(pid), ctime)
    except psutil.NoSuchProcess:
        return False


def create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return None


def group_members(pgid: int, leader_ctime: float | None) -> list[psutil.Process]:
    """Live (non-zombie) processes of the workload's process group, leader included."""
    try:
        leader_now = psutil.Process(pgid).create_time()
        if leader_ctime is not None and abs(leader_now - leader_ctime) >= 0.05:
            return []  # the PID was reused by someone else: not our group
    except psutil.NoSuchProcess:
        pass
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) != pgid:
                continue
        except (ProcessLookupError, PermissionError):
            continue
        if _same(proc, None) and (leader_ctime is None or proc.create_time() >= leader_ctime - 0.05):
            members.append(proc)
    return members


def signal_processes(procs: list[psutil.Process], sig: signal.Signals) -> None:
    for proc in procs:
        try:
            proc.send_signal(sig)  # psutil checks the create time: never hits a reused PID
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass


def signal_pid(pid: int | None, ctime: float | None, sig: signal.Signals) -> bool:
    """Signal this exact process (pid + create time); False if it is gone."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        if not _same(proc, ctime):
            return False
        proc.send_signal(sig)
        return True
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def signame(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
