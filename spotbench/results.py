"""Result records and where they are kept.

One `Result` per metric value (like PKB's Sample, plus cost). A group run's records are one
JSONL file, written whole: the bytes go to a temporary name first and are renamed (on
object stores a single PUT is already atomic), so a reader never sees half a file. Files
are never overwritten: a second write for the same group in the same run (a retry after
preemption) gets the next attempt number.

Layout under the results URL (any fsspec URL: file://, gs://, s3://, memory://):

    runs/<run>/run.json                    the run ledger entry (opened/closed, its ticks)
    runs/<run>/closed.<reason>             empty: the run closed when run.json could not be
                                           rewritten (a full disk still takes an empty file)
    runs/<run>/<group>.<attempt>.jsonl     the records of one group run
    runs/<run>/<group>.<attempt>/<name>    raw tool output beside them
    runs/<run>/starts/<group>.<n>.json     one per start request: when, where, which members
                                           the cloud could not run and why (spot statistics)
    runs/<run>/flags/<group>.<attempt>.json  an attempt found contaminated (why), kept apart
                                           from the records, which are never rewritten
    runs/<run>/launches/<group>.<n>        one per start of the group (its time)
    runs/<run>/ends/<group>.<n>.json       when control stopped launch n, or saw it stopped,
                                           and which attempt files the group had then
    control.lock                           the control lease while a function acts
                                           (spotbench.lease; absent when nobody does)

Storage failures (read-only, full, unreachable) raise `StoreError` naming the URL and the
cause, so the functions can answer 503 and the runner can say what to fix.

What a group writes is data, never trusted: every reader bounds what it reads (bytes and
records per attempt file), skips a file or line it cannot parse with a warning naming it,
and never raises it into control. Times and costs inside records are the member's word:
control takes attempt intervals and spend from its own ledger (`spotbench.ledger`).
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import json
import logging
import posixpath
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from glob import has_magic
from datetime import UTC, datetime
from typing import Any, TypeVar

import fsspec
from fsspec.implementations.local import LocalFileSystem
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from spotbench.lease import LEASE_TTL_S, LEASE_WAIT_S, lease_for

log = logging.getLogger("spotbench.results")


T = TypeVar("T")

# Bounds on one attempt file (what a group may store per attempt; `WorkloadRun` stops
# recording at MAX_RECORDS, a reader skips a file past either bound, with a warning).
MAX_RECORDS = 10_000
MAX_ATTEMPT_BYTES = 16 << 20
MAX_SKIPPED_SHOWN = 200  # sentences a store keeps of what its readers left out
MAX_NAME_LEN = 128  # a metric name (it names files and columns of the report)
MAX_UNIT_LEN = 32
_ATTEMPT_FILE = re.compile(r"^(?P<group>[^/]+)\.(?P<n>[0-9]{1,6})\.jsonl$")
_WARNED_LINES = 3  # bad lines named per file; the rest are counted


class StoreError(RuntimeError):
    """The results store could not be read or written (read-only, full, unreachable)."""


class CorruptLedger(StoreError):
    """A run ledger file (`runs/<run>/run.json`) is not what spotbench wrote."""


def _store_errors(fn: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(fn)
    def wrapper(self: ResultStore, *args: Any, **kwargs: Any) -> T:
        try:
            return fn(self, *args, **kwargs)
        except StoreError:
            raise
        except OSError as exc:
            raise StoreError(f"results store {self.url}: {fn.__name__} failed: {exc}") from exc
    return wrapper


def utcnow() -> datetime:
    return datetime.now(UTC)


RUN_ID_FORMAT = "%Y%m%dT%H%M%SZ"
RUN_ID_SUFFIX = 4  # hex digits added to a run opened in the same second as a closed one


def new_run_id(now: datetime | None = None) -> str:
    return (now or utcnow()).strftime(RUN_ID_FORMAT)


def run_id_lengths() -> tuple[int, int]:
    """The lengths a run id has: `new_run_id()`, and with `open_run`'s `-<hex>` suffix.

    IAM resource patterns cannot match one path segment (`*` spans `/`), so the AWS member
    policy matches a run segment by its length (`?` per character; infra/aws/identity.py).
    """
    n = len(new_run_id(datetime(2000, 1, 1, tzinfo=UTC)))
    return n, n + 1 + RUN_ID_SUFFIX


class Result(BaseModel):
    """One value. Numbers are finite (JSON has no inf/NaN: they would come back as null and
    refuse to load); costs and billed time are never negative; names are bounded."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    sweep: str
    run: str
    group: str
    trial: int
    params: dict[str, Any] = Field(default_factory=dict)
    workload: str
    metric: str = Field(min_length=1, max_length=MAX_NAME_LEN)
    value: float
    unit: str = Field(max_length=MAX_UNIT_LEN)
    cloud: str
    machine_type: str
    accelerator: str | None = None
    zone: str | None = None
    spot: bool = False
    preempted: bool = False
    started_at: datetime
    ended_at: datetime
    billed_s: float | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("metadata")
    @classmethod
    def _known_metadata(cls, meta: dict[str, Any]) -> dict[str, Any]:
        """The metadata keys readers compute with (report, costs) have their type."""
        for key, kind in _METADATA_TYPES.items():
            value = meta.get(key)
            if value is None:
                continue
            if kind == "count" and not (isinstance(value, int) and not isinstance(value, bool)
                                        and 0 <= value <= 1 << 53):
                raise ValueError(f"metadata {key} must be a whole number ≥ 0")
            if kind == "text" and not (isinstance(value, str) and len(value) <= MAX_NAME_LEN):
                raise ValueError(f"metadata {key} must be a string of at most {MAX_NAME_LEN} characters")
            if kind == "names" and not (isinstance(value, list) and len(value) <= 1024 and all(
                    isinstance(v, str) and len(v) <= MAX_NAME_LEN for v in value)):
                raise ValueError(f"metadata {key} must be a list of names")
        return meta


