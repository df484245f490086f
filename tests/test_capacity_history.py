"""The capacity history control orders candidate zones by, read cheaply and trusted only as
far as it must: the start ledger is read once per tick whatever the number of groups, a
preemption is remembered across runs (`StartRecord.preempted_zone`), the market statistics
come from a dated snapshot in the store (`market/<time>.json`), and hostile or malformed
objects are ignored with a warning, never a crash."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from pathlib import Path

import pytest

from spotbench import control
from spotbench.history.catalog import Catalog
from spotbench.history.market import market, publish
from spotbench.history.synthetic import SyntheticSweep
from spotbench.results import MarketSnapshot, ResultStore, utcnow
from spotbench.results.launches import _may_hold
from spotbench.spec import load_spec
from tests.test_capacity_control import TICK, ZONES, ZonedCloud

A, B, F = ZONES
MACHINE = "n1-standard-4"


def make_sweep(tmp_path: Path, trials: int = 1, concurrency: int = 1, store=None) -> control.Sweep:
    spec = load_spec({"name": "capz", "cloud": "gcp", "zones": ZONES, "lifecycle": "created",
                      "gcp": {"project": "proj"}, "workload": {"name": "osu"},
                      "matrix": {"machine_type": [MACHINE]}, "trials": trials,
                      "concurrency": concurrency, "schedule": {"cron": "0 3 * * *"},
                      "deadline": "30m"})
    return control.Sweep(spec=spec, cloud=ZonedCloud(spec.plan()),
                         store=store or ResultStore(f"file://{tmp_path}"))


class CountingStore(ResultStore):
    """A store that counts reads of the whole start ledger: its calls, its listings of
    `runs/*/starts/*.json` and the start records it opens."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.ledger_calls = self.ledger_globs = self.record_reads = 0
        opened = self.fs.open

        def counting_open(path, mode="rb", *args, **kwargs):
            if "/starts/" in str(path) and "r" in mode:
                self.record_reads += 1
            return opened(path, mode, *args, **kwargs)

        self.fs.open = counting_open

    def start_records(self, *args, **kwargs):
        self.ledger_calls += 1
        return super().start_records(*args, **kwargs)

    def _glob(self, pattern: str) -> list[str]:
        if pattern.endswith("/starts/*.json"):  # one listing per run of the window (issue #38)
            self.ledger_globs += 1
        return super()._glob(pattern)

    def reset(self) -> None:
        self.ledger_calls = self.ledger_globs = self.record_reads = 0


def test_capacity_history_the_ledger_is_read_once_per_tick_however_many_groups_start(tmp_path):
    store = CountingStore(f"file://{tmp_path}")
    sweep = make_sweep(tmp_path, trials=6, concurrency=6, store=store)
    sweep.cloud.exhausted = {A}  # every group is refused in a first: 2 records per group
    first = control.start(sweep, TICK)
    assert len(first["started"]) == 6
    assert store.ledger_calls == 1 and store.ledger_globs == 1
    assert store.record_reads == 0  # nothing recorded before this tick
    # within the tick, the first group's refusal in a ordered every later group's zones
    assert sweep.cloud.asked[0] == ZONES and sweep.cloud.asked[1:] == [[B, F, A]] * 5
    assert len(ResultStore(f"file://{tmp_path}").start_records(first["run"])) == 7
    control.stop(sweep, TICK)
    store.reset()
    second = control.start(sweep, TICK)
    assert len(second["started"]) == 6
    assert store.ledger_calls == 1 and store.ledger_globs == 2  # the window's two runs
    assert store.record_reads == 7  # each record of the window once, not once per group
    control.stop(sweep, TICK)
    store.reset()
    control.start(sweep, TICK)  # the same store object, as in a warm function
    assert store.ledger_calls == 1 and store.record_reads == 6  # only the last tick's records
    assert len(CountingStore(f"file://{tmp_path}").start_records()) == 19  # 7 + 6 + 6


def test_capacity_history_runs_that_cannot_hold_a_request_in_the_window_are_not_read():
    runs = ["20261001T030000Z", "20261010T030000Z", "20261020T030000Z",
            "20261020T030000Z-1a2b", "20261124T030000Z", "not-a-time"]
    since = utcnow().replace(year=2026, month=11, day=11)
    kept = _may_hold(runs, since)
    # the run opened 10-20 may still have been open on 11-11: only its successors' start bounds it
    assert kept == [
        "20261020T030000Z-1a2b", "20261124T030000Z", "not-a-time"]


