"""The cheapest cron case: a scheduled single-VM `container` sweep, priced by `estimate`."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from spotbench.costs import load_catalog
from spotbench.estimate import estimate
from spotbench.spec import load_spec

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "gcp-container-cron.yaml"


def test_the_example_is_one_spot_vm_a_night_and_estimate_prices_it():
    spec = load_spec(EXAMPLE)
    groups = spec.plan()
    assert len(groups) == 1 and [m.role for m in groups[0].members] == ["member"]
    est = estimate(spec, load_catalog(), now=datetime(2024, 6, 1, tzinfo=UTC), records=[])
    compute = {ln.item: ln for ln in est.per_tick}["compute"]
    spot_e2 = load_catalog().get("gcp", "us-central1", "machine", "e2-standard-2", True).usd
    assert compute.quantity == pytest.approx((600 + 60) / 3600)  # deadline + boot, one VM
    assert compute.usd == pytest.approx(spot_e2 * compute.quantity)
    assert est.ticks_per_month == pytest.approx(730 / 24)  # a nightly cron: 30.42 a billing month
    assert sum(ln.usd for ln in est.per_month) > compute.usd * 730 / 24  # + disk, scheduler, functions
