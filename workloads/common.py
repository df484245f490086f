"""What every workload entrypoint shares: its context, recording results, preemption, done.

    run = WorkloadRun.from_env()
    with run.preemptible():          # SIGTERM inside → stored as preempted, then exit
        ... run.record("latency", 1.9, "us", size=8) ...
        run.raw("osu_latency.txt", text)
    run.finish()                     # store the records (once), whole
    run.done()                       # ask the sweep to stop this group (launcher/chief only)

A SIGTERM (spot preemption, a deadline stop, `done` stopping the group) raises `Preempted`
in the main thread; `preemptible()` stores what was measured with `preempted=true` and
exits with code 143; with `call_done=True` (the member that stores: OSU launcher, TF chief)
it also calls `done` first, so the rest of the group does not bill until its deadline.
Records are written once: after `finish()` a SIGTERM just exits.

Values are refused where they are produced: `record` logs and drops a non-finite number
(JSON has no inf/NaN; it would be stored as null and refuse to load), a name past
`MAX_NAME_LEN`, and every record past `MAX_RECORDS` per attempt (the count dropped goes on
the stored records as `dropped_records`), so a command printing 10^6 values stays bounded.

A store that cannot be written (read-only, full) is retried briefly; if it still fails the
records are printed to the log as JSON lines, once (nothing measured is lost without a
trace), `finish` raises `StoreError`, and the caller still calls `done`.

Every stored attempt says why it ended (metadata `stop_reason`: finished, SIGTERM, or what
cut it short). A stall (`run.stalled(...)`: the workload's own loop saw no progress for
longer than its threshold, or its clocks disagreed) makes the attempt contaminated: its
records are stored preempted with metadata `contaminated` (why) and `stalls`, and flagged
(`runs/<run>/flags/`), so no average takes them in and the group is retried. Each record
says the window its value was timed over (`record(..., timed=Window)`): a stall counts
only where it overlaps one (`workloads.stalls`, `spotbench.timed`).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from spotbench.done_client import call_done, group_storage
from spotbench.member import MemberContext
from spotbench.results import (
    ARTIFACTS_ENV, MAX_ATTEMPT_BYTES, MAX_NAME_LEN, MAX_RECORDS, MAX_UNIT_LEN, ArtifactSelection, Result,
    ResultStore, StoreError, select_artifacts, utcnow, value_problem,
)
from spotbench.retries import retry_scale
from spotbench.timed import Window
from workloads.boot import exit_if_outside_run, trial_context
from workloads.stalls import EDGES_ENV, HEARTBEAT_S, STALL_S, StallWatch, mark_edge

STORE_ATTEMPTS = 3
STORE_RETRY_S = 1.0
__all__ = ["EDGES_ENV", "HEARTBEAT_S", "STALL_S", "mark_edge", "WorkloadRun", "Preempted",
           "exit_if_outside_run", "trial_context"]
MAX_STALLS_KEPT = 3  # stalls listed on every record of a contaminated attempt (`contaminated` names the worst)
FINISH_BYTES = 768  # room kept per record for what `finish` adds (why it ended, stalls, cost)

log = logging.getLogger("spotbench.workload")


class Preempted(BaseException):
    """Raised in the main thread on SIGTERM (BaseException: not swallowed by `except Exception`)."""


class WorkloadRun(StallWatch):
    def __init__(self, ctx: MemberContext, store: ResultStore | None = None):
        self.ctx = ctx
        self.storage_options: dict[str, Any] = {}  # the group's checkpoints' fsspec options
        self.store = store or self._group_store()
        self.run_id = os.environ.get("SPOTBENCH_RUN") or self._current_run()
        assigned = self.store.assignment(self.run_id, ctx.group)  # an adaptive search's trial
        if assigned is not None:
            self.ctx = ctx.model_copy(update={"params": assigned})
        self.started_at: datetime = utcnow()
        self.records: list[Result] = []
        self._raw: dict[str, str | bytes] = {}
        self.stored_path: str | None = None
        self.dropped = 0  # values refused by `record` (non-finite, bad name, past MAX_RECORDS)
        self.stalls: list[dict[str, Any]] = []  # progress gaps seen, each with when (`from`, `to`)
        self._logged = False  # the records went to the log once (the store refused them)
        self._bytes = 0  # the records' size as stored so far, with FINISH_BYTES each
        self.progress: list[Result] = []  # intermediate values (`intermediate`)
        self._artifacts_dir: str | None = None
        self._own_artifacts = False

    def _group_store(self) -> ResultStore:
        """The results store as this member's group writes it (`GroupStorage`, one object on
        every cloud): on clouds that grant per group (GCP, AWS: issue #29) with what the
        sweep's `grant` mints for it, asked once and renewed by itself before it ends."""
        storage = group_storage(self.ctx)
        self.storage_options = storage.checkpoint_options  # for the group's checkpoints
        return storage.store(self.ctx.results_url)

    @classmethod
    def from_env(cls) -> WorkloadRun:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        return cls(MemberContext.from_env())

    def _current_run(self) -> str:
        current = self.store.current_run()
        if current is None:  # never write into a closed run
            raise RuntimeError(f"no run is open in {self.store.url}: start groups through the start function")
        return current.run

    def record(self, metric: str, value: float, unit: str, *, timed: Window | None = None,
               **metadata: Any) -> Result | None:
        """Keep one value, timed over `timed` (wall clock); None (logged) when it is
        refused: see the module's docstring."""
        why = _refused(metric, value, unit, len(self.records))
        if why:
            self.dropped += 1
            if self.dropped <= 3:
                log.warning("value %.80r refused: %s", metric, why)
            return None
        result = self._result(metric, value, unit, {"placement": self.ctx.placement, **self._scaling_meta(),
                                                    **metadata, **(timed.metadata() if timed else {})})
        size = len(result.model_dump_json()) + 1 + FINISH_BYTES
        if self._bytes + size > MAX_ATTEMPT_BYTES:  # a file readers would skip whole
            self.dropped += 1
            if self.dropped <= 3:
                log.warning("value %.80r refused: the attempt file would pass %d bytes", metric,
                            MAX_ATTEMPT_BYTES)
            return None
        self._bytes += size
        self.records.append(result)
        return result

    def _result(self, metric: str, value: float, unit: str, metadata: dict[str, Any]) -> Result:
        """One value of this member's attempt, ended now."""
        return Result(
            sweep=self.ctx.sweep, run=self.run_id, group=self.ctx.group, trial=self.ctx.trial,
            params=self.ctx.params, workload=self.ctx.workload, metric=metric, value=value,
            unit=unit, cloud=self.ctx.cloud, machine_type=self.ctx.machine_type,
            accelerator=self.ctx.accelerator, zone=self.ctx.zone, spot=self.ctx.spot,
            started_at=self.started_at, ended_at=utcnow(), metadata=metadata,
        )

    @property
    def artifacts_dir(self) -> str:
        """The folder whose files are stored with this attempt (model weights…):
        `$SPOTBENCH_ARTIFACTS_DIR` when set, else a fresh temporary folder, put in the
        environment so a command this process starts sees it too."""
        if self._artifacts_dir is None:
            import tempfile

            given = os.environ.get(ARTIFACTS_ENV)
            self._own_artifacts = not given  # made here: removed once stored
            self._artifacts_dir = given or tempfile.mkdtemp(prefix="spotbench-artifacts-")
            os.makedirs(self._artifacts_dir, exist_ok=True)
            os.environ[ARTIFACTS_ENV] = self._artifacts_dir
        return self._artifacts_dir

    def intermediate(self, metric: str, value: float, unit: str, **metadata: Any) -> Result | None:
        """Report a value while the attempt runs (per epoch or step: metadata `step`, `epoch`):
        stored at once beside the attempt, under the group's own prefix with its own grant
        (every cloud: the path its results take). `ResultStore.intermediate` reads it: the
        report, and a search's pruner in control's next call (`control.search.pruner_step`:
        an integer `epoch`, else an integer `step`). The one progress path of a member. Best
        effort: a store that refuses it is logged, never raised (the run goes on)."""
        why = _refused(metric, value, unit, len(self.progress))
        if why:
            log.warning("intermediate value %.80r refused: %s", metric, why)
            return None
        result = self._result(metric, value, unit, {"intermediate": True, **metadata})
        self.progress.append(result)
        try:
            attempt = self.store.next_attempt(self.run_id, self.ctx.group)
            self.store.write_intermediate(self.run_id, self.ctx.group, attempt, self.progress)
        except (StoreError, OSError) as exc:
            log.error("intermediate value %s not stored: %s", metric, exc)
        return result

    def retime(self, window: Window, **match: Any) -> None:
        """Say `window` is when the values of the records whose metadata has `match` were
        timed (known only after they were recorded: OSU's harness reports a size's timed
        loop when it ends)."""
        self.records = [
            r.model_copy(update={"metadata": {**r.metadata, **window.metadata()}})
            if all(r.metadata.get(k) == v for k, v in match.items()) else r for r in self.records]

    def _scaling_meta(self) -> dict[str, Any]:
        """What the report's scaling section needs beside the params: the spec's `scaling`
        and `work`, and the GPUs per member (a possible axis)."""
        ctx = self.ctx
        found = {"accelerator_count": ctx.accelerator_count, "scaling": ctx.scaling, "work": ctx.work}
        return {k: v for k, v in found.items() if v}

    def raw(self, name: str, text: str | bytes) -> None:
        self._raw[name] = text

    def finish(self, preempted: bool = False, **metadata: Any) -> str | None:
        """Store records and raw output once; later calls are no-ops. `metadata` (e.g. why
        the attempt was cut short) goes on every record, the preempted marker included.
        Records the store refused are logged once; a later call raises StoreError again
        without logging them a second time."""
        if self.stored_path is not None:
            return self.stored_path
        if self._logged:
            raise StoreError("results not stored; the records are in this member's log above")
        artifacts = self._selected_artifacts()
        if artifacts is not None:
            metadata = {**metadata, "artifacts_bytes": artifacts.total_bytes}
            if artifacts.note():
                log.error("%s", artifacts.note())
                metadata["artifacts_note"] = artifacts.note()
        records, preempted, contaminated = self._final_records(preempted, metadata)
        path = self._write_records(records)
        self.stored_path = path
        attempt = int(path.rsplit(".", 2)[-2])
        self._store_beside(attempt, contaminated)
        self._store_artifacts(attempt, artifacts)
        log.info("stored %d records at %s (preempted=%s)", len(records), path, preempted)
        return path

    def _selected_artifacts(self) -> ArtifactSelection | None:
        """What the artifacts folder holds for the store (None: no folder, or nothing in it)."""
        folder = self._artifacts_dir or os.environ.get(ARTIFACTS_ENV)
        selection = select_artifacts(folder) if folder else None
        return selection if selection and (selection.files or selection.left_out) else None

    def _store_artifacts(self, attempt: int, artifacts: ArtifactSelection | None) -> None:
        """The artifacts beside the stored attempt (best effort: the records are stored);
        a folder this run made is removed afterwards."""
        if artifacts and artifacts.files:
            try:
                self.store.store_artifacts(self.run_id, self.ctx.group, attempt, artifacts)
            except (StoreError, OSError) as exc:
                log.error("artifacts of attempt %d not stored: %s", attempt, exc)
        if self._own_artifacts and self._artifacts_dir:
            import shutil

            shutil.rmtree(self._artifacts_dir, ignore_errors=True)

    def _final_records(self, preempted: bool, metadata: dict[str, Any]) -> tuple[list[Result], bool, str | None]:
        """The records as stored: ended now, with why the attempt ended and `metadata`;
        preempted when a stall contaminated it; a marker when it was cut short before any
        value; priced. Also whether it counts as preempted and why it is contaminated."""
        ended = utcnow()
        if self.dropped:
            log.warning("%d value(s) refused in this attempt", self.dropped)
            metadata = {**metadata, "dropped_records": self.dropped}
        # why it ended, unless the caller or the record says it (TF: "worker lost: …")
        reason = {"stop_reason": metadata.get("interrupted") or ("SIGTERM" if preempted else "finished")}
        contaminated = self.contamination()
        if contaminated:
            preempted = True  # read back like a flagged attempt: no average takes it in
            metadata = {**metadata, "contaminated": contaminated, "stalls": self.counted_stalls()[:MAX_STALLS_KEPT]}
        elif self.stalls:  # seen, but outside every timed window: the numbers stand
            log.info("%d stall(s) outside the timed window: not contaminating", len(self.stalls))
        records = [
            r.model_copy(update={"preempted": preempted or r.preempted, "ended_at": ended,
                                 "metadata": {**reason, **r.metadata, **metadata}})
            for r in self.records
        ]
        if not records and preempted:  # keep a trace that this group ran and was cut short
            marker = self.record("preempted", 1.0, "flag", reason="stopped before any value",
                                 **{**reason, **metadata})
            assert marker is not None
            records = [marker.model_copy(update={"preempted": True, "ended_at": ended})]
        records = _priced(records, [p.machine_type or self.ctx.machine_type for p in self.ctx.members])
        return records, preempted, contaminated

    def _write_records(self, records: list[Result]) -> str:
        """Store the attempt file, retried STORE_ATTEMPTS times; the last failure logs every
        record as JSON lines (once) and raises."""
        for attempt_no in range(1, STORE_ATTEMPTS + 1):
            try:
                return self.store.write_group(self.run_id, self.ctx.group, records)
            except StoreError as exc:
                if attempt_no == STORE_ATTEMPTS:
                    self._logged = True
                    log.error("results NOT stored (%s); the %d records follow as JSON lines:\n%s",
                              exc, len(records), "".join(r.model_dump_json() + "\n" for r in records))
                    raise
                log.warning("storing results failed (%s); retrying", exc)
                time.sleep(STORE_RETRY_S * attempt_no * retry_scale())
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _store_beside(self, attempt: int, contaminated: str | None) -> None:
        """The contamination flag and the raw output beside a stored attempt (best effort:
        the records are stored)."""
        if contaminated:
            try:
                self.store.flag(self.run_id, self.ctx.group, attempt, contaminated)
            except (StoreError, OSError) as exc:  # the records say it too (metadata)
                log.error("flag for attempt %d not stored: %s", attempt, exc)
        for name, text in self._raw.items():
            try:
                self.store.write_raw(self.run_id, self.ctx.group, name, text, attempt=attempt)
            except StoreError as exc:  # the records are stored: raw output is a nice-to-have
                log.error("raw output %s not stored: %s", name, exc)

    def done(self) -> dict:
        return call_done(self.ctx, started_at=self.started_at)

    def done_quietly(self) -> None:
        """Call done; a failure is logged (the group still stops at its deadline)."""
        try:
            log.info("done → %s", self.done())
        except Exception as exc:  # noqa: BLE001
            log.error("done call failed (the group stops at its deadline): %s", exc)

    @contextmanager
    def preemptible(self, call_done: bool = False) -> Iterator[None]:
        terminating: list[int] = []

        def on_term(signum: int, frame: Any) -> None:
            if self.stored_path is not None:  # already stored: a stop after finish is normal
                sys.exit(0)
            if terminating:  # the same stop again (the group's SIGTERM and the host deadline's)
                return
            terminating.append(signum)
            raise Preempted(f"signal {signum}")

        previous = signal.signal(signal.SIGTERM, on_term)
        try:
            yield
        except Preempted:
            log.warning("SIGTERM: storing what was measured as preempted")
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                self.finish(preempted=True)  # stop_reason: SIGTERM, unless a record says why
            except StoreError:
                pass  # logged with the records; the group must still be stopped
            if call_done:  # the rest of the group must not bill until its deadline
                self.done_quietly()
            sys.exit(143)
        finally:
            signal.signal(signal.SIGTERM, previous)


def _priced(records: list[Result], member_types: list[str]) -> list[Result]:
    """Fill billed_s/cost_usd (spotbench.costs); pricing never stops results being stored."""
    try:
        from spotbench.costs import annotate

        return annotate(records, os.environ.get("SPOTBENCH_PRICES"), member_types=member_types)
    except Exception as exc:  # noqa: BLE001 - a price problem must not lose measurements
        log.warning("cost not computed: %s", exc)
        note = f"cost not computed: {exc}"
        return [r.model_copy(update={"metadata": {**r.metadata, "cost_note": note}}) for r in records]


def _refused(metric: str, value: float, unit: str, kept: int) -> str | None:
    """Why a value cannot be stored, or None."""
    if kept >= MAX_RECORDS:
        return f"an attempt stores at most {MAX_RECORDS} values"
    why = value_problem(value)
    if why:
        return f"a value {why}"
    if not isinstance(metric, str) or not 0 < len(metric) <= MAX_NAME_LEN:
        return f"a metric name has 1 to {MAX_NAME_LEN} characters"
    if not isinstance(unit, str) or len(unit) > MAX_UNIT_LEN:
        return f"a unit has at most {MAX_UNIT_LEN} characters"
    return None
