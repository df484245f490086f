"""Billing rules on hand-computed cases, the catalog and annotate()."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spotbench.costs import (
    MissingPrice, annotate, billed_seconds, disk_cost, group_costs, instance_hourly,
    load_catalog, region_of,
)
from spotbench.results import Result

T0 = datetime(2024, 5, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def rec(seconds: float, **kw) -> Result:
    base = dict(sweep="s", run="r", group="g", trial=1, workload="osu", metric="latency",
                value=1.0, unit="us", cloud="gcp", machine_type="n1-standard-2",
                zone="us-central1-a", started_at=T0, ended_at=T0 + timedelta(seconds=seconds))
    base.update(kw)
    return Result(**base)


def test_minimum_minute_and_per_second():
    assert billed_seconds(0) == 60
    assert billed_seconds(30) == 60
    assert billed_seconds(60) == 60
    assert billed_seconds(61) == 61
    assert billed_seconds(90.2) == 91  # whole seconds, rounded up
    assert billed_seconds(5400) == 5400  # 1.5 h: partial hours are not rounded


def test_catalog_rows_have_date_and_source(cat):
    for row in cat.rows.values():
        assert row.date and row.source, row
    assert cat.get("local", "*", "machine", "local").usd == 0
    for m in ("n1-standard-1", "n1-standard-2", "n1-standard-32", "n1-highmem-32", "n1-highcpu-32"):
        for region in ("us-central1", "europe-west4"):
            assert cat.get("gcp", region, "machine", m, spot=True).usd < cat.get("gcp", region, "machine", m).usd
    for m in ("c5n.18xlarge", "g4dn.xlarge", "p3.2xlarge", "m5.large", "g5.xlarge", "c5.large"):
        for region in ("us-east-1", "eu-west-1"):
            assert cat.get("aws", region, "machine", m).usd > 0


def test_partial_hours_with_separate_gpu(cat):
    # n1-standard-2 on-demand 0.095 $/h + 1 T4 0.35 $/h, 1.5 h, 2 members
    machine, gpu = instance_hourly(cat, "gcp", "us-central1", "n1-standard-2", False, "nvidia-tesla-t4", 1)
    assert (machine, gpu) == (0.095, 0.35)
    [r] = annotate([rec(5400, accelerator="nvidia-tesla-t4")], cat, members=2)
    assert r.billed_s == 10800
    assert r.cost_usd == pytest.approx((0.095 + 0.35) * 1.5 * 2)  # 1.335


def test_bundled_gpu_not_charged_twice(cat):
    machine, gpu = instance_hourly(cat, "gcp", "us-central1", "a2-highgpu-1g", False, "nvidia-tesla-a100", 1)
    assert gpu == 0 and machine == pytest.approx(3.6734)
    machine, gpu = instance_hourly(cat, "aws", "us-east-1", "g4dn.xlarge", True, "nvidia-tesla-t4", 1)
    assert gpu == 0 and 0 < machine < 0.526


def test_minimum_minute_in_annotate(cat):
    [r] = annotate([rec(10, machine_type="n1-standard-1")], cat, members=2)
    assert r.billed_s == 120  # 60 s minimum per start, per member
    assert r.cost_usd == pytest.approx(0.0475 * 60 / 3600 * 2)
    assert r.metadata["members"] == 2


def test_stopped_disk_prorated(cat):
    # 20 GB pd-balanced at 0.10 $/GB-month, kept a whole month (VM stopped most of it) = 2.00
    month = 730 * 3600
    assert disk_cost(cat, "gcp", "us-central1", "pd-balanced", 20, month) == pytest.approx(2.00)
    assert disk_cost(cat, "gcp", "us-central1", "pd-balanced", 20, month / 2) == pytest.approx(1.00)
    assert disk_cost(cat, "aws", "us-east-1", "gp3", 30, month) == pytest.approx(2.40)


def test_missing_price_named_and_annotate_keeps_record(cat):
    with pytest.raises(MissingPrice, match="item=n9-mega.*region=us-central1|region=us-central1.*item=n9-mega"):
        cat.get("gcp", "us-central1", "machine", "n9-mega")
    [r] = annotate([rec(100, machine_type="n9-mega")], cat)
    assert r.cost_usd is None and "n9-mega" in r.metadata["cost_note"]


def test_user_prices_override_and_add(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text(
        "cloud,region,kind,item,provisioning,unit,usd,date,source\n"
        "gcp,us-central1,machine,n1-standard-2,on-demand,hour,0.05,2020-01-01,negotiated\n"
        "gcp,us-central1,machine,n9-mega,spot,hour,1.0,2024-01-01,mine\n"
    )
    cat = load_catalog(f)
    assert cat.get("gcp", "us-central1", "machine", "n1-standard-2").usd == 0.05
    assert cat.get("gcp", "us-central1", "machine", "n9-mega", spot=True).usd == 1.0
    bad = tmp_path / "bad.csv"
    bad.write_text("cloud,item\nx,y\n")
    with pytest.raises(ValueError, match="lacks columns"):
        load_catalog(bad)


def test_region_of():
    assert region_of("gcp", "us-central1-a") == "us-central1"
    assert region_of("aws", "us-east-1a") == "us-east-1"
    assert region_of("aws", None, "eu-west-1") == "eu-west-1"
    assert region_of("local", None) == "*"


def test_group_costs_counts_each_run_once(cat):
    recs = annotate([rec(600), rec(600, metric="bibw")], cat, members=2)
    costs = group_costs(recs)
    assert len(costs) == 1
    assert list(costs.values())[0] == pytest.approx(0.095 * 600 / 3600 * 2)


def test_workload_finish_stores_cost(tmp_path, monkeypatch):
    """WorkloadRun.finish prices records; a missing price still stores them."""
    from workloads.common import WorkloadRun
    from spotbench.member import MemberContext, Peer
    from spotbench.results import ResultStore

    store = ResultStore("file://" + str(tmp_path / "res"))
    store.open_run()
    peers = [Peer(name=f"m{i}", role="peer", index=i, rank=i, host="127.0.0.1", port=1) for i in range(2)]
    for machine, priced in (("local", True), ("n9-mega", False)):
        ctx = MemberContext(sweep="s", group=f"g-{machine}", trial=1, cloud="local" if priced else "gcp",
                            workload="osu", params={}, name="m0", role="launcher", index=0, rank=0,
                            members=peers, results_url=store.url, machine_type=machine,
                            zone=None if priced else "us-central1-a")
        run = WorkloadRun(ctx, store)
        run.record("latency", 1.0, "us", size_bytes=0)
        run.finish()
    by_group = {r.group: r for r in store.read()}
    assert by_group["g-local"].cost_usd == 0 and by_group["g-local"].billed_s == 120
    assert by_group["g-n9-mega"].cost_usd is None
    assert "n9-mega" in by_group["g-n9-mega"].metadata["cost_note"]