def test_capacity_history_a_preemption_in_an_earlier_run_ranks_its_zone_later(tmp_path):
    sweep = make_sweep(tmp_path)
    cloud = sweep.cloud
    first = control.start(sweep, TICK)
    assert cloud.asked[-1] == ZONES and {i.zone for i in cloud.instances.values()} == {A}
    cloud.preempt_all()
    control.start(sweep, TICK)  # the retry notes where the attempt was preempted
    records = sweep.store.start_records(first["run"])
    assert [r.preempted_zone for r in records] == [None, A]
    control.stop(sweep, TICK)  # the run closes; the preempted instances are long gone
    assert cloud.instances == {}

    other = make_sweep(tmp_path / "unused", store=sweep.store)  # another group of the same shape
    other.cloud.asked = []
    second = control.start(other, TICK)
    assert second["run"] != first["run"]
    assert other.cloud.asked[-1] == [B, F, A]  # a: preempted a run ago, still in the window


def test_capacity_history_a_preemption_leaves_the_ordering_with_the_window(tmp_path):
    sweep = make_sweep(tmp_path)
    old = utcnow() - timedelta(days=20)
    control.start(sweep, TICK, now=old)
    sweep.cloud.preempt_all()
    control.start(sweep, TICK, now=old + timedelta(hours=1))
    control.stop(sweep, TICK, now=old + timedelta(hours=2))
    control.start(sweep, TICK)
    assert sweep.cloud.asked[-1] == ZONES


def rows(**rates: float) -> list[dict]:
    return [{"zone": z, "machine_type": MACHINE, "accelerator": None,
             "preemptions_per_vm_hour": r, "vm_hours": 10.0} for z, r in rates.items()]


def test_capacity_history_the_market_snapshot_orders_otherwise_equal_zones(tmp_path):
    sweep = make_sweep(tmp_path)
    sweep.store.write_market_snapshot(
        [*rows(**{A: 0.5, B: 0.1, F: 0.3}),
         {"zone": A, "machine_type": "n1-standard-8", "accelerator": None,  # another shape
          "preemptions_per_vm_hour": 0.0, "vm_hours": 1.0}],
        now=utcnow() - timedelta(days=2))
    control.start(sweep, TICK)
    assert sweep.cloud.asked[-1] == [B, F, A]


def test_capacity_history_report_and_market_publish_the_snapshot_control_reads(tmp_path):
    SyntheticSweep(runs=3, groups=1, preempted_every=2, machine_type=MACHINE, zone=B).write(tmp_path)
    with Catalog(f"file://{tmp_path}") as cat:
        stats = market(cat)
        path = publish(cat, stats)
    assert path is not None and "/market/" in path
    snap = ResultStore(f"file://{tmp_path}").market_snapshot()
    assert snap is not None
    [row] = snap.rows
    assert (row.zone, row.machine_type) == (B, MACHINE)
    assert row.preemptions_per_vm_hour == pytest.approx(stats[0]["preemptions_per_vm_hour"])
    assert row.preemptions_per_vm_hour > 0
    sweep = make_sweep(tmp_path)
    control.start(sweep, TICK)
    assert sweep.cloud.asked[-1] == [A, F, B]  # b: the only zone with preemptions on record


def _snapshot(at=None, **rates) -> dict:
    return {"at": (at or utcnow() - timedelta(hours=1)).isoformat(),
            "rows": rows(**(rates or {A: 9.0, B: 0.0, F: 0.0}))}


