"""`spotbench status` reads a group's launch time where control recorded it: the ledger's
own time (`ResultStore.last_launch`), not the launch file's modification time."""

from __future__ import annotations

from datetime import UTC, datetime

from spotbench.ops.status import _launched_at
from spotbench.results import ResultStore


def test_status_launch_time_is_the_ledgers(tmp_path):
    store = ResultStore(f"file://{tmp_path}/results")
    run = store.open_run(now=datetime(2026, 1, 2, 3, 0, tzinfo=UTC))
    first = datetime(2026, 1, 2, 3, 0, 5, tzinfo=UTC)
    second = datetime(2026, 1, 2, 3, 7, 0, tzinfo=UTC)
    store.record_launch(run.run, "g1", now=first)
    store.record_launch(run.run, "g1", now=second)  # written now: its mtime is today
    assert _launched_at(store, run, "g1") == second == store.last_launch(run.run, "g1")
    assert _launched_at(store, run, "g2") is None
    assert _launched_at(store, None, "g1") is None
