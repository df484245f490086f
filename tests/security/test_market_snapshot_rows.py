"""Attack: a group's records name 400 zones that never ran anything, each with huge VM-hours
(its records' own times), to push the zones control really started groups in out of the
market snapshot (at most `MAX_SNAPSHOT_ROWS` rows) control orders candidate zones by
(issue 38). The zone control's own start ledger names stays in the snapshot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from spotbench.history.catalog import Catalog
from spotbench.history.market import market, publish
from spotbench.results import Result, ResultStore
from spotbench.results.market_snapshot import MAX_SNAPSHOT_ROWS

pytestmark = pytest.mark.security

RUN = "20240501T000000Z"
REAL = "us-central1-b"
T0 = datetime(2024, 5, 1, tzinfo=UTC)


def _record(group: str, zone: str, hours: float, preempted: bool) -> Result:
    return Result(sweep="m", run=RUN, group=group, trial=1, workload="osu", metric="latency", value=1.0,
                  unit="us", cloud="gcp", machine_type="n1-standard-2", zone=zone, spot=True,
                  preempted=preempted, started_at=T0, ended_at=T0 + timedelta(hours=hours))


def test_market_snapshot_fake_zone_rows_do_not_push_real_ones_out(tmp_path: Path) -> None:
    store = ResultStore(f"file://{tmp_path}")
    store.open_run(T0)
    run = store.current_run().run
    store.record_start(run, "real-t1", {"at": T0, "machine_type": "n1-standard-2", "zone": REAL, "members": 1})
    store.write_group(run, "real-t1", [_record("real-t1", REAL, 1.0, True).model_copy(update={"run": run})])
    store.write_group(run, "real-t1", [_record("real-t1", REAL, 1.0, False).model_copy(update={"run": run})])
    for i in range(MAX_SNAPSHOT_ROWS + 44):  # one attempt file per made-up zone, under its own prefix
        store.write_group(run, "evil-t1", [_record("evil-t1", f"us-fake{i:03d}-a", 10_000.0, True)
                                           .model_copy(update={"run": run})])
    with Catalog(store.url) as cat:
        rows = market(cat)
        assert len(rows) > MAX_SNAPSHOT_ROWS
        publish(cat, rows)
    snap = store.market_snapshot()
    assert snap is not None and len(snap.rows) == MAX_SNAPSHOT_ROWS
    assert snap.rows[0].zone == REAL, [r.zone for r in snap.rows[:3]]