HOSTILE = {
    "oversized": lambda: json.dumps({**_snapshot(), "pad": "x" * (70 << 10)}).encode(),
    "not json": lambda: b"\x00\xff{" * 10,
    "a list": lambda: json.dumps([_snapshot()]).encode(),
    "negative rate": lambda: json.dumps(_snapshot(**{A: 9.0, B: -1.0, F: 0.0})).encode(),
    "NaN rate": lambda: json.dumps(_snapshot(**{A: 9.0, B: float("nan"), F: 0.0})).encode(),
    "rate as text": lambda: json.dumps(_snapshot()).replace("9.0", '"9"').encode(),
    "zone too long": lambda: json.dumps({**_snapshot(), "rows": [
        *_snapshot()["rows"], *rows(**{"z" * 5000: 1.0})]}).encode(),
    "too many rows": lambda: json.dumps({**_snapshot(), "rows": _snapshot()["rows"] + rows(
        **{f"zone-{i}": 1.0 for i in range(300)})}).encode(),
    "unknown field": lambda: json.dumps({**_snapshot(), "order": [B, F, A]}).encode(),
    "dated in the future": lambda: json.dumps(_snapshot(at=utcnow() + timedelta(days=1))).encode(),
    "too old": lambda: json.dumps(_snapshot(at=utcnow() - timedelta(days=40))).encode(),
    "no time zone": lambda: json.dumps({**_snapshot(), "at": "2026-11-25T03:00:00"}).encode(),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_capacity_history_a_hostile_market_snapshot_is_ignored_with_a_warning(tmp_path, caplog, kind):
    sweep = make_sweep(tmp_path)
    (tmp_path / "market").mkdir()
    (tmp_path / "market" / "20261120T030000Z.json").write_text(json.dumps(_snapshot(
        at=utcnow() - timedelta(days=3), **{A: 0.0, B: 0.0, F: 1.0})))  # older: never read
    (tmp_path / "market" / "99991231T235959Z.json").write_bytes(HOSTILE[kind]())
    (tmp_path / "market" / "zzz.json").write_text("not a snapshot name: never listed")
    with caplog.at_level(logging.WARNING):
        out = control.start(sweep, TICK)
    assert out["started"]
    assert sweep.cloud.asked[-1] == ZONES  # as believed, a would go last (or f, the older one)
    assert any("market snapshot" in r.getMessage() and "99991231T235959Z" in r.getMessage()
               and "ignored" in r.getMessage() for r in caplog.records), caplog.text


def test_capacity_history_the_snapshot_writer_keeps_only_what_the_reader_accepts(tmp_path):
    store = ResultStore(f"file://{tmp_path}")
    many = rows(**{f"zone-{i:03d}": 1.0 for i in range(400)}) + [
        {"zone": None, "machine_type": MACHINE, "preemptions_per_vm_hour": 1.0},  # local runs
        {"zone": A, "machine_type": MACHINE, "preemptions_per_vm_hour": None}]  # no VM-hours
    store.write_market_snapshot(many)
    snap = store.market_snapshot()
    assert isinstance(snap, MarketSnapshot) and len(snap.rows) == 256
    assert all(r.zone.startswith("zone-") for r in snap.rows)


HOSTILE_RECORDS = {
    "preempted zone too long": {"preempted_zone": "a" * 5000},
    "preempted zone a number": {"preempted_zone": 7},
    "another group": {"group": "someone-else"},
    "not a time": {"at": "yesterday"},
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_RECORDS))
def test_capacity_history_a_malformed_start_record_is_skipped_with_a_warning(tmp_path, caplog, kind):
    sweep = make_sweep(tmp_path)
    run = sweep.store.open_run(utcnow() - timedelta(days=1)).run
    sweep.store.close_run(run, reason="complete")
    group = sweep.groups[0].id
    body = {"run": run, "group": group, "at": utcnow().isoformat(), "machine_type": MACHINE,
            "zone": B, "members": 2, "preempted_zone": A, **HOSTILE_RECORDS[kind]}
    folder = tmp_path / "runs" / run / "starts"
    folder.mkdir(parents=True)
    (folder / f"{group}.1.json").write_text(json.dumps(body))
    (folder / f"{group}.2.json").write_bytes(b"{" * (80 << 10))  # oversized and not JSON
    with caplog.at_level(logging.WARNING):
        out = control.start(sweep, TICK)
    assert out["started"]
    assert sweep.cloud.asked[-1] == ZONES  # believed, the record would put a last
    assert sum(f"{group}.1.json" in r.getMessage() or f"{group}.2.json" in r.getMessage()
               for r in caplog.records if r.levelno >= logging.WARNING) == 2, caplog.text
