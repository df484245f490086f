"""`estimate` of a `schedule: once` spec (issue #39): the run's own cost and nothing
standing — no month, no scheduler, no month of disks or NAT gateway — every figure from the
spec, the shipped price rows and the assumptions."""

from __future__ import annotations

import math

import pytest

from spotbench.clouds import get_provider
from spotbench.costs import load_catalog
from spotbench.estimate import estimate
from spotbench.spec import load_spec

CAT = load_catalog(with_refreshed=False)  # the shipped tables only
AWS = {"name": "cmp", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
       "workload": {"name": "osu"}, "matrix": {"machine_type": ["c5n.large"]}, "trials": 3,
       "image": "docker.io/library/python:3.12-slim", "deadline": "1h"}


def _lines(est):
    return {ln.item: ln for ln in est.per_tick}


@pytest.mark.parametrize("stack_s, run_s", [(900, 1800), (3600, 2400)])
def test_first_hour_once_estimate_prices_the_run_alone_from_its_inputs(stack_s, run_s):
    spec = load_spec({**AWS, "schedule": "once"})
    est = estimate(spec, CAT, records=[], assume=["boot_s=0", f"run_s={run_s}", f"stack_s={stack_s}"])
    assert est.per_month is None and est.ticks_per_month is None and est.idle_disk_month_usd is None
    lines = _lines(est)
    assert "scheduler jobs" not in lines  # no EventBridge schedule exists to invoke anything
    members = sum(len(g.members) for g in spec.plan())
    hourly = CAT.get("aws", "us-east-1", "machine", "c5n.large", spot=True).usd
    assert lines["compute"].quantity == pytest.approx(members * run_s / 3600)
    assert lines["compute"].usd == pytest.approx(members * run_s / 3600 * hourly)
    # the disks while the VMs run only (created lifecycle), no GB-month of idle disks
    disk_gb = get_provider("aws").disk(spec)[1]
    assert lines["disk"].quantity == pytest.approx(members * disk_gb * run_s / (730 * 3600))
    # the NAT gateway for the hours the stack stands (max_concurrency waves of groups), whole hours
    waves = math.ceil(len(spec.plan()) / spec.max_concurrency) if spec.max_concurrency else 1
    hours = math.ceil((run_s * waves + stack_s) / 3600)
    gateway = CAT.get("aws", "us-east-1", "network", "nat-gateway").usd
    assert lines["NAT (gateway)"].quantity == hours
    assert lines["NAT (gateway)"].usd == pytest.approx(hours * gateway)
    assert est.run_usd == pytest.approx(sum(ln.usd for ln in est.per_tick))
    first = est.to_dict()["summary"]["lines"][0]
    assert "per run" in first and "per month" not in first and "schedule: once" in first


def test_first_hour_once_has_no_standing_cost_where_a_cron_has_one():
    once = estimate(load_spec({**AWS, "schedule": "once"}), CAT, records=[],
                    assume=["boot_s=0", "run_s=1800"])
    cron = estimate(load_spec({**AWS, "schedule": {"cron": "0 3 * * *"}}), CAT, records=[],
                    assume=["boot_s=0", "run_s=1800"])
    standing = {ln.item: ln for ln in cron.per_month or []}
    assert standing["NAT (gateway)"].quantity == pytest.approx(730)  # all month, VMs or not
    assert cron.idle_disk_month_usd > 0  # stopped VMs' disks, all month
    assert "scheduler jobs" in _lines(cron)
    assert once.per_month is None and "scheduler jobs" not in _lines(once)
    # the one run costs what a cron tick costs, less the scheduler, plus its hours of gateway
    tick = {k: v for k, v in _lines(cron).items() if k != "scheduler jobs"}
    assert {k: v.usd for k, v in _lines(once).items() if not k.startswith("NAT (")} == pytest.approx(
        {k: v.usd for k, v in tick.items() if not k.startswith("NAT (")})
