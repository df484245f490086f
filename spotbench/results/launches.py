"""Control's own notes on a group's launches: each start (`launches/<group>.<n>`), each
start request's outcome (`starts/`), each end (`ends/<group>.<n>.json`), read back as the
ledger `spotbench.ledger` reasons over, and the groups a user stopped in a run
(`stopped/<group>.json`: not preempted, not retried in that run)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from spotbench.results.model import RUN_ID_FORMAT, SPARE_ATTEMPTS, SpentSummary, StartRecord, utcnow
from spotbench.results.storage import Storage, json_object, log, read_small, read_stored, read_time, store_errors

SPENT_FILE = "spent.json"  # the budget's spend through a closed run (SpentSummary)


class LaunchRecords(Storage):
    """`runs/<run>/launches|starts|ends/…` of one store."""

    @store_errors
    def record_launch(self, run: str, group: str, now: datetime | None = None) -> str:
        """Note that `group` is started in `run` (bounds restarts of a failing group)."""
        n = self.launch_count(run, group) + 1
        path = self.path("runs", run, "launches", f"{group}.{n}")
        self.write_whole(path, (now or utcnow()).isoformat().encode())
        return path

    @store_errors
    def forget_launch(self, path: str) -> None:
        """Undo `record_launch` (the cloud could not run the group: not an attempt)."""
        self.fs.rm_file(path)

    def record_start(self, run: str, group: str, outcome: dict[str, Any]) -> StartRecord:
        """Note one start request of `group` and its outcome (`StartRecord` fields); the record."""
        n = len(self._glob(self.path("runs", run, "starts", f"{group}.*.json"))) + 1
        body = StartRecord.model_validate({"run": run, "group": group, **outcome})
        self.write_whole(self.path("runs", run, "starts", f"{group}.{n}.json"),
                          body.model_dump_json().encode())
        return body

    @store_errors
    def start_records(self, run: str | None = None,
                      since: datetime | None = None) -> list[StartRecord]:
        """The start ledger (of `run`, else of every run; only requests at or after `since`,
        and then runs that cannot hold one are not read: `_may_hold`); one listing, and one
        read per record this store object has not read before (a record is written once,
        under a new name: a warm function reads only the records added since its last
        call). An unreadable entry, or one naming another run or group than its path, is
        left out, logged once."""
        runs = [run] if run is not None else self.run_ids()
        if since is not None and run is None:
            runs = _may_hold(runs, since)
        paths = sorted(p for r in runs for p in self._glob(self.path("runs", r, "starts", "*.json")))
        seen: dict[str, StartRecord | None] = self.__dict__.setdefault("_start_records", {})
        if run is None:  # what is no longer listed, or out of the window, is forgotten
            for gone in set(seen) - set(paths):
                del seen[gone]
        out = []
        for path in paths:
            if path not in seen:
                seen[path] = self._start_record(path)
            record = seen[path]
            if record is not None and (since is None or record.at >= since):
                out.append(record)
        return out

    def _start_record(self, path: str) -> StartRecord | None:
        data = json_object(self.fs, path, read_small(self.fs, path))
        if not data:
            return None
        try:
            record = StartRecord.model_validate(data)
        except ValueError as exc:
            log.warning("skipped %s: not a start record (%s)", path, exc)
            return None
        run_dir, _, name = path.rsplit("/", 3)[-3:]
        if (record.run, record.group) != (run_dir, name.removesuffix(".json").rsplit(".", 1)[0]):
            log.warning("skipped start record %s: it names group %s of run %s",
                        path, record.group, record.run)
            return None
        return record

    @store_errors
    def launch_count(self, run: str, group: str) -> int:
        return self.launch_counts(run).get(group, 0)

    @store_errors
    def launch_counts(self, run: str) -> dict[str, int]:
        """group → how many times control launched it in `run`: one listing of
        `launches/`, which only control writes (so it bounds what control reads of a run:
        `AttemptFiles.launched_attempts`)."""
        out: dict[str, int] = {}
        for name in self.names(self.path("runs", run, "launches")):
            group, _, n = name.rpartition(".")
            if group and n.isdigit():
                out[group] = out.get(group, 0) + 1
        return out

    @store_errors
    def last_launch(self, run: str, group: str) -> datetime | None:
        """When `group` was last started in `run` (None: never)."""
        n = self.launch_count(run, group)
        return self._launch_time(run, group, n) if n else None

    @store_errors
    def launches(self, run: str, group: str) -> list[datetime]:
        """When `group` was started in `run`, each launch in order (its attempts' starts)."""
        times = [self._launch_time(run, group, n) for n in range(1, self.launch_count(run, group) + 1)]
        return [t for t in times if t is not None]

    def _launch_time(self, run: str, group: str, n: int) -> datetime | None:
        path = self.path("runs", run, "launches", f"{group}.{n}")
        return read_time(read_small(self.fs, path), path)

    @store_errors
    def launch_ledger(self, run: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
        """Control's own ledger of `run` (None: every run), one listing per kind:
        (run, group) → {"launches": {n: when}, "ends": {n: {"at": when, "stored": [n, …]}}}.
        Unreadable entries are left out, logged."""
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for kind, suffix in (("launches", ""), ("ends", ".json")):
            for path in self._glob(self.path("runs", run or "*", kind, "*")):
                run_dir, _, name = path.rsplit("/", 3)[-3:]
                group, _, n = name.removesuffix(suffix).rpartition(".")
                if not group or not n.isdigit():
                    continue
                entry = out.setdefault((run_dir, group), {"launches": {}, "ends": {}})
                raw = read_small(self.fs, path)
                if kind == "launches":
                    when = read_time(raw, path)
                    if when is not None:
                        entry["launches"][int(n)] = when
                    continue
                data = json_object(self.fs, path, raw)
                when = read_time(str(data.get("at", "")).encode(), path) if data else None
                stored = data.get("stored") if data else None
                if when is not None:
                    entry["ends"][int(n)] = {"at": when, "stored": [
                        a for a in (stored if isinstance(stored, list) else []) if isinstance(a, int)]}
        return out

    @store_errors
    def spent_summary(self) -> SpentSummary | None:
        """The budget's spend through a closed run (`spent.json`), None when there is none
        or it cannot be read (logged: the budget then counts the whole ledger again)."""
        path = self.path(SPENT_FILE)
        data = json_object(self.fs, path, read_stored(self.fs, path) or b"{}")
        if not data:
            return None
        try:
            return SpentSummary.model_validate(data)
        except ValidationError as exc:
            log.warning("skipped %s: not a spend summary (%s)", path, exc.errors()[0]["msg"])
            return None

    @store_errors
    def write_spent_summary(self, summary: SpentSummary) -> None:
        self.write_whole(self.path(SPENT_FILE), summary.model_dump_json().encode())

    @store_errors
    def record_end(self, run: str, group: str, launch: int, now: datetime | None = None) -> None:
        """Note that launch `launch` of `group` is over (control stopped it, or saw it
        stopped), with the attempt files the group has stored by now (theirs, or earlier):
        attempts 1…`launch` + `SPARE_ATTEMPTS`, each looked up by name (a launch stores attempt n; whatever
        else the group wrote is not read)."""
        stored = [n for n in range(1, launch + SPARE_ATTEMPTS + 1)
                  if self._exists(self.path("runs", run, f"{group}.{n}.jsonl"))]
        body = json.dumps({"at": (now or utcnow()).isoformat(), "stored": stored}).encode()
        self.write_whole(self.path("runs", run, "ends", f"{group}.{launch}.json"), body)


    @store_errors
    def record_user_stop(self, run: str, group: str, now: datetime | None = None,
                         who: str = "user") -> None:
        """Note that a user stopped `group` in `run` (`spotbench stop`): control counts it
        as done for the run, so it is not retried."""
        body = json.dumps({"group": group, "by": who, "at": (now or utcnow()).isoformat()}).encode()
        self.write_whole(self.path("runs", run, "stopped", f"{group}.json"), body)

    @store_errors
    def user_stopped(self, run: str) -> dict[str, str]:
        """Group → who stopped it in `run` (a note naming another group is left out)."""
        out = {}
        for path in self._glob(self.path("runs", run, "stopped", "*.json")):
            group = path.rsplit("/", 1)[-1].removesuffix(".json")
            data = json_object(self.fs, path)
            if data is not None and data.get("group") == group:
                out[group] = str(data.get("by") or "user")[:64]
        return out


def _may_hold(runs: list[str], since: datetime) -> list[str]:
    """The runs (sorted ids) that may hold a start request at or after `since`, their
    `starts/` not even listed: runs follow one another (a run opens only when none is open,
    and a start happens only in the open run), so every request of a run precedes the
    opening of the next run, whose id is its opening time (`RUN_ID_FORMAT`). A run is
    skipped when the next run opened before `since`; a run id that is not a time keeps its
    neighbours. No member can add a run folder (its grant names the open run), so a start
    tick reads the window's runs, not the history's."""
    skipped = {run for run, after in zip(runs, runs[1:])
               if (opened := _opened(after)) is not None and opened < since
               and _opened(run) is not None}
    return [r for r in runs if r not in skipped]


def _opened(run: str) -> datetime | None:
    """When `run` opened, from its id (`20261125T030000Z`, `…-1a2b`); None: not such an id."""
    try:
        return datetime.strptime(run[:16], RUN_ID_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None
