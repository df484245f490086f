"""Result records and where they are kept.

One `Result` per metric value (like PKB's Sample, plus cost). A group run's records are one
JSONL file, written whole: the bytes go to a temporary name first and are renamed (on
object stores a single PUT is already atomic), so a reader never sees half a file. Files
are never overwritten: a second write for the same group in the same run (a retry after
preemption) gets the next attempt number.

Layout under the results URL (any fsspec URL: file://, gs://, s3://, memory://):

    runs/<run>/run.json                    the run ledger entry (opened/closed)
    runs/<run>/<group>.<attempt>.jsonl     the records of one group run
    runs/<run>/<group>.<attempt>/<name>    raw tool output beside them
    runs/<run>/starts/<group>.<n>.json     one per start request: when, where, which members
                                           the cloud could not run and why (spot statistics)
"""

from __future__ import annotations

import json
import logging
import posixpath
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem
from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger("spotbench.results")


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_run_id(now: datetime | None = None) -> str:
    return (now or utcnow()).strftime("%Y%m%dT%H%M%SZ")


class Result(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sweep: str
    run: str
    group: str
    trial: int
    params: dict[str, Any] = Field(default_factory=dict)
    workload: str
    metric: str
    value: float
    unit: str
    cloud: str
    machine_type: str
    accelerator: str | None = None
    zone: str | None = None
    spot: bool = False
    preempted: bool = False
    started_at: datetime
    ended_at: datetime
    billed_s: float | None = None
    cost_usd: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class RunInfo(BaseModel):
    run: str
    opened_at: datetime
    closed_at: datetime | None = None
    reason: str | None = None


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

    def __init__(self, url: str, **storage_options: Any):
        self.url = url.rstrip("/")
        self.fs, self.root = fsspec.core.url_to_fs(self.url, **storage_options)

    # ---- paths ------------------------------------------------------------------
    def _p(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def _write_whole(self, path: str, data: bytes) -> None:
        if isinstance(self.fs, LocalFileSystem):  # rename is atomic on one filesystem
            self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            tmp = f"{path}.tmp-{uuid.uuid4().hex}"
            self.fs.pipe_file(tmp, data)
            self.fs.mv(tmp, path)
        else:  # object stores have no folders: no makedirs (on GCS it needs buckets.get)
            self.fs.pipe_file(path, data)

    # ---- group records -------------------------------------------------------------
    def write_group(self, run: str, group: str, results: Iterable[Result]) -> str:
        """Store one group run's records as a new file; returns its path."""
        body = "".join(r.model_dump_json() + "\n" for r in results).encode()
        for attempt in range(1, 1000):
            path = self._p("runs", run, f"{group}.{attempt}.jsonl")
            if not self.fs.exists(path):
                self._write_whole(path, body)
                return path
        raise RuntimeError(f"too many attempts stored for {group} in run {run}")

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
        return sorted(self.fs.glob(self._p("runs", run, f"{group}.*.jsonl")))

    @staticmethod
    def _owner(path: str) -> tuple[str, str]:
        """(run, group) a records file belongs to, from its path `runs/<run>/<group>.<n>.jsonl`:
        the path is what the group's identity may write (bucket IAM), the body is not."""
        run_dir, name = path.rsplit("/", 2)[-2:]
        return run_dir, name.removesuffix(".jsonl").rsplit(".", 1)[0]

    def _trusted(self, path: str, record: dict[str, Any]) -> bool:
        run, group = self._owner(path)
        if record.get("group") == group and record.get("run") == run:
            return True
        log.warning("rejected %s: its records claim group %r of run %r, its path says group %r "
                    "of run %r (written by another group?)", path, record.get("group"),
                    record.get("run"), group, run)
        return False

    def read(self, run: str | None = None) -> list[Result]:
        """Every stored record (of `run`); a file whose records disagree with its path is
        skipped and logged."""
        pattern = self._p("runs", run or "*", "*.jsonl")
        out: list[Result] = []
        for path in sorted(self.fs.glob(pattern)):
            with self.fs.open(path, "rt") as fh:
                records = [Result.model_validate_json(line) for line in fh if line.strip()]
            if all(self._trusted(path, r.model_dump(include={"group", "run"})) for r in records):
                out.extend(records)
        return out

    def completed_groups(self, run: str) -> set[str]:
        """Groups of `run` with at least one stored, not-preempted attempt. The group is the
        one the file's path names; a file whose records claim another is not counted."""
        done: set[str] = set()
        for path in self.fs.glob(self._p("runs", run, "*.jsonl")):
            with self.fs.open(path, "rt") as fh:
                first = fh.readline()
            if first.strip():
                record = json.loads(first)
                if self._trusted(path, record) and not record.get("preempted"):
                    done.add(self._owner(path)[1])
        return done

    def attempted_groups(self, run: str) -> set[str]:
        """Groups of `run` with any stored attempt (preempted ones included)."""
        names = (p.rsplit("/", 1)[-1] for p in self.fs.glob(self._p("runs", run, "*.jsonl")))
        return {n.rsplit(".", 2)[0] for n in names}

    def record_launch(self, run: str, group: str) -> None:
        """Note that `group` was started in `run` (bounds restarts of a failing group)."""
        n = self.launch_count(run, group) + 1
        self._write_whole(self._p("runs", run, "launches", f"{group}.{n}"), b"")

    def record_start(self, run: str, group: str, outcome: dict[str, Any]) -> None:
        """Note one start request of `group` and its outcome (`StartRecord` fields)."""
        n = len(self.fs.glob(self._p("runs", run, "starts", f"{group}.*.json"))) + 1
        body = StartRecord.model_validate({"run": run, "group": group, **outcome})
        self._write_whole(self._p("runs", run, "starts", f"{group}.{n}.json"),
                          body.model_dump_json().encode())

    def launch_count(self, run: str, group: str) -> int:
        return len(self.fs.glob(self._p("runs", run, "launches", f"{group}.*")))

    # ---- run ledger ----------------------------------------------------------------
    def runs(self) -> list[RunInfo]:
        infos = []
        for path in sorted(self.fs.glob(self._p("runs", "*", "run.json"))):
            infos.append(RunInfo.model_validate_json(self.fs.cat_file(path)))
        return infos

    def current_run(self) -> RunInfo | None:
        """The newest run that is still open, if any."""
        open_runs = [r for r in self.runs() if r.closed_at is None]
        return open_runs[-1] if open_runs else None

    def open_run(self, now: datetime | None = None) -> RunInfo:
        """The open run, or a new one (idempotent: a repeated tick reuses the open run)."""
        current = self.current_run()
        if current is not None:
            return current
        now = now or utcnow()
        info = RunInfo(run=new_run_id(now), opened_at=now)
        path = self._p("runs", info.run, "run.json")
        if self.fs.exists(path):  # closed earlier in the same second: keep ids unique
            info = RunInfo(run=f"{info.run}-{uuid.uuid4().hex[:4]}", opened_at=now)
            path = self._p("runs", info.run, "run.json")
        self._write_whole(path, info.model_dump_json().encode())
        return info

    def close_run(self, run: str, reason: str, now: datetime | None = None) -> RunInfo:
        path = self._p("runs", run, "run.json")
        info = RunInfo.model_validate_json(self.fs.cat_file(path))
        if info.closed_at is None:
            info = info.model_copy(update={"closed_at": now or utcnow(), "reason": reason})
            self._write_whole(path, info.model_dump_json().encode())
        return info

