"""`spotbench estimate`: lines add up, month from cron ticks, saving of self-stop, errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.costs import annotate, load_catalog
from spotbench.estimate import Estimate, estimate
from spotbench.results import Result
from spotbench.spec import load_spec

NOW = datetime(2024, 6, 1, tzinfo=UTC)
CAT = load_catalog()
SPEC = {
    "name": "e", "cloud": "gcp", "zone": "us-central1-a", "workload": {"name": "osu"},
    "matrix": {"machine_type": ["n1-standard-2"], "accelerator": ["nvidia-tesla-t4"]},
    "trials": 2, "deadline": "29m", "spot": False, "schedule": {"cron": "0 3 * * *"},
}


def test_lines_add_up_and_hand_computed():
    est = estimate(load_spec(SPEC), CAT, now=NOW, records=[])
    # 2 groups × 2 members, each (29 min + 60 s boot) = 1800 s = 0.5 h → 2 instance-hours
    lines = {ln.item: ln for ln in est.per_tick}
    assert lines["compute"].quantity == pytest.approx(2.0)
    assert lines["compute"].usd == pytest.approx(0.095 * 2)
    assert lines["GPU"].usd == pytest.approx(0.35 * 2)
    assert lines["disk"].usd == pytest.approx(0.10 * 20 * 2 * 3600 / (730 * 3600))
    assert lines["functions (invocations)"].quantity == 4
    for section in (est.per_tick, est.per_month):
        for ln in section:
            assert ln.usd == pytest.approx(ln.quantity * ln.unit_usd)
    # a daily cron fires once per day: 730 h / 24 = 30.42 ticks in the average billing month,
    # whatever the date or time of day the estimate runs (it counted 30 or 31 from `now`)
    assert est.ticks_per_month == pytest.approx(730 / 24)
    month = {ln.item: ln for ln in est.per_month}
    assert month["compute"].usd == pytest.approx(0.095 * 2 * 730 / 24)
    assert month["disk"].usd == pytest.approx(0.10 * 20 * 4)  # 4 disks all month, stopped or not
    assert month["scheduler jobs"].usd == pytest.approx(0.20)
    assert Estimate.total(est.per_month) == pytest.approx(sum(ln.usd for ln in est.per_month))
    assert est.self_stop_saving_tick == pytest.approx(0)


def test_earlier_results_give_run_time_and_saving():
    spec = load_spec(SPEC)
    g = spec.plan()[0]
    t0 = NOW - timedelta(days=1)
    recs = [Result(sweep="e", run="r", group=g.id, trial=1, params=g.params.model_dump(), workload="osu",
                   metric="latency", value=1, unit="us", cloud="gcp", machine_type="n1-standard-2",
                   zone="us-central1-a", started_at=t0, ended_at=t0 + timedelta(seconds=540))]
    est = estimate(spec, CAT, now=NOW, records=annotate(recs, CAT, members=2))
    assert est.groups[0].run_s == 540 and "earlier" in est.groups[0].run_source
    # per group: deadline 1800 s vs 600 s billed, (0.095+0.35) $/h, 2 members, 2 groups
    assert est.self_stop_saving_tick == pytest.approx((0.095 + 0.35) * 1200 / 3600 * 2 * 2)
    assert est.self_stop_saving_month == pytest.approx(est.self_stop_saving_tick * 730 / 24)


def test_cli_json_and_missing_price(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps(SPEC))
    runner = CliRunner()
    res = runner.invoke(app, ["estimate", str(f), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["tick_total_usd"] == pytest.approx(sum(ln["usd"] for ln in data["per_tick"]))
    bad = tmp_path / "bad.yaml"
    bad.write_text(json.dumps({**SPEC, "zone": "mars-north1-a"}))
    res = runner.invoke(app, ["estimate", str(bad)])
    assert res.exit_code == 2
    assert "region=mars-north1" in res.output and "n1-standard-2" in res.output
