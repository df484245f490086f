"""Estimate and budget with candidate zones (`lifecycle: created`): a group lands in any
candidate, so it is priced in its dearest one, and the estimate says so."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from spotbench.costs import MissingPrice, load_catalog
from spotbench.estimate import estimate, group_hourly
from spotbench.spec import load_spec

CAT = load_catalog(with_refreshed=False)
NOW = datetime(2024, 6, 1, tzinfo=UTC)


def _spec(**changes):
    data = yaml.safe_load(Path("examples/gcp-gpu.yaml").read_text())
    data.pop("zone", None)
    data.update(changes)
    return load_spec(data)


def _hourly(spec) -> float:
    (group, *_) = spec.plan()
    return sum(group_hourly(spec, group, CAT))


def test_prices_capacity_candidates_in_two_regions_price_the_dearest():
    cheap, dear = _spec(zone="us-central1-a"), _spec(zone="europe-west4-a")
    assert _hourly(dear) > _hourly(cheap)  # the shipped table: europe-west4 costs more
    both = _spec(zones=["us-central1-a", "europe-west4-a"], lifecycle="created")
    assert _hourly(both) == pytest.approx(_hourly(dear))
    swapped = _spec(zones=["europe-west4-a", "us-central1-a"], lifecycle="created")
    assert _hourly(swapped) == pytest.approx(_hourly(dear))  # not "the first candidate's"
    est = estimate(both, CAT, now=NOW, records=[])
    assert any("2 candidate zones in europe-west4, us-central1" in line and "dearest" in line
               for line in est.prices)


def test_prices_capacity_a_candidate_without_a_price_is_left_out_unless_none_has_one():
    spec = _spec(zones=["us-central1-a", "asia-east1-a"], lifecycle="created")
    assert _hourly(spec) == pytest.approx(_hourly(_spec(zone="us-central1-a")))
    est = estimate(spec, CAT, now=NOW, records=[])
    assert any(line.startswith("no price table for candidate region asia-east1")
               and "spotbench prices --cloud gcp --region asia-east1" in line for line in est.prices)
    assert not any("candidate region us-central1" in line for line in est.prices)
    with pytest.raises(MissingPrice, match="asia-east1"):
        _hourly(_spec(zones=["asia-east1-a", "asia-east1-b"], lifecycle="created"))


def test_prices_zones_without_a_fixed_zone_price_in_the_first_candidates_region():
    spec = _spec(zones=["europe-west4-b"])  # one candidate, stopped lifecycle
    assert _hourly(spec) == pytest.approx(_hourly(_spec(zone="europe-west4-b")))
