"""Spot-market statistics: failed starts from the start ledger, retries and real cost from
the stored attempts, and `spotbench estimate` pricing retries with them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from spotbench import control
from spotbench.clouds.base import Instance, State
from spotbench.costs import load_catalog
from spotbench.estimate import estimate
from spotbench.history.catalog import Catalog
from spotbench.history.market import market
from spotbench.history.synthetic import SyntheticSweep
from spotbench.spec import load_spec
from tests.history.conftest import cli_json, spec_for
from spotbench.results import Result, utcnow
from tests.test_control import SCHEDULER, MemoryCloud, make_sweep


@dataclass(frozen=True)
class TypedInstance(Instance):
    error: str | None = None  # what a cloud driver with typed outcomes reports


class StockoutCloud(MemoryCloud):
    """The first start of each group finds no capacity: its members stay STOPPED."""

    def __init__(self, groups, typed: bool):
        super().__init__(groups)
        self.refused: set[str] = set()
        self.typed = typed

    def start(self, labels):
        group = labels.get("spotbench-group")
        if group not in self.refused:
            self.refused.add(group)
            self.start_calls += 1
            return [TypedInstance(i.name, State.STOPPED, i.labels, zone="local",
                                  detail="ZONE_RESOURCE_POOL_EXHAUSTED",
                                  error="capacity" if self.typed else None)
                    for i in self.query(labels)]
        return super().start(labels)


@pytest.mark.parametrize("typed", [True, False])
def test_failed_starts_per_start_from_the_start_ledger(tmp_path: Path, typed: bool) -> None:
    sweep = make_sweep(tmp_path, trials=2, concurrency=2)
    sweep.cloud = StockoutCloud(sweep.groups, typed)
    run = control.start(sweep, SCHEDULER, {})["run"]  # both groups: no capacity
    control.start(sweep, SCHEDULER, {})  # the next tick: both start
    for g in sweep.groups:  # as a member in zone "local" stores it
        now = utcnow()
        sweep.store.write_group(run, g.id, [Result(
            sweep="c", run=run, group=g.id, trial=g.trial, workload="osu", metric="latency", value=1.0,
            unit="us", cloud="local", machine_type="local", zone="local", started_at=now, ended_at=now)])
    with Catalog(sweep.store.url) as cat:
        (row,) = market(cat)
        detail = cat.query("SELECT detail FROM starts WHERE failed > 0").rows
    assert row["starts"] == 4 and row["failed_starts_per_start"] == 0.5
    # a capacity figure only where the cloud said what kind of failure it was
    assert row["capacity_failures_per_start"] == (0.5 if typed else None)
    assert len(detail) == 2 and all("ZONE_RESOURCE_POOL_EXHAUSTED" in d for (d,) in detail)


def test_a_start_record_that_disagrees_with_its_path_is_not_counted(tmp_path: Path) -> None:
    """As records: the start ledger's path names the group and run, not its body."""
    sweep = make_sweep(tmp_path, trials=2, concurrency=2)
    run = control.start(sweep, SCHEDULER, {})["run"]
    a, b = (g.id for g in sweep.groups)
    body = json.loads(sweep.store.fs.cat_file(sweep.store.path("runs", run, "starts", f"{a}.1.json")))
    sweep.store.fs.pipe_file(sweep.store.path("runs", run, "starts", f"{a}.2.json"),
                             json.dumps({**body, "group": b}).encode())
    with Catalog(sweep.store.url) as cat:
        assert cat.query('SELECT "group", count(*) AS n FROM starts GROUP BY 1 ORDER BY 1').rows == [
            (a, 1), (b, 1)]


def test_retries_and_real_cost_per_completed_result(tmp_path: Path) -> None:
    root = tmp_path / "results"
    # 6 runs × 2 groups = 12 group runs; every 4th is preempted once (at a third of the time)
    SyntheticSweep(runs=6, groups=2, preempted_every=4, machine_type="local").write(root)
    stats = cli_json("market", str(spec_for(tmp_path, root)))
    (row,) = stats
    assert (row["completed"], row["attempts"], row["preempted"]) == (12, 15, 3)
    assert row["retries_per_completed"] == pytest.approx(3 / 12)
    assert row["cost_per_completed_usd"] == pytest.approx(0.001 * 15 / 12)
    assert row["retry_overhead"] == pytest.approx(15 / 12)
    # 12 × 60 s + 3 × 20 s, 2 members each
    assert row["vm_hours"] == pytest.approx((12 * 60 + 3 * 20) * 2 / 3600)
    assert row["preemptions_per_vm_hour"] == pytest.approx(3 / row["vm_hours"])
    assert row["first_result_s"] == pytest.approx(70.0)  # tick at 03:00, first result 03:01:10
    assert row["starts"] == 0 and row["failed_starts_per_start"] is None  # no start ledger here


def test_estimate_prices_expected_retries_from_history(tmp_path: Path) -> None:
    root = tmp_path / "results"
    SyntheticSweep(runs=6, groups=2, preempted_every=4, machine_type="n1-standard-2",
                   zone="us-central1-a").write(root)
    spec_file = tmp_path / "gcp.yaml"
    spec_file.write_text(json.dumps({
        "name": "synthetic", "cloud": "gcp", "zone": "us-central1-a", "workload": {"name": "osu"},
        "matrix": {"machine_type": ["n1-standard-2", "n1-standard-4"]}, "results": str(root),
        "deadline": "2m"}))
    spec = load_spec(spec_file)
    cat = load_catalog()
    with Catalog(spec.results_url()) as c:
        stats = market(c)
    with_history = estimate(spec, cat, records=[], market=stats)
    happy = estimate(spec, cat, records=[], market=[])
    lines = {ln.item: ln for ln in with_history.per_tick}
    assert "retries (sweep history)" not in {ln.item for ln in happy.per_tick}
    retry = lines["retries (sweep history)"]
    matched = with_history.groups[0]  # n1-standard-2 has history, n1-standard-4 none
    assert [g.retry_overhead for g in with_history.groups] == [pytest.approx(15 / 12), 1.0]
    assert retry.usd == pytest.approx((matched.compute_usd + matched.gpu_usd) * (15 / 12 - 1))
    assert retry.usd == pytest.approx(retry.quantity * retry.unit_usd)
    assert with_history.groups[0].expected_attempts == pytest.approx(1 + 3 / 12)
    assert any("retries from this sweep's history" in a for a in with_history.assumptions)
    assert any("no retries" in a for a in happy.assumptions)
    # the CLI reads the same history from the spec's results URL
    out = cli_json("estimate", str(spec_file))
    assert [g["retry_overhead"] for g in out["groups"]] == [pytest.approx(15 / 12), 1.0]
    assert out["tick_total_usd"] == pytest.approx(sum(ln["usd"] for ln in out["per_tick"]))
    assert "retries (sweep history)" in {ln["item"] for ln in out["per_tick"]}
