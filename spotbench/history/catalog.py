"""Every run's records as one table: DuckDB over the result store (local, gs://, s3://).

    with Catalog("file:///…/results/osu-local") as cat:
        cat.query("SELECT run, avg(value) FROM records WHERE metric = 'latency' GROUP BY run")

Tables, loaded when the catalogue is opened (all timestamps UTC, as TIMESTAMP):

    records    one row per stored value: the `Result` fields (params and metadata as JSON)
               plus `attempt` (the n of <group>.<n>.jsonl), `path` (runs/<run>/<file>) and
               `contaminated` (why control flagged the attempt, runs/<run>/flags/; its
               records then read as preempted, as `ResultStore.read` returns them)
    attempts   (a view) one row per stored group attempt (file): run, group, attempt, preempted,
               started_at, ended_at, billed_s, cost_usd, machine/zone/accelerator, values,
               contaminated
    runs       the run ledger: run, opened_at, closed_at, reason
    flags      attempts control flagged contaminated: run, group, attempt, reason
    starts     one row per start request (runs/<run>/starts/): at, machine_type, accelerator,
               zone, members, failed (members the cloud could not run), capacity (of them,
               typed as capacity errors), typed (failures with a typed kind), detail

Everything a group wrote is data, never trusted: each attempt file is read as
`ResultStore.load_attempt` reads it (bounded, a bad line or file skipped with a warning), and
only valid records reach DuckDB, so a malformed line never becomes a DuckDB error.

The JSONL files stay the source of truth. `compact(run)` writes one Parquet file per closed
run (runs/<run>/records.parquet) holding the same rows; the catalogue then reads the Parquet
for that run and only the JSONL files it does not hold (a late attempt is never lost).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
from fsspec.implementations.local import LocalFileSystem

from pydantic import ValidationError

from spotbench.results import MAX_ATTEMPT_BYTES, Result, ResultStore, RunInfo, StartRecord

log = logging.getLogger("spotbench.history")

PARQUET_NAME = "records.parquet"

# DuckDB type of each stored Result field (tests check this covers every field of Result).
RECORD_TYPES: dict[str, str] = {
    "sweep": "VARCHAR", "run": "VARCHAR", "group": "VARCHAR", "trial": "INTEGER",
    "params": "JSON", "workload": "VARCHAR", "metric": "VARCHAR", "value": "DOUBLE",
    "unit": "VARCHAR", "cloud": "VARCHAR", "machine_type": "VARCHAR", "accelerator": "VARCHAR",
    "zone": "VARCHAR", "spot": "BOOLEAN", "preempted": "BOOLEAN", "started_at": "TIMESTAMPTZ",
    "ended_at": "TIMESTAMPTZ", "billed_s": "DOUBLE", "cost_usd": "DOUBLE", "metadata": "JSON",
}
RUN_TYPES = {"run": "VARCHAR", "opened_at": "TIMESTAMPTZ", "closed_at": "TIMESTAMPTZ",
             "reason": "VARCHAR"}

assert set(RECORD_TYPES) == set(Result.model_fields), "RECORD_TYPES must follow Result"


class QueryError(ValueError):
    """The user's SQL did not run (the message is DuckDB's)."""


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[tuple[Any, ...]]

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def _select_records(source: str) -> str:
    """Typed columns of the `records` table from a read_json(...) source with a `path`."""
    cols = []
    for name, typ in RECORD_TYPES.items():
        quoted = f'"{name}"'
        cols.append(f"{quoted}::TIMESTAMP AS {quoted}" if typ == "TIMESTAMPTZ" else quoted)
    attempt = "CAST(regexp_extract(path, '\\.([0-9]+)\\.jsonl$', 1) AS INTEGER) AS attempt"
    return f"SELECT {', '.join(cols)}, {attempt}, path FROM {source}"


def _read_json(path: str) -> str:
    types = {**RECORD_TYPES, "path": "VARCHAR"}
    return (f"read_json('{path}', columns={_struct(types)}, format='newline_delimited', "
            "maximum_object_size=67108864)")


def _sql_list(paths: list[str]) -> str:
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


def _struct(types: dict[str, str]) -> str:
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in types.items()) + "}"


class Catalog:
    """DuckDB tables over one result store, loaded when opened (a snapshot: reopen to see
    newer runs). Use as a context manager (closes the database)."""

    BATCH = 512  # files fetched per fsspec `cat` call (concurrent on gs:// and s3://)

    def __init__(self, url: str, **storage_options: Any):
        self.store = ResultStore(url, **storage_options)
        self.fs = self.store.fs
        self.local = isinstance(self.fs, LocalFileSystem)
        self.con = duckdb.connect()
        self.con.execute("SET TimeZone='UTC'")
        self.con.execute("SET enable_progress_bar=false")
        if not self.local:  # gs://, s3://, memory://: DuckDB reads Parquet through the same fsspec
            self.con.register_filesystem(self.fs)
        self._load()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.con.close()

    # ---- files ------------------------------------------------------------------------
    def _url(self, path: str) -> str:
        return path if self.local else self.fs.unstrip_protocol(path)

    def _rel(self, path: str) -> str:
        """`runs/<run>/<file>`: paths in the tables do not depend on where the store lives."""
        root = self.store.root.rstrip("/") + "/"
        return path[len(root):] if path.startswith(root) else path

    def _files(self) -> dict[str, list[str]]:
        """Store files under runs/ by kind: jsonl, parquet, ledger (one listing)."""
        runs_dir = self.store.path("runs")
        self.sizes: dict[str, int] = {}
        if self.local:  # os.scandir: fsspec's local listing costs ~10x more per file
            found = []
            for d in _scandir(runs_dir):
                if d.is_dir():
                    for e in _scandir(d.path):
                        found.append(e.path)
                        if e.name.endswith(".jsonl"):
                            self.sizes[e.path] = _size(e)
                    found += [e.path for e in _scandir(f"{d.path}/starts")]
                    found += [e.path for e in _scandir(f"{d.path}/flags")]
        else:
            try:
                listed = self.fs.find(runs_dir, detail=True)
            except FileNotFoundError:
                listed = {}
            found = list(listed)
            self.sizes = {p: int(info.get("size") or 0) for p, info in listed.items()}
        out: dict[str, list[str]] = {"jsonl": [], "parquet": [], "ledger": [], "starts": [],
                                     "flags": []}
        prefix = runs_dir.rstrip("/") + "/"
        for path in sorted(found):
            rel = path[len(prefix):] if path.startswith(prefix) else path
            parts = rel.split("/")
            if len(parts) == 3 and parts[1] in ("starts", "flags") and parts[2].endswith(".json"):
                out[parts[1]].append(path)
            if len(parts) != 2:  # raw output, launches/ …
                continue
            name = parts[1]
            if name.endswith(".jsonl"):
                out["jsonl"].append(path)
            elif name == PARQUET_NAME:
                out["parquet"].append(path)
            elif name == "run.json":
                out["ledger"].append(path)
        return out

    def compacted_runs(self) -> set[str]:
        """Runs that have a records.parquet."""
        return {p.rsplit("/", 2)[-2] for p in self._files()["parquet"]}

    def _jsonl_file(self, paths: list[str]) -> str:
        """Every valid record of `paths` in one local NDJSON file, each with its `path`
        (DuckDB reads one big file far faster than thousands of small ones). Files and lines
        are checked as `ResultStore.load_attempt` checks them; a file past
        MAX_ATTEMPT_BYTES is skipped before it is fetched."""
        fd, tmp = tempfile.mkstemp(suffix=".jsonl", prefix="spotbench-catalog-")
        big = [p for p in paths if self.sizes.get(p, 0) > MAX_ATTEMPT_BYTES]
        for path in big:
            log.warning("skipped %s: more than %d bytes (an attempt may store at most that)",
                        path, MAX_ATTEMPT_BYTES)
        paths = [p for p in paths if p not in set(big)]
        with os.fdopen(fd, "wb") as out:
            for i in range(0, len(paths), self.BATCH):
                chunk = paths[i:i + self.BATCH]
                contents = self._cat(chunk, limit=MAX_ATTEMPT_BYTES + 1)
                for path in chunk:
                    records = self.store.parse_attempt(path, contents[path]) or []
                    prefix = b'{"path":' + json.dumps(self._rel(path)).encode() + b","
                    for r in records:
                        out.write(prefix + r.model_dump_json().encode()[1:] + b"\n")
        return tmp

    def _cat(self, paths: list[str], limit: int = 1 << 20) -> dict[str, bytes]:
        """The first `limit` bytes of each of `paths` (a missing file: empty)."""
        if self.local:
            return {p: _head(p, limit) for p in paths}
        got = self.fs.cat(paths, on_error="return") if len(paths) > 1 else {paths[0]: self.fs.cat(paths[0])}
        return {p: (v[:limit] if isinstance(v, bytes) else b"") for p, v in got.items()}

    # ---- tables -----------------------------------------------------------------------
    def _load(self) -> None:
        files = self._files()
        parquet = [self._url(p) for p in files["parquet"]]
        compacted: set[str] = set()
        if parquet:
            rows = self.con.execute(f"SELECT DISTINCT path FROM read_parquet({_sql_list(parquet)})")
            compacted = {r[0] for r in rows.fetchall()}
        jsonl = [p for p in files["jsonl"] if self._rel(p) not in compacted]
        self.con.execute("DROP VIEW IF EXISTS records")
        self.con.execute("DROP TABLE IF EXISTS jsonl_records")
        cols = ", ".join(f'"{n}" {"TIMESTAMP" if t == "TIMESTAMPTZ" else t}'
                         for n, t in RECORD_TYPES.items())
        self.con.execute(f"CREATE TABLE jsonl_records ({cols}, attempt INTEGER, path VARCHAR)")
        if jsonl:
            tmp = self._jsonl_file(jsonl)
            try:
                self.con.execute(f"INSERT INTO jsonl_records BY NAME {_select_records(_read_json(tmp))}")
            finally:
                os.unlink(tmp)
            self._reject_forged()
        # Parquet stays on disk: queries read only the columns and row groups they need
        union = (f" UNION ALL BY NAME SELECT * FROM read_parquet({_sql_list(parquet)})"
                 if parquet else "")
        self.con.execute(f"CREATE VIEW stored_records AS SELECT * FROM jsonl_records{union}")
        self._load_flags(files["flags"])
        self.con.execute("""
            CREATE VIEW records AS
            SELECT r.* REPLACE (r.preempted OR f.reason IS NOT NULL AS preempted),
                   f.reason AS contaminated
            FROM stored_records r LEFT JOIN flags f USING (run, "group", attempt)
        """)
        self.con.execute("""
            CREATE OR REPLACE VIEW attempts AS
            SELECT run, "group", attempt, any_value(sweep) AS sweep, any_value(workload) AS workload,
                   any_value(trial) AS trial, any_value(params) AS params,
                   any_value(cloud) AS cloud, any_value(machine_type) AS machine_type,
                   any_value(accelerator) AS accelerator, any_value(zone) AS zone,
                   any_value(spot) AS spot, bool_or(preempted) AS preempted,
                   min(started_at) AS started_at, max(ended_at) AS ended_at,
                   max(billed_s) AS billed_s, max(cost_usd) AS cost_usd,
                   max(TRY_CAST(json_extract(metadata, '$.members') AS INTEGER)) AS members,
                   count(*) AS "values", any_value(path) AS path,
                   any_value(contaminated) AS contaminated
            FROM records GROUP BY run, "group", attempt
        """)
        self.con.execute("DROP TABLE IF EXISTS runs")
        self.con.execute("CREATE TABLE runs (run VARCHAR, opened_at TIMESTAMP, "
                         "closed_at TIMESTAMP, reason VARCHAR)")
        if files["ledger"]:
            contents = self._cat(files["ledger"])
            rows = []
            for path in files["ledger"]:
                try:
                    info = RunInfo.model_validate_json(contents[path])
                except ValidationError as exc:
                    log.warning("skipped %s: not a run ledger entry (%s)", path, exc.errors()[0]["msg"])
                    continue
                rows.append((info.run, _naive(info.opened_at), _naive(info.closed_at), info.reason))
            self.con.executemany("INSERT INTO runs VALUES (?, ?, ?, ?)", rows)

        self.con.execute("DROP TABLE IF EXISTS starts")
        self.con.execute("CREATE TABLE starts (run VARCHAR, \"group\" VARCHAR, \"at\" TIMESTAMP, "
                         "machine_type VARCHAR, accelerator VARCHAR, zone VARCHAR, members INTEGER, "
                         "failed INTEGER, capacity INTEGER, typed INTEGER, detail VARCHAR)")
        if files["starts"]:
            contents = self._cat(files["starts"])
            rows = []
            for path in files["starts"]:
                try:
                    st = StartRecord.model_validate_json(contents[path])
                except ValidationError as exc:
                    log.warning("skipped %s: not a start record (%s)", path, exc.errors()[0]["msg"])
                    continue
                run, _, name = path.rsplit("/", 3)[-3:]
                if (st.run, st.group) != (run, name.removesuffix(".json").rsplit(".", 1)[0]):
                    log.warning("rejected start record %s: it names group %s of run %s",
                                path, st.group, st.run)
                    continue
                rows.append((st.run, st.group, _naive(st.at), st.machine_type, st.accelerator, st.zone,
                             st.members, len(st.failed), sum(k == "capacity" for k in st.errors.values()),
                             len(st.errors), "; ".join(f"{k}: {v}" for k, v in st.failed.items())))
            self.con.executemany("INSERT INTO starts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def _load_flags(self, paths: list[str]) -> None:
        """`flags`: (run, group, attempt, reason) of every attempt control flagged
        contaminated, read as `ResultStore.flags` reads them (the path names the attempt)."""
        self.con.execute("DROP TABLE IF EXISTS flags")
        self.con.execute('CREATE TABLE flags (run VARCHAR, "group" VARCHAR, attempt INTEGER, '
                         'reason VARCHAR)')
        rows = []
        for run in sorted({p.rsplit("/", 3)[-3] for p in paths}):
            for key, reason in self.store.flags(run).items():
                group, _, n = key.rpartition(".")
                if n.isdigit():
                    rows.append((run, group, int(n), reason))
        if rows:
            self.con.executemany("INSERT INTO flags VALUES (?, ?, ?, ?)", rows)

    def _reject_forged(self) -> None:
        """Drop files whose records claim another group or run than their path: the path is
        what a group's identity may write, the body is not (as `ResultStore.read`)."""
        forged = self.con.execute(r"""
            SELECT DISTINCT path FROM jsonl_records
            WHERE run IS DISTINCT FROM split_part(path, '/', 2)
               OR "group" IS DISTINCT FROM regexp_extract(path, '^runs/[^/]+/(.+)\.[0-9]+\.jsonl$', 1)
        """).fetchall()
        if forged:
            paths = [p for (p,) in forged]
            log.warning("rejected %d file(s) whose records claim another group or run than their "
                        "path (written by another group?): %s", len(paths), ", ".join(paths[:5]))
            self.con.execute("DELETE FROM jsonl_records WHERE path IN (SELECT unnest($p))", {"p": paths})

    # ---- queries ----------------------------------------------------------------------
    def query(self, sql: str, params: list[Any] | None = None) -> Table:
        try:
            cur = self.con.execute(sql, params or [])
        except duckdb.Error as exc:
            raise QueryError(str(exc).strip()) from None
        if cur.description is None:
            return Table([], [])
        return Table([d[0] for d in cur.description], cur.fetchall())

    def frame(self, sql: str, params: list[Any] | None = None):
        """The query's result as a pandas DataFrame."""
        try:
            return self.con.execute(sql, params or []).df()
        except duckdb.Error as exc:
            raise QueryError(str(exc).strip()) from None

    # ---- compaction ---------------------------------------------------------------------
    def compact(self, run: str) -> str | None:
        """Write runs/<run>/records.parquet with every record of `run` (the JSONL files stay).
        Returns the Parquet path, or None when the run has no records."""
        target = self.store.path("runs", run, PARQUET_NAME)
        fd, tmp = tempfile.mkstemp(suffix=".parquet", prefix="spotbench-compact-")
        os.close(fd)
        try:
            n = self.con.execute("SELECT count(*) FROM records WHERE run = $run", {"run": run}).fetchone()[0]
            if not n:
                return None
            self.con.execute(f"COPY (SELECT * FROM stored_records WHERE run = $run ORDER BY path) "
                             f"TO '{tmp}' (FORMAT parquet)", {"run": run})
            self.store.write_whole(target, Path(tmp).read_bytes())  # whole, as every file
        finally:
            Path(tmp).unlink(missing_ok=True)
        return target


def _size(entry: os.DirEntry) -> int:
    try:
        return entry.stat().st_size
    except OSError:
        return 0


def _head(path: str, limit: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return b""


def _scandir(path: str) -> list[os.DirEntry]:
    try:
        with os.scandir(path) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _naive(when: datetime | None) -> datetime | None:
    """UTC without tzinfo (DuckDB TIMESTAMP; TIMESTAMPTZ would need pytz to come back)."""
    if when is None:
        return None
    return when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo else when