_METADATA_TYPES = {"members": "count", "size_bytes": "count", "cpu_count": "count",
                   "host_cores": "count", "accelerator_count": "count", "placement": "text",
                   "member_types": "names"}


class RunInfo(BaseModel):
    run: str
    opened_at: datetime
    closed_at: datetime | None = None
    reason: str | None = None
    ticks: list[str] = Field(default_factory=list)  # scheduler tick times this run served


@dataclass(frozen=True)
class Attempt:
    """One stored group run (file): whether its records say preempted. When it ran is not
    here: the records' own times are the member's word (`spotbench.ledger` has control's)."""

    group: str
    attempt: int
    preempted: bool
    contaminated: str | None = None  # why the member found its own numbers untrustworthy (a stall)

    @property
    def key(self) -> str:
        return f"{self.group}.{self.attempt}"


class StartRecord(BaseModel):
    """One start request of a group: the cloud's answer, member by member."""

    run: str
    group: str
    at: datetime
    machine_type: str
    accelerator: str | None = None
    zone: str | None = None
    members: int
    failed: dict[str, str] = Field(default_factory=dict)  # member → the cloud's words
    errors: dict[str, str] = Field(default_factory=dict)  # member → error kind, when the cloud typed it


class ResultStore:
    """Results of one sweep under one fsspec URL."""

    def __init__(self, url: str, *, writer: Callable[[str, bytes], None] | None = None,
                 **storage_options: Any):
        """`writer(path, data)`: how objects are written on an object store when this
        identity may only read it (a GCP member writes with its group's POST policy)."""
        self.url = url.rstrip("/")
        self._writer = writer
        if "://" in self.url and not self.url.startswith(("file://", "local://")):
            # an object store: list afresh every time (a warm function must see what members
            # stored since its last call), with this store's own client
            storage_options.setdefault("use_listings_cache", False)
            storage_options.setdefault("skip_instance_cache", True)
        self.fs, self.root = fsspec.core.url_to_fs(self.url, **storage_options)
        self._local = isinstance(self.fs, LocalFileSystem)
        # what the readers left out (files, lines), one sentence each, for a report to show
        self.skipped: list[str] = []

    def _skip(self, message: str, *args: Any) -> None:
        """A file or line a reader left out: logged, and kept (bounded) in `skipped`."""
        log.warning(message, *args)
        if len(self.skipped) < MAX_SKIPPED_SHOWN:
            self.skipped.append(message % args)

    # ---- paths ------------------------------------------------------------------
    def _p(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def _glob(self, pattern: str) -> list[str]:
        """Paths matching `pattern` (`*` within one path segment), sorted.

        On object stores: one listing under the pattern's literal head (s3fs's own glob also
        asks for "folder" objects, which a prefix-scoped identity is refused)."""
        if self._local:
            return sorted(self.fs.glob(pattern))
        parts = pattern.split("/")
        head = next(i for i, part in enumerate(parts) if has_magic(part))
        parent, name = "/".join(parts[:head]).rsplit("/", 1)
        try:
            found = self.fs.find(parent, prefix=name + "/")
        except FileNotFoundError:
            return []
        return sorted(
            p for p in (f.rstrip("/") for f in found)
            if len(p.split("/")) == len(parts)
            and all(fnmatch.fnmatchcase(a, b) for a, b in zip(p.split("/"), parts))
        )

    def _exists(self, path: str) -> bool:
        """Whether `path` is stored. On object stores this lists the parent's prefix instead
        of asking for the object: the sweep's identities may list their own prefix, and a
        request for a missing object without a bucket-wide listing grant is refused (403)."""
        if self._local:
            return self.fs.exists(path)
        parent, name = path.rsplit("/", 1)
        try:  # `prefix`: one listing of exactly this name (s3fs, gcsfs; others list the parent)
            found = self.fs.find(parent, prefix=name)
        except FileNotFoundError:
            return False
        return path in {p.rstrip("/") for p in found}

    def _write_whole(self, path: str, data: bytes) -> None:
        if self._local:  # rename is atomic on one filesystem
            self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            tmp = f"{path}.tmp-{uuid.uuid4().hex}"
            try:
                self.fs.pipe_file(tmp, data)
                self.fs.mv(tmp, path)
            except OSError:  # e.g. a full disk: leave no partial temporary file behind
                try:
                    self.fs.rm_file(tmp)
                except OSError:
                    pass
                raise
        elif self._writer is not None:  # the group's grant, not this identity, may write
            self._writer(path, data)
        else:  # object stores have no folders: no makedirs (on GCS it needs buckets.get)
            self.fs.pipe_file(path, data)

    # ---- group records -------------------------------------------------------------
    @_store_errors
    def write_group(self, run: str, group: str, results: Iterable[Result]) -> str:
        """Store one group run's records as a new file; returns its path."""
        body = "".join(r.model_dump_json() + "\n" for r in results).encode()
        stored = {p.rsplit("/", 1)[-1] for p in self._group_files(run, group)}
        for attempt in range(1, 1000):
            path = self._p("runs", run, f"{group}.{attempt}.jsonl")
            if path.rsplit("/", 1)[-1] not in stored:
                self._write_whole(path, body)
                return path
        raise RuntimeError(f"too many attempts stored for {group} in run {run}")

    @_store_errors
    def write_raw(self, run: str, group: str, name: str, text: str | bytes, attempt: int | None = None) -> str:
        """Store raw tool output beside the group's records (attempt = next one by default)."""
        if attempt is None:
            attempt = len(self._group_files(run, group)) + 1
        data = text.encode() if isinstance(text, str) else text
        if posixpath.normpath(name) != name or name.startswith(("/", "../")) or name == "..":
            raise ValueError(f"raw output name {name!r} must be a plain relative path")
        path = self._p("runs", run, f"{group}.{attempt}", name)
        self._write_whole(path, data)
        return path

    def _group_files(self, run: str, group: str) -> list[str]:
        return sorted(self._glob(self._p("runs", run, f"{group}.*.jsonl")))

    @staticmethod
    def _owner(path: str) -> tuple[str, str, int] | None:
        """(run, group, attempt) a records file belongs to, from its path
        `runs/<run>/<group>.<n>.jsonl` (the path is what the group's identity may write, the
        body is not); None for any other name under a group's prefix (`<group>.x.jsonl`)."""
        run_dir, name = path.rsplit("/", 2)[-2:]
        m = _ATTEMPT_FILE.match(name)
        return (run_dir, m["group"], int(m["n"])) if m else None

    def _trusted(self, path: str, record: dict[str, Any]) -> bool:
        owner = self._owner(path)
        if owner is None:
            return False
        run, group, _ = owner
        if record.get("group") == group and record.get("run") == run:
            return True
        self._skip("rejected %s: its records claim group %r of run %r, its path says group %r "
                    "of run %r (written by another group?)", path, record.get("group"),
                    record.get("run"), group, run)
        return False

    def load_attempt(self, path: str) -> list[Result] | None:
        """The records of one attempt file, read bounded (MAX_ATTEMPT_BYTES, MAX_RECORDS).
        None, with a warning naming the file, when it cannot count as an attempt: a name
        that is not `<group>.<n>.jsonl`, too big, records claiming another group or run. A
        line that is not a valid `Result` (not JSON, null or non-finite values, bad times) is
        skipped with a warning naming the file and line; the others are kept."""
        if self._owner(path) is None:
            self._skip("skipped %s: not an attempt file (<group>.<n>.jsonl)", path)
            return None
        try:
            with self.fs.open(path, "rb") as fh:
                data = fh.read(MAX_ATTEMPT_BYTES + 1)
        except FileNotFoundError:
            return None
        return self.parse_attempt(path, data)

    def parse_attempt(self, path: str, data: bytes) -> list[Result] | None:
        """`load_attempt` of bytes already read (at most MAX_ATTEMPT_BYTES + 1 of them)."""
        if self._owner(path) is None:
            self._skip("skipped %s: not an attempt file (<group>.<n>.jsonl)", path)
            return None
        if len(data) > MAX_ATTEMPT_BYTES:
            self._skip("skipped %s: more than %d bytes (an attempt may store at most that)",
                        path, MAX_ATTEMPT_BYTES)
            return None
        lines = [(n, line) for n, line in enumerate(data.splitlines(), 1) if line.strip()]
        if len(lines) > MAX_RECORDS:
            self._skip("skipped %s: %d records (an attempt may store at most %d)", path,
                        len(lines), MAX_RECORDS)
            return None
        records, bad = [], 0
        for n, line in lines:
            try:
                records.append(Result.model_validate_json(line))
            except (ValidationError, ValueError) as exc:
                bad += 1
                if bad <= _WARNED_LINES:
                    why = str(exc).splitlines()
                    self._skip("skipped %s:%d: not a valid record (%s)", path, n,
                                "; ".join(why[1:3]) or why[0])
        if bad > _WARNED_LINES:
            self._skip("skipped %d more invalid line(s) of %s", bad - _WARNED_LINES, path)
        if not all(self._trusted(path, r.model_dump(include={"group", "run"})) for r in records):
            return None
        return records

    @_store_errors
    def read(self, run: str | None = None) -> list[Result]:
        """Every stored record (of `run`); a file or line that cannot be used is skipped and
        logged (`load_attempt`). Records of a contaminated attempt come back preempted with
        metadata `contaminated` (why), so no average takes them in."""
        pattern = self._p("runs", run or "*", "*.jsonl")
        out: list[Result] = []
        flags: dict[str, dict[str, str]] = {}
        for path in sorted(self._glob(pattern)):
            records = self.load_attempt(path)
            if not records:
                continue
            run_dir, name = path.rsplit("/", 2)[-2:]
            if run_dir not in flags:
                flags[run_dir] = self.flags(run_dir)
            why = flags[run_dir].get(name.removesuffix(".jsonl"))
            if why:
                records = [r.model_copy(update={"preempted": True,
                                                "metadata": {**r.metadata, "contaminated": why}})
                           for r in records]
            out.extend(records)
        return out

    @_store_errors
    def completed_groups(self, run: str) -> set[str]:
        """Groups of `run` with at least one stored attempt that is neither preempted nor
        flagged contaminated."""
        flags = self.flags(run)
        return {a.group for a in self.attempts(run) if not a.preempted and a.key not in flags}

    @_store_errors
    def attempts(self, run: str) -> list[Attempt]:
        """Every stored attempt of `run` that holds at least one valid record. The group is
        the one the file's path names; a file that cannot be used is left out (logged)."""
        out = []
        for path in sorted(self._glob(self._p("runs", run, "*.jsonl"))):
            records = self.load_attempt(path)
            owner = self._owner(path)
            if not records or owner is None:
                continue
            out.append(Attempt(group=owner[1], attempt=owner[2],
                               preempted=any(r.preempted for r in records),
                               contaminated=_own_stall(records)))
        return out

    @_store_errors
    def flag(self, run: str, group: str, attempt: int, reason: str) -> None:
        """Mark one stored attempt contaminated (its records stay as written)."""
        body = json.dumps({"group": group, "attempt": attempt, "reason": reason}).encode()
        self._write_whole(self._p("runs", run, "flags", f"{group}.{attempt}.json"), body)

    @_store_errors
    def flags(self, run: str) -> dict[str, str]:
        """`<group>.<attempt>` → why it is contaminated. The key is the flag's path
        (`flags/<group>.<attempt>.json`, what control writes); a body that names another
        attempt, or cannot be read, is left out (logged), as records that disagree with
        their path are."""
        out = {}
        for path in self._glob(self._p("runs", run, "flags", "*.json")):
            key = path.rsplit("/", 1)[-1].removesuffix(".json")
            data = _json_object(self.fs, path)
            if data is None:
                continue
            if f"{data.get('group')}.{data.get('attempt')}" != key or not isinstance(data.get("reason"), str):
                log.warning("rejected flag %s: it names %s.%s", path, data.get("group"),
                            data.get("attempt"))
                continue
            out[key] = data["reason"]
        return out

    @_store_errors
    def probe(self) -> None:
        """Write and remove a small file: raises StoreError when results could not be stored."""
        path = self._p(f".spotbench-probe-{uuid.uuid4().hex}")
        self._write_whole(path, b"probe")
        self.fs.rm_file(path)

    @_store_errors
    def record_launch(self, run: str, group: str, now: datetime | None = None) -> str:
        """Note that `group` is started in `run` (bounds restarts of a failing group)."""
        n = self.launch_count(run, group) + 1
        path = self._p("runs", run, "launches", f"{group}.{n}")
        self._write_whole(path, (now or utcnow()).isoformat().encode())
        return path

    @_store_errors
    def forget_launch(self, path: str) -> None:
        """Undo `record_launch` (the cloud could not run the group: not an attempt)."""
        self.fs.rm_file(path)

    def record_start(self, run: str, group: str, outcome: dict[str, Any]) -> None:
        """Note one start request of `group` and its outcome (`StartRecord` fields)."""
        n = len(self._glob(self._p("runs", run, "starts", f"{group}.*.json"))) + 1
        body = StartRecord.model_validate({"run": run, "group": group, **outcome})
        self._write_whole(self._p("runs", run, "starts", f"{group}.{n}.json"),
                          body.model_dump_json().encode())

    @_store_errors
    def launch_count(self, run: str, group: str) -> int:
        return len(self._glob(self._p("runs", run, "launches", f"{group}.*")))

    @_store_errors
    def last_launch(self, run: str, group: str) -> datetime | None:
        """When `group` was last started in `run` (None: never)."""
        n = self.launch_count(run, group)
        return self._launch_time(run, group, n) if n else None

    @_store_errors
    def launches(self, run: str, group: str) -> list[datetime]:
        """When `group` was started in `run`, each launch in order (its attempts' starts)."""
        times = [self._launch_time(run, group, n) for n in range(1, self.launch_count(run, group) + 1)]
        return [t for t in times if t is not None]

    def _launch_time(self, run: str, group: str, n: int) -> datetime | None:
        path = self._p("runs", run, "launches", f"{group}.{n}")
        return _time(_small(self.fs, path), path)

    @_store_errors
    def launch_ledger(self, run: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
        """Control's own ledger of `run` (None: every run), one listing per kind:
        (run, group) → {"launches": {n: when}, "ends": {n: {"at": when, "stored": [n, …]}}}.
        Unreadable entries are left out, logged."""
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for kind, suffix in (("launches", ""), ("ends", ".json")):
            for path in self._glob(self._p("runs", run or "*", kind, "*")):
                run_dir, _, name = path.rsplit("/", 3)[-3:]
                group, _, n = name.removesuffix(suffix).rpartition(".")
                if not group or not n.isdigit():
                    continue
                entry = out.setdefault((run_dir, group), {"launches": {}, "ends": {}})
                raw = _small(self.fs, path)
                if kind == "launches":
                    when = _time(raw, path)
                    if when is not None:
                        entry["launches"][int(n)] = when
                    continue
                data = _json_object(self.fs, path, raw)
                when = _time(str(data.get("at", "")).encode(), path) if data else None
                stored = data.get("stored") if data else None
                if when is not None:
                    entry["ends"][int(n)] = {"at": when, "stored": [
                        a for a in (stored if isinstance(stored, list) else []) if isinstance(a, int)]}
        return out

    @_store_errors
    def record_end(self, run: str, group: str, launch: int, now: datetime | None = None) -> None:
        """Note that launch `launch` of `group` is over (control stopped it, or saw it
        stopped), with the attempt files the group has stored by now (theirs, or earlier)."""
        stored = sorted(o[2] for o in map(self._owner, self._group_files(run, group)) if o)
        body = json.dumps({"at": (now or utcnow()).isoformat(), "stored": stored}).encode()
        self._write_whole(self._p("runs", run, "ends", f"{group}.{launch}.json"), body)

    # ---- the control lease ----------------------------------------------------------
    @contextlib.contextmanager
    def lease(self, name: str, *, holder: str, ttl_s: float = LEASE_TTL_S,
              wait_s: float = LEASE_WAIT_S) -> Iterator[Any]:
        """Hold `<root>/<name>.lock` (spotbench.lease): one holder at a time, whichever
        machine it runs on. Raises `spotbench.lease.Busy` when another keeps it past `wait_s`,
        StoreError when the store cannot be asked."""
        lease = lease_for(self.fs, self._p(f"{name}.lock"), holder=holder, ttl_s=ttl_s,
                          wait_s=wait_s)
        try:
            lease.__enter__()
        except OSError as exc:
            raise StoreError(f"results store {self.url}: the {name} lock failed: {exc}") from exc
        try:
            yield lease  # `check()`: a holder fences its actions (spotbench.control)
        finally:
            lease.__exit__(None, None, None)

    # ---- run ledger ----------------------------------------------------------------
    @_store_errors
    def runs(self, strict: bool = False) -> list[RunInfo]:
        """Every run's ledger entry. A corrupt `run.json` is skipped (logged) — control and
        the readers act on the rest — or, `strict` (the local runner, whose own ledger it
        is), a `CorruptLedger` naming the file and the fix."""
        infos = []
        for path in sorted(self._glob(self._p("runs", "*", "run.json"))):
            info = _run_info(self.fs, path)
            if info is None:
                if strict:
                    raise CorruptLedger(
                        f"results store {self.url}: the run ledger {path} is corrupt: restore "
                        "it, or remove its run folder (its results go with it), then run again")
                continue
            if info.closed_at is None:
                info = self._closed_by_marker(path.rsplit("/", 1)[0], info)
            infos.append(info)
        return infos

    def _closed_by_marker(self, run_dir: str, info: RunInfo) -> RunInfo:
        markers = self._glob(f"{run_dir}/closed.*")
        if not markers:
            return info
        try:
            when = self.fs.modified(markers[0])
            when = when if when.tzinfo else when.replace(tzinfo=UTC)
        except (NotImplementedError, OSError):
            when = info.opened_at
        return info.model_copy(update={"closed_at": when,
                                       "reason": markers[0].rsplit("/", 1)[-1].split(".", 1)[1]})

    def run_of_tick(self, tick: str) -> RunInfo | None:
        """The run that a start tick with this time opened or joined, if any."""
        return next((r for r in self.runs() if tick in r.ticks), None)

    def current_run(self) -> RunInfo | None:
        """The newest run that is still open, if any."""
        open_runs = [r for r in self.runs() if r.closed_at is None]
        return open_runs[-1] if open_runs else None

    @_store_errors
    def open_run(self, now: datetime | None = None, tick: str | None = None) -> RunInfo:
        """The open run, or a new one (idempotent: a repeated tick reuses the open run).
        `tick` (the scheduler's time) is noted in the run, so a repeat is recognised later."""
        current = self.current_run()
        if current is not None:
            if tick and tick not in current.ticks:
                current = current.model_copy(update={"ticks": [*current.ticks, tick]})
                self._write_whole(self._p("runs", current.run, "run.json"),
                                  current.model_dump_json().encode())
            return current
        now = now or utcnow()
        info = RunInfo(run=new_run_id(now), opened_at=now, ticks=[tick] if tick else [])
        path = self._p("runs", info.run, "run.json")
        if self._exists(path):  # closed earlier in the same second: keep ids unique
            info = info.model_copy(update={"run": f"{info.run}-{uuid.uuid4().hex[:RUN_ID_SUFFIX]}"})
            path = self._p("runs", info.run, "run.json")
        self._write_whole(path, info.model_dump_json().encode())
        return info

    @_store_errors
    def close_run(self, run: str, reason: str, now: datetime | None = None) -> RunInfo:
        path = self._p("runs", run, "run.json")
        info = _run_info(self.fs, path) or RunInfo(run=run, opened_at=now or utcnow())
        if info.closed_at is None:
            info = info.model_copy(update={"closed_at": now or utcnow(), "reason": reason})
            try:
                self._write_whole(path, info.model_dump_json().encode())
            except OSError:  # full disk: an empty file still fits, and closes the run
                safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in reason) or "closed"
                self.fs.touch(self._p("runs", run, f"closed.{safe}"))
        return info

    def close_open_runs(self, reason: str, now: datetime | None = None) -> list[str]:
        """Close every open run (there should be one; a stop tick never leaves another open)."""
        closed = []
        for info in self.runs():
            if info.closed_at is None:
                self.close_run(info.run, reason=reason, now=now)
                closed.append(info.run)
        return closed



# ---- reading control's small files (bounded; a bad one is logged, never raised) ----------
_SMALL = 64 << 10


def _small(fs: Any, path: str) -> bytes:
    try:
        with fs.open(path, "rb") as fh:
            return fh.read(_SMALL + 1)
    except FileNotFoundError:
        return b""


def _json_object(fs: Any, path: str, raw: bytes | None = None) -> dict[str, Any] | None:
    raw = _small(fs, path) if raw is None else raw
    try:
        if len(raw) > _SMALL:
            raise ValueError(f"more than {_SMALL} bytes")
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except (ValueError, UnicodeDecodeError) as exc:
        log.warning("skipped %s: %s", path, exc)
        return None
    return data


def _time(raw: bytes, path: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(raw.decode().strip())
    except (ValueError, UnicodeDecodeError):
        log.warning("skipped %s: not a time", path)
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _own_stall(records: list[Result]) -> str | None:
    """Why a member found its own attempt untrustworthy (a stall it measured), if it did: a
    group can only flag itself, never another."""
    for record in records:
        why = (record.metadata or {}).get("contaminated")
        if why:
            return str(why)[:200]
    return None


def _run_info(fs: Any, path: str) -> RunInfo | None:
    raw = _small(fs, path)
    try:
        return RunInfo.model_validate_json(raw)
    except ValidationError as exc:
        log.warning("skipped %s: not a run ledger entry (%s)", path, exc.errors()[0]["msg"])
        return None
