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
    runs/<run>/<group>.<attempt>/intermediate.jsonl  values reported while it ran (per epoch)
    runs/<run>/<group>.<attempt>/artifacts/…  the files its artifacts folder held (weights)
    runs/<run>/starts/<group>.<n>.json     one per start request: when, where, which members
                                           the cloud could not run and why (spot statistics)
    runs/<run>/flags/<group>.<attempt>.json  an attempt found contaminated (why), kept apart
                                           from the records, which are never rewritten
    runs/<run>/launches/<group>.<n>        one per start of the group (its time)
    runs/<run>/ends/<group>.<n>.json       when control stopped launch n, or saw it stopped,
                                           and which attempt files the group had then
    market/<time>.json                     the spot-market statistics as of <time> (written by
                                           whoever read the catalog: report, market), read by
                                           control to order candidate zones
    runs/<run>/pruned/<group>.json         a pruned group: when, at which step, what it saved
    search/<study>.journal                 a search's Optuna study (JournalStorage), control's
    control.lock                           the control lease while a function acts
                                           (spotbench.lease; absent when nobody does)
    spent.json                             the budget's spend through a closed run
                                           (`SpentSummary`, written under the control lease)

Storage failures (read-only, full, unreachable) raise `StoreError` naming the URL and the
cause, so the functions can answer 503 and the runner can say what to fix.

What a group writes is data, never trusted: every reader bounds what it reads (bytes and
records per attempt file), skips a file or line it cannot parse with a warning naming it,
and never raises it into control. Times and costs inside records are the member's word:
control takes attempt intervals and spend from its own ledger (`spotbench.ledger`).

The package, one job per module: `model` (the records and their bounds), `storage` (paths,
whole-file writes, bounded reads), `records` (attempt files, flags, what readers skipped),
`launches` (control's launch/start/end notes), `runs` (the run ledger and control lease),
`market_snapshot` (the market statistics' dated snapshot control reads), `artifacts` (an
attempt's intermediate values and stored files), `trials` (a search's
pruned notes and assigned parameters).
"""

from __future__ import annotations

from spotbench.results.artifacts import (
    ARTIFACTS_ENV, MAX_ARTIFACT_BYTES, MAX_ARTIFACT_FILES, ArtifactSelection, AttemptExtras, select_artifacts,
)
from spotbench.results.launches import LaunchRecords
from spotbench.results.market_snapshot import MAX_SNAPSHOT_AGE, MarketRow, MarketSnapshot, MarketSnapshots
from spotbench.results.model import (
    MAX_ATTEMPT_BYTES,
    MAX_NAME_LEN,
    MAX_RECORDS,
    MAX_BILLED_S,
    MAX_COST_USD,
    MAX_TRIAL,
    MAX_UNIT_LEN,
    MAX_VALUE,
    MIN_VALUE,
    RUN_ID_FORMAT,
    RUN_ID_SUFFIX,
    Attempt,
    CorruptLedger,
    Result,
    RunInfo,
    SpentSummary,
    StartRecord,
    StoreError,
    new_run_id,
    run_id_lengths,
    utcnow,
    value_problem,
)
from spotbench.results.records import MAX_SKIPPED_SHOWN
from spotbench.results.runs import RunLedger
from spotbench.results.trials import TrialFiles

__all__ = [
    "ARTIFACTS_ENV", "MAX_ARTIFACT_BYTES", "MAX_ARTIFACT_FILES", "ArtifactSelection", "select_artifacts",
    "MAX_ATTEMPT_BYTES", "MAX_NAME_LEN", "MAX_RECORDS", "MAX_SKIPPED_SHOWN", "MAX_UNIT_LEN",
    "RUN_ID_FORMAT", "RUN_ID_SUFFIX", "Attempt", "CorruptLedger", "Result", "ResultStore",
    "MAX_SNAPSHOT_AGE", "MarketRow", "MarketSnapshot", "RunInfo", "SpentSummary", "StartRecord",
    "StoreError",
    "new_run_id", "run_id_lengths", "utcnow",
    "MAX_BILLED_S", "MAX_COST_USD", "MAX_TRIAL", "MAX_VALUE", "MIN_VALUE", "value_problem",
]


class ResultStore(RunLedger, LaunchRecords, AttemptExtras, MarketSnapshots, TrialFiles):
    """Results of one sweep under one fsspec URL: its attempt files (with their intermediate
    values and artifacts), control's launch notes and run ledger, the control lease and the
    market statistics' snapshot."""
