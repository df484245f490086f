"""Where refreshed price tables live and how they read back (spotbench/prices/table.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from spotbench.costs import load_catalog
from spotbench.prices.table import Quote, Table, TableError, load_meta, prices_dir, save

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)


def test_prices_dir_is_the_users_cache_unless_told(tmp_path):
    assert prices_dir({"SPOTBENCH_PRICES_DIR": str(tmp_path)}) == tmp_path
    assert prices_dir({"XDG_CACHE_HOME": "/x/cache"}) == Path("/x/cache/spotbench/prices")
    assert prices_dir({}) == Path.home() / ".cache" / "spotbench" / "prices"


def test_prices_a_saved_table_reads_back_with_date_and_source_and_overrides_only_its_rows(tmp_path):
    table = Table(cloud="aws", fetched_at=NOW, regions=("us-east-1",), quotes=(
        Quote("us-east-1", "machine", "c5.large", "on-demand", "hour", 0.0911, "AWS Price List GetProducts"),
        Quote("us-east-1", "machine", "c5.large", "spot", "hour", 0.03, "EC2 DescribeSpotPriceHistory",
              zone="us-east-1a"),
        Quote("us-east-1", "machine", "c5.large", "spot", "hour", 0.04, "EC2 DescribeSpotPriceHistory"),
    ))
    path = save(table, tmp_path)
    meta = load_meta("aws", tmp_path)
    assert meta is not None and meta.fetched_at == NOW and meta.path == path
    assert meta.sources == ("AWS Price List GetProducts", "EC2 DescribeSpotPriceHistory")
    assert meta.stale(NOW + timedelta(days=8)) and not meta.stale(NOW + timedelta(days=6))
    cat = load_catalog(refreshed_dir=tmp_path)
    row = cat.get("aws", "us-east-1", "machine", "c5.large", spot=False)
    assert (row.usd, row.date, row.source) == (0.0911, "2026-11-25", "AWS Price List GetProducts")
    assert cat.get("aws", "us-east-1", "machine", "c5.large", spot=True).usd == 0.04  # the region's row
    assert {z: r.usd for z, r in cat.by_zone("aws", "us-east-1", "machine", "c5.large", True).items()} \
        == {"us-east-1a": 0.03}
    untouched = cat.get("aws", "us-east-1", "machine", "m5.large", spot=True)
    assert untouched.date == "2024-06-01"  # not refreshed: the shipped row, with its own date
    assert [t.cloud for t in cat.tables] == ["aws"]
    assert load_catalog(refreshed_dir=tmp_path, with_refreshed=False).get(
        "aws", "us-east-1", "machine", "c5.large").usd == 0.085


def test_prices_a_broken_table_names_the_file_and_the_fix(tmp_path):
    save(Table(cloud="gcp", fetched_at=NOW, quotes=()), tmp_path)
    (tmp_path / "gcp.json").write_text("{not json")
    with pytest.raises(TableError, match=r"gcp\.json: unreadable .*spotbench prices --cloud gcp"):
        load_catalog(refreshed_dir=tmp_path)


def test_prices_an_unwritable_folder_says_which_setting_moves_it(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(TableError, match="SPOTBENCH_PRICES_DIR"):
        save(Table(cloud="gcp", fetched_at=NOW, quotes=()), blocker / "prices")


def test_prices_a_stored_run_is_priced_at_its_own_zone_when_the_zone_has_a_price(tmp_path):
    from spotbench.costs import annotate
    from tests.report.conftest import rec

    save(Table(cloud="aws", fetched_at=NOW, quotes=(
        Quote("us-east-1", "machine", "c5.large", "spot", "hour", 0.03, "EC2 DescribeSpotPriceHistory",
              zone="us-east-1a"),
        Quote("us-east-1", "machine", "c5.large", "spot", "hour", 0.04, "EC2 DescribeSpotPriceHistory"),
    )), tmp_path)
    cat = load_catalog(refreshed_dir=tmp_path)
    start = NOW - timedelta(hours=1)
    records = [rec(cloud="aws", machine_type="c5.large", spot=True, zone=z, started_at=start,
                   ended_at=start + timedelta(hours=1)) for z in ("us-east-1a", "us-east-1b")]
    in_a, in_b = annotate(records, cat)
    assert in_a.cost_usd == pytest.approx(0.03) and in_b.cost_usd == pytest.approx(0.04)
    assert in_a.metadata["price_date"] == "2026-11-25"
    assert in_a.metadata["price_source"] == "EC2 DescribeSpotPriceHistory"
