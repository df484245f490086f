"""Honest estimates (#39): lifecycle-aware disks, the functions' CPU time priced as the
providers' pricing pages do, free tiers on every service that has one (disk and bucket
too), the stack's NAT priced — each from the shipped price tables, no row overridden."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from spotbench.costs import load_catalog
from spotbench.estimate import estimate
from spotbench.spec import load_spec

CAT = load_catalog(with_refreshed=False)  # the shipped tables only
ROOT = Path(__file__).parents[1]


def _spec(tmp_path: Path, example: str, **changes):
    data = yaml.safe_load((ROOT / "examples" / example).read_text())
    data.update(changes)
    path = tmp_path / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_spec(path)


def _month(spec, *assume: str):
    est = estimate(spec, CAT, records=[], assume=["boot_s=0", "run_s=1800", *assume])
    return est, {ln.item: ln for ln in est.per_month or []}


def test_first_hour_created_lifecycle_bills_disks_only_while_running(tmp_path):
    created, month = _month(_spec(tmp_path, "gcp-gpu-any-zone.yaml"))
    tick = {ln.item: ln for ln in created.per_tick}
    assert month["disk"].quantity == pytest.approx(tick["disk"].quantity * created.ticks_per_month)
    assert created.idle_disk_month_usd == 0  # no month of idle disks for VMs deleted after each run
    assert not any("billed even while the VMs are stopped" in line
                   for line in created.to_dict()["summary"]["lines"])
    stopped, smonth = _month(_spec(tmp_path, "gcp-gpu-any-zone.yaml", lifecycle="stopped",
                                   zone="us-central1-a", zones=None, region=None))
    assert smonth["disk"].quantity > 50 * month["disk"].quantity  # all month while stopped
    assert stopped.idle_disk_month_usd == pytest.approx(smonth["disk"].usd)


# aws.amazon.com/lambda/pricing, Example 1: 512 MB, 3 million calls a month, 1 s each:
# 1,500,000 GB-s − 400,000 free = 1,100,000 × $0.00001667 = $18.34; 3 M − 1 M free requests
# × $0.20 per million = $0.40; total $18.74 (the page rounds the GB-second price to
# $0.00001667; the table's $0.0000166667 gives $18.33). Lambda's price includes the CPU.
# The same functions on Cloud Run functions (cloud.google.com/run/pricing, tier 1, request-
# based; cloud.google.com/functions/docs/configuring/memory: 512 MiB gets 0.333 vCPU):
#   CPU     3 M × 1 s × 0.333 = 999,000 − 180,000 free = 819,000 vCPU-s × $0.000024 = $19.66
#   memory  3 M × 0.5 GiB × 1 s = 1,500,000 − 360,000 free = 1,140,000 × $0.0000025 = $2.85
#   calls   3 M − 2 M free = 1 M × $0.40 per million                               = $0.40
NIGHTLY = {"cron": "0 3 * * *", "timezone": "UTC"}  # 30 ticks in a 30-day month
FUNCTIONS = ["calls_per_tick=100000", "function_mb=512", "function_s_per_call=1", "month_days=30",
             "free_tier=on"]


def test_first_hour_lambda_example_from_its_own_inputs(tmp_path):
    est, month = _month(_spec(tmp_path, "aws-osu.yaml", schedule=NIGHTLY), *FUNCTIONS)
    assert est.ticks_per_month == pytest.approx(30)
    assert month["functions (GB-seconds)"].quantity == pytest.approx(1_100_000)
    assert month["functions (GB-seconds)"].usd == pytest.approx(18.34, abs=0.01)
    assert month["functions (invocations)"].usd == pytest.approx(0.40)
    assert "functions (CPU)" not in month  # in Lambda's GB-second price


def test_first_hour_cloud_run_functions_bill_cpu_beside_memory(tmp_path):
    est, month = _month(_spec(tmp_path, "gcp-osu.yaml", schedule=NIGHTLY), *FUNCTIONS)
    assert month["functions (CPU)"].quantity == pytest.approx(819_000)
    assert month["functions (CPU)"].usd == pytest.approx(19.66, abs=0.005)
    assert month["functions (GB-seconds)"].usd == pytest.approx(2.85)
    assert month["functions (invocations)"].usd == pytest.approx(0.40)


def test_first_hour_free_tier_includes_disk_and_bucket_where_it_holds(tmp_path):
    central = _spec(tmp_path, "gcp-osu.yaml")
    _, listed = _month(central, "disk_type=pd-standard")
    _, free = _month(central, "disk_type=pd-standard", "free_tier=on")
    assert free["disk"].quantity == pytest.approx(max(0.0, listed["disk"].quantity - 30))
    assert free["bucket storage"].usd == 0 and listed["bucket storage"].usd > 0
    _, balanced = _month(central, "free_tier=on")  # the free 30 GB are standard PD only
    _, balanced_listed = _month(central)
    assert balanced["disk"].quantity == pytest.approx(balanced_listed["disk"].quantity)


def test_first_hour_nat_priced_standing_on_aws_per_vm_on_gcp(tmp_path):
    aws, month = _month(_spec(tmp_path, "aws-osu.yaml"))
    hours = aws.assumed["month_days"] * 24
    assert month["NAT (gateway)"].usd == pytest.approx(0.045 * hours)  # all month, runs or not
    assert month["NAT (IP)"].usd == pytest.approx(0.005 * hours)
    assert "NAT (gateway)" not in {ln.item for ln in aws.per_tick}
    gcp, gmonth = _month(_spec(tmp_path, "gcp-osu.yaml"))
    tick = {ln.item: ln for ln in gcp.per_tick}
    instance_h = sum(g.billed_s * g.members for g in gcp.groups) / 3600
    assert tick["NAT (VMs)"].usd == pytest.approx(0.0014 * instance_h)
    assert gmonth["NAT (VMs)"].usd == pytest.approx(tick["NAT (VMs)"].usd * gcp.ticks_per_month)


def test_first_hour_function_memory_is_what_the_stack_deploys():
    from spotbench.estimate import DEFAULT_FUNCTION_MB

    gcp = (ROOT / "infra" / "gcp" / "functions.py").read_text()
    aws = (ROOT / "infra" / "aws" / "functions.py").read_text()
    assert f'"available_memory": "{DEFAULT_FUNCTION_MB:g}M"' in gcp
    assert f"memory_size={DEFAULT_FUNCTION_MB:g}," in aws


def test_first_hour_egress_priced_from_its_row_and_its_assumption(tmp_path):
    """Egress (#39: "NAT, egress and bucket storage priced"): a line per tick from the shipped
    network/egress row × `--assume egress_gb_per_tick`, and the month's the tick's × ticks."""
    for example, usd_per_gb in (("gcp-osu.yaml", 0.12), ("aws-osu.yaml", 0.09)):
        est, month = _month(_spec(tmp_path, example), "egress_gb_per_tick=2")
        tick = {ln.item: ln for ln in est.per_tick}
        assert tick["egress"].unit_usd == pytest.approx(usd_per_gb)
        assert tick["egress"].usd == pytest.approx(2 * usd_per_gb)
        assert month["egress"].usd == pytest.approx(2 * usd_per_gb * est.ticks_per_month)
        _, none = _month(_spec(tmp_path, example))  # results stay in the region: free
        assert none["egress"].usd == 0
