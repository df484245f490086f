"""A group's attempt files: writing them whole, reading them bounded and trusting only
what their path allows, the contamination flags beside them, and what the readers left out
(`skipped`, one sentence per file or line, for a report to show)."""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from spotbench.results.model import MAX_ATTEMPT_BYTES, MAX_RECORDS, SPARE_ATTEMPTS, Attempt, Result
from spotbench.results.storage import Storage, json_object, read_head, store_errors

log = logging.getLogger("spotbench.results")

MAX_SKIPPED_SHOWN = 200  # sentences a store keeps of what its readers left out
_WARNED_LINES = 3  # bad lines named per file; the rest are counted


class AttemptFiles(Storage):
    """`runs/<run>/<group>.<n>.jsonl` (+ raw output, flags) of one store."""

    def __init__(self, url: str, *, writer: Callable[[str, bytes], None] | None = None,
                 **storage_options: Any):
        super().__init__(url, writer=writer, **storage_options)
        # what the readers left out (files, lines), one sentence each, for a report to show
        self.skipped: list[str] = []

    def _skip(self, message: str, *args: Any) -> None:
        """A file or line a reader left out: logged, and kept (bounded) in `skipped`."""
        log.warning(message, *args)
        if len(self.skipped) < MAX_SKIPPED_SHOWN:
            self.skipped.append(message % args)

    @store_errors
    def write_group(self, run: str, group: str, results: Iterable[Result],
                    attempt: int | None = None) -> str:
        """Store one group run's records as a new file; returns its path. `attempt`: that
        attempt's file (control's marker for launch n), else the next free number."""
        body = "".join(r.model_dump_json() + "\n" for r in results).encode()
        if attempt is not None:
            path = self.path("runs", run, f"{group}.{attempt}.jsonl")
            self.write_whole(path, body)
            return path
        stored = {p.rsplit("/", 1)[-1] for p in self.group_files(run, group)}
        for attempt in range(1, 1000):
            path = self.path("runs", run, f"{group}.{attempt}.jsonl")
            if path.rsplit("/", 1)[-1] not in stored:
                self.write_whole(path, body)
                return path
        raise RuntimeError(f"too many attempts stored for {group} in run {run}")

    @store_errors
    def write_raw(self, run: str, group: str, name: str, text: str | bytes, attempt: int | None = None) -> str:
        """Store raw tool output beside the group's records (attempt = next one by default)."""
        if attempt is None:
            attempt = len(self.group_files(run, group)) + 1
        data = text.encode() if isinstance(text, str) else text
        if posixpath.normpath(name) != name or name.startswith(("/", "../")) or name == "..":
            raise ValueError(f"raw output name {name!r} must be a plain relative path")
        path = self.path("runs", run, f"{group}.{attempt}", name)
        self.write_whole(path, data)
        return path

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
        data = read_head(self.fs, path, MAX_ATTEMPT_BYTES + 1)
        return None if data is None else self.parse_attempt(path, data)

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

    @store_errors
    def read(self, run: str | None = None) -> list[Result]:
        """Every stored record (of `run`); a file or line that cannot be used is skipped and
        logged (`load_attempt`). Records of a contaminated attempt come back preempted with
        metadata `contaminated` (why), so no average takes them in."""
        pattern = self.path("runs", run or "*", "*.jsonl")
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

    @store_errors
    def completed_groups(self, run: str, launched: Mapping[str, int] | None = None) -> set[str]:
        """Groups of `run` with at least one stored attempt that is neither preempted nor
        flagged contaminated (`launched`: only the attempts of control's launches,
        `launched_attempts`; None: every attempt file stored)."""
        flags = self.flags(run)
        attempts = self.attempts(run) if launched is None else self.launched_attempts(run, launched)
        return {a.group for a in attempts if not a.preempted and a.key not in flags}

    @store_errors
    def launched_attempts(self, run: str, launched: Mapping[str, int]) -> list[Attempt]:
        """The stored attempts of control's launches (`launched`: group → launches in `run`,
        `LaunchRecords.launch_counts`): attempts 1 … launches + `SPARE_ATTEMPTS` of each
        launched group, each read by name, bounded (`load_attempt`). What control reads of a
        run is so bounded by its own ledger, never by what members stored: any other file
        under a group's prefix is never listed nor read (issue #38)."""
        out = []
        for group, count in sorted(launched.items()):
            for n in range(1, count + SPARE_ATTEMPTS + 1):
                try:
                    attempt = self._attempt(self.path("runs", run, f"{group}.{n}.jsonl"))
                except PermissionError:
                    # S3 answers a GET of a missing key 403, not 404, to a caller whose
                    # s3:ListBucket is conditioned on a prefix (docs/platform.md): a launch
                    # that stored nothing, or a spare number, reads as absent
                    attempt = None
                if attempt is not None:
                    out.append(attempt)
        return out

    def _attempt(self, path: str) -> Attempt | None:
        records = self.load_attempt(path)
        owner = self._owner(path)
        if not records or owner is None:
            return None
        return Attempt(group=owner[1], attempt=owner[2],
                       preempted=any(r.preempted for r in records),
                       contaminated=_own_stall(records))

    @store_errors
    def attempts(self, run: str) -> list[Attempt]:
        """Every stored attempt of `run` that holds at least one valid record. The group is
        the one the file's path names; a file that cannot be used is left out (logged)."""
        found = (self._attempt(p) for p in sorted(self._glob(self.path("runs", run, "*.jsonl"))))
        return [a for a in found if a is not None]

    @store_errors
    def flag(self, run: str, group: str, attempt: int, reason: str) -> None:
        """Mark one stored attempt contaminated (its records stay as written)."""
        body = json.dumps({"group": group, "attempt": attempt, "reason": reason}).encode()
        self.write_whole(self.path("runs", run, "flags", f"{group}.{attempt}.json"), body)

    @store_errors
    def flags(self, run: str) -> dict[str, str]:
        """`<group>.<attempt>` → why it is contaminated. The key is the flag's path
        (`flags/<group>.<attempt>.json`, what control writes); a body that names another
        attempt, or cannot be read, is left out (logged), as records that disagree with
        their path are."""
        out = {}
        for path in self._glob(self.path("runs", run, "flags", "*.json")):
            key = path.rsplit("/", 1)[-1].removesuffix(".json")
            data = json_object(self.fs, path)
            if data is None:
                continue
            if f"{data.get('group')}.{data.get('attempt')}" != key or not isinstance(data.get("reason"), str):
                log.warning("rejected flag %s: it names %s.%s", path, data.get("group"),
                            data.get("attempt"))
                continue
            out[key] = data["reason"]
        return out


def _own_stall(records: list[Result]) -> str | None:
    """Why a member found its own attempt untrustworthy (a stall it measured), if it did: a
    group can only flag itself, never another."""
    for record in records:
        why = (record.metadata or {}).get("contaminated")
        if why:
            return str(why)[:200]
    return None
