"""The run ledger (`runs/<run>/run.json`: opened, closed, the ticks it served, or a
`closed.<reason>` marker when a full disk kept it from being rewritten) and the control
lease beside the runs."""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from spotbench.lease import LEASE_TTL_S, LEASE_WAIT_S, lease_for
from spotbench.results.model import RUN_ID_SUFFIX, CorruptLedger, RunInfo, StoreError, new_run_id, utcnow
from spotbench.results.storage import Storage, read_small, read_stored, store_errors

log = logging.getLogger("spotbench.results")

RECENT_RUNS = 8  # run folders control reads back from the newest (the open run is the newest)


class RunLedger(Storage):
    """The runs of one store, and its control lease."""

    # ---- the control lease ----------------------------------------------------------
    @contextlib.contextmanager
    def lease(self, name: str, *, holder: str, ttl_s: float = LEASE_TTL_S,
              wait_s: float = LEASE_WAIT_S) -> Iterator[Any]:
        """Hold `<root>/<name>.lock` (spotbench.lease): one holder at a time, whichever
        machine it runs on. Raises `spotbench.lease.Busy` when another keeps it past `wait_s`,
        StoreError when the store cannot be asked."""
        objects = self._lease_objects(self.fs) if self._lease_objects is not None else None
        lease = lease_for(self.fs, self.path(f"{name}.lock"), holder=holder, objects=objects,
                          ttl_s=ttl_s, wait_s=wait_s)
        try:
            lease.__enter__()
        except OSError as exc:
            raise StoreError(f"results store {self.url}: the {name} lock failed: {exc}") from exc
        try:
            yield lease  # `check()`: a holder fences its actions (spotbench.control)
        finally:
            lease.__exit__(None, None, None)

    # ---- run ledger ----------------------------------------------------------------
    def run_ids(self) -> list[str]:
        """The run folders under `runs/`, oldest first (run ids are their opening times:
        `RUN_ID_FORMAT`), from one delimiter listing (no member can add one: a group's grant
        names the open run, docs/security.md); inside `listed_once()`, one per call."""
        kept = self.__dict__.get("_run_ids", False)
        if kept is False:
            return self.names(self.path("runs"))
        if kept is None:
            kept = self.__dict__["_run_ids"] = self.names(self.path("runs"))
        return list(kept)

    @contextlib.contextmanager
    def listed_once(self) -> Iterator[None]:
        """Within it `run_ids()` lists `runs/` once: one control call, under the control
        lock, where only control adds a run (`open_run` adds it to the list it keeps). A
        listing costs a request per 1,000 runs of the history."""
        self.__dict__["_run_ids"] = None
        try:
            yield
        finally:
            self.__dict__["_run_ids"] = False

    @store_errors
    def runs(self, strict: bool = False) -> list[RunInfo]:
        """Every run's ledger entry. A corrupt `run.json` is skipped (logged) — control and
        the readers act on the rest — or, `strict` (the local runner, whose own ledger it
        is), a `CorruptLedger` naming the file and the fix. Reads one object per run of the
        history: control reads `recent_runs()` instead."""
        return [info for run in self.run_ids() if (info := self.run_info(run, strict)) is not None]

    def run_info(self, run: str, strict: bool = False) -> RunInfo | None:
        """The ledger entry of `run` (None: none, or corrupt and not `strict`)."""
        path = self.path("runs", run, "run.json")
        raw = read_stored(self.fs, path)
        if raw is None:  # a folder without a ledger entry (not a run control opened)
            return None
        info = _run_info(self.fs, path, raw)
        if info is None:
            if strict:
                raise CorruptLedger(
                    f"results store {self.url}: the run ledger {path} is corrupt: restore "
                    "it, or remove its run folder (its results go with it), then run again")
            return None
        if info.closed_at is None:
            info = self._closed_by_marker(path.rsplit("/", 1)[0], info)
        return info

    @store_errors
    def recent_runs(self, count: int = RECENT_RUNS, ids: list[str] | None = None) -> list[RunInfo]:
        """The ledger entries of the newest `count` run folders, oldest first: what control
        reads (a start, stop or done reads `count` entries, never the whole history). Runs
        follow one another — one opens only when none is open (`open_run`) — so the open run
        is the newest, and a repeated tick names one of the last runs. `ids`: `run_ids()`
        when the caller has just listed them."""
        out = []
        for run in (self.run_ids() if ids is None else ids)[-count:]:
            info = self.run_info(run)
            if info is not None:
                out.append(info)
        return out

    def _closed_by_marker(self, run_dir: str, info: RunInfo) -> RunInfo:
        markers = self.prefixed(run_dir, "closed.")
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
        """The run that a start tick with this time opened or joined, among the recent runs
        (a scheduler repeats a delivery within minutes, not `RECENT_RUNS` runs later)."""
        return next((r for r in self.recent_runs() if tick in r.ticks), None)

    def current_run(self) -> RunInfo | None:
        """The newest run that is still open, if any (among `recent_runs()`)."""
        open_runs = [r for r in self.recent_runs() if r.closed_at is None]
        return open_runs[-1] if open_runs else None

    @store_errors
    def open_run(self, now: datetime | None = None, tick: str | None = None) -> RunInfo:
        """The open run, or a new one (idempotent: a repeated tick reuses the open run).
        `tick` (the scheduler's time) is noted in the run, so a repeat is recognised later."""
        current = self.current_run()
        if current is not None:
            if tick and tick not in current.ticks:
                current = current.model_copy(update={"ticks": [*current.ticks, tick]})
                self.write_whole(self.path("runs", current.run, "run.json"),
                                  current.model_dump_json().encode())
            return current
        now = now or utcnow()
        info = RunInfo(run=new_run_id(now), opened_at=now, ticks=[tick] if tick else [])
        path = self.path("runs", info.run, "run.json")
        if self._exists(path):  # closed earlier in the same second: keep ids unique
            info = info.model_copy(update={"run": f"{info.run}-{uuid.uuid4().hex[:RUN_ID_SUFFIX]}"})
            path = self.path("runs", info.run, "run.json")
        self.write_whole(path, info.model_dump_json().encode())
        kept = self.__dict__.get("_run_ids")
        if isinstance(kept, list):
            kept[:] = sorted({*kept, info.run})
        return info

    @store_errors
    def close_run(self, run: str, reason: str, now: datetime | None = None) -> RunInfo:
        path = self.path("runs", run, "run.json")
        info = _run_info(self.fs, path) or RunInfo(run=run, opened_at=now or utcnow())
        if info.closed_at is None:
            info = info.model_copy(update={"closed_at": now or utcnow(), "reason": reason})
            try:
                self.write_whole(path, info.model_dump_json().encode())
            except OSError:  # full disk: an empty file still fits, and closes the run
                safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in reason) or "closed"
                self.fs.touch(self.path("runs", run, f"closed.{safe}"))
        return info

    def close_open_runs(self, reason: str, now: datetime | None = None) -> list[str]:
        """Close every open run among the recent ones (there should be one; a stop tick
        never leaves another open)."""
        closed = []
        for info in self.recent_runs():
            if info.closed_at is None:
                self.close_run(info.run, reason=reason, now=now)
                closed.append(info.run)
        return closed


def _run_info(fs: Any, path: str, raw: bytes | None = None) -> RunInfo | None:
    raw = read_small(fs, path) if raw is None else raw
    try:
        return RunInfo.model_validate_json(raw)
    except ValidationError as exc:
        log.warning("skipped %s: not a run ledger entry (%s)", path, exc.errors()[0]["msg"])
        return None
