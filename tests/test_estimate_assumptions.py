"""`estimate --assume KEY=VALUE`: every assumption printed, overridable and echoed in JSON;
a cron-on-GCP month reproduced line by line to the cent; ticks independent of the clock;
members priced at their own role's machine type (estimate, budget, report)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from spotbench.budget import check_budget, committed_usd
from spotbench.cli import app
from spotbench.clouds.base import Instance, State
from spotbench.costs import annotate, load_catalog
from spotbench.estimate import BadAssumption, estimate, fires_per_day
from spotbench.report import cost, data as _data
from spotbench.results import Result, ResultStore
from spotbench.spec import load_spec

CAT = load_catalog()

# A nightly benchmark as a user writes it. The calculation below is built from Google's
# published unit prices (us-central1 list prices, 2024-06: cloud.google.com/compute/
# vm-instance-pricing, /compute/disks-image-pricing, /scheduler/pricing, /functions/pricing);
# we found no published worked example combining the four services, so each line's
# arithmetic is written out here:
#
#   2 × n1-standard-2 on demand ($0.0950 per hour), up 30 min a night, 30 nights
#     compute   2 VMs × 0.5 h × 30            = 30 h × $0.0950           = $2.85
#   20 GB balanced PD per VM ($0.100 per GB-month, a month being 730 h), all 30 days
#     disk      40 GB × 720 h / 730 h         = 39.45 GB-month × $0.100 = $3.95
#   Cloud Scheduler: a start and a stop job ($0.10 per job per month)
#     scheduler 2 jobs                                       × $0.10     = $0.20
#   Cloud Run functions: 3 calls a night (start, stop, done), 256 MB, 0.5 s each
#     calls     3 × 30 = 90 × $0.40 per million                          = $0.00
#     memory    90 × 0.25 GB × 0.5 s = 11.25 GB-s × $0.0000025           = $0.00
#     CPU       90 × 0.5 s × 0.167 vCPU = 7.5 vCPU-s × $0.000024         = $0.00
#   Cloud NAT (cloud.google.com/nat/pricing): 30 VM-hours × $0.0014      = $0.04
#     its IP while the VMs run: 15 h × $0.005                            = $0.08
#   results bucket: 1 GB Standard Storage × $0.020 (storage/pricing)     = $0.02
#   total                                                                = $7.13
#   with the free tier (3 scheduler jobs, 2 M calls, 360 000 GiB-s, 180 000 vCPU-s,
#   5 GB-months of bucket free)                                          = $6.91
NIGHTLY = """\
name: nightly
cloud: gcp
zone: us-central1-a
workload: {name: osu}
matrix:
  machine_type: [n1-standard-2]
spot: false
deadline: 45m
gcp: {boot_disk_gb: 20}
schedule: {cron: "0 3 * * *", timezone: UTC}
"""
ASSUME = ["boot_s=0", "run_s=1800", "month_days=30", "calls_per_tick=3", "function_mb=256",
          "function_s_per_call=0.5"]


def run_estimate(tmp_path: Path, text: str, *args: str):
    f = tmp_path / "spec.yaml"
    f.write_text(text)
    argv = ["estimate", str(f), *args]
    return CliRunner().invoke(app, argv)


def month_of(res) -> dict[str, float]:
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    return {ln["item"]: round(ln["usd"], 2) for ln in data["per_month"]} | {
        "total": round(data["month_total_usd"], 2)}


def test_published_style_month_to_the_cent(tmp_path):
    res = run_estimate(tmp_path, NIGHTLY, "--json", *(f"--assume={a}" for a in ASSUME))
    assert month_of(res) == {"compute": 2.85, "GPU": 0.0, "disk": 3.95, "scheduler jobs": 0.20,
                             "functions (invocations)": 0.0, "functions (GB-seconds)": 0.0,
                             "functions (CPU)": 0.0, "NAT (VMs)": 0.04, "NAT (IP)": 0.07,
                             "NAT (data)": 0.0, "egress": 0.0, "bucket storage": 0.02,
                             "total": 7.13}  # CPU, NAT and bucket priced (#39)
    data = json.loads(res.stdout)
    assert data["ticks_per_month"] == pytest.approx(30)
    assert data["assumed"] == {"boot_s": 0.0, "run_s": 1800.0, "function_s_per_call": 0.5,
                                   "function_mb": 256.0, "calls_per_tick": 3.0,
                                   "disk_type": "pd-balanced", "month_days": 30.0, "free_tier": False,
                                   "nat_gb_per_tick": 0.0, "egress_gb_per_tick": 0.0, "bucket_gb": 1.0}
    assert set(data["overridden"]) == {a.split("=")[0] for a in ASSUME}
    lines = {ln["item"]: ln for ln in data["per_month"]}
    assert lines["compute"]["quantity"] == pytest.approx(30)
    assert lines["functions (GB-seconds)"]["quantity"] == pytest.approx(11.25)
    free = run_estimate(tmp_path, NIGHTLY, "--json", *(f"--assume={a}" for a in ASSUME),
                        "--assume", "free_tier=on")
    assert month_of(free)["scheduler jobs"] == 0.0 and month_of(free)["total"] == 6.91


def test_every_assumption_is_printed(tmp_path):
    res = run_estimate(tmp_path, NIGHTLY, "--assume", "disk_type=pd-standard")
    assert res.exit_code == 0, res.stderr
    out = " ".join(res.stdout.split())
    for key in ("boot_s=60", "run_s=auto", "function_s_per_call=0.5", "function_mb=512",
                "calls_per_tick=auto", "disk_type=pd-standard (--assume)", "month_days=30.4167",
                "free_tier=off"):
        assert key in out, key
    data = json.loads(run_estimate(tmp_path, NIGHTLY, "--json", "--assume", "disk_type=pd-standard").stdout)
    disk = next(ln for ln in data["per_month"] if ln["item"] == "disk")
    assert disk["unit_usd"] == 0.04  # the pd-standard row


@pytest.mark.parametrize("arg, needle", [
    ("run_secs=10", "did you mean 'run_s'?"),
    ("run_s=ten", "run_s=ten: expected a number"),
    ("free_tier=maybe", "give on or off"),
    ("month_days=0", "month_days=0"),
    ("run_s", "give KEY=VALUE"),
])
def test_bad_assumptions_name_the_key(tmp_path, arg, needle):
    res = run_estimate(tmp_path, NIGHTLY, "--assume", arg)
    assert res.exit_code == 2 and needle in res.stderr, res.stderr


def test_month_ticks_do_not_depend_on_the_clock():
    spec = load_spec(yaml.safe_load(NIGHTLY.replace("0 3 * * *", "0 3 * * 1-5")))
    at = [datetime(2024, 6, 1, h, tzinfo=UTC) for h in (0, 4, 23)] + [datetime(2025, 2, 14, 12, tzinfo=UTC)]
    ticks = {round(estimate(spec, CAT, now=t, records=[]).ticks_per_month, 9) for t in at}
    assert len(ticks) == 1 and ticks.pop() == pytest.approx(5 / 7 * 730 / 24)


@pytest.mark.parametrize("cron, per_day", [
    ("0 3 * * *", 1.0), ("30 5 * * 1-5", 5 / 7), ("0 */6 * * *", 4.0), ("*/15 * * * *", 96.0),
    ("0 3 1 * *", 12 / 365.2425),
])
def test_fires_per_day(cron, per_day):
    assert fires_per_day(cron) == pytest.approx(per_day, rel=0.005)


def test_assumption_overrides_in_code():
    spec = load_spec(yaml.safe_load(NIGHTLY))
    with pytest.raises(BadAssumption):
        estimate(spec, CAT, records=[], assume={"boot": 1})
    est = estimate(spec, CAT, records=[], assume={"run_s": 540, "boot_s": 60})
    assert est.groups[0].billed_s == 600 and est.groups[0].run_source == "--assume run_s"


# ---- per-role machine types --------------------------------------------------------------
TF = """\
name: roles
cloud: gcp
zone: us-central1-a
workload: {name: tf-mnist, strategy: parameter_server, workers: 2, ps: 1}
matrix: {machine_type: [n1-standard-2]}
role_machine_types: {chief: n1-standard-8}
spot: false
deadline: 9m
budget: 0.2
schedule: {cron: "0 3 * * *"}
"""
# chief on n1-standard-8 ($0.38/h), ps + 2 workers on n1-standard-2 ($0.095/h)
HOURLY = 0.38 + 3 * 0.095


def test_estimate_prices_each_role_at_its_type(tmp_path):
    spec = load_spec(yaml.safe_load(TF))
    est = estimate(spec, CAT, records=[], assume={"boot_s": 0, "run_s": 3600})
    (g,) = est.groups
    assert g.compute_usd == pytest.approx(HOURLY)
    assert g.machine_type == "n1-standard-2 (chief: n1-standard-8)"


def test_budget_prices_each_role_at_its_type(tmp_path):
    spec = load_spec({**yaml.safe_load(TF), "budget": 0.15, "trials": 2})
    group, other = spec.plan()
    store = ResultStore(f"file://{tmp_path}/r")
    # up to its deadline a member runs 9 min + 60 s boot = 600 s
    chief = next(m for m in other.members if m.role == "chief")
    running = [Instance(name=chief.name, state=State.RUNNING, labels=other.member_labels(chief))]
    assert committed_usd(spec, running, CAT) == pytest.approx(0.38 * 600 / 3600)  # the chief's type
    # the group alone: 0.665 $/h × 600 s = 0.1108 ≤ 0.15 → runs
    assert check_budget(spec, store, [], group, prices=CAT) is None
    # with its chief already running: 0.0633 + 0.1108 = 0.1742 > 0.15 → refused (priced at
    # n1-standard-2 alone it would have been 0.0158 + 0.0633 and let through)
    reason = check_budget(spec, store, running, group, prices=CAT)
    assert reason is not None and "0.1742" in reason, reason


def test_report_cost_uses_each_members_type(tmp_path):
    t0 = datetime(2024, 5, 1, tzinfo=UTC)
    types = ["n1-standard-8", "n1-standard-2", "n1-standard-2", "n1-standard-2"]
    recs = [Result(sweep="roles", run="r1", group="g", trial=1, workload="tf-mnist",
                   params={"name": "tf-mnist", "workers": 2}, metric="train_time_s", value=3600,
                   unit="s", cloud="gcp", machine_type="n1-standard-2", zone="us-central1-a",
                   started_at=t0, ended_at=t0 + timedelta(hours=1))]
    priced = annotate(recs, CAT, member_types=types)
    assert priced[0].cost_usd == pytest.approx(HOURLY)
    assert priced[0].metadata["member_types"] == types
    again = annotate(priced, CAT)  # a re-pricing (report --prices) keeps the per-member types
    assert again[0].cost_usd == pytest.approx(HOURLY)
    store = ResultStore(f"file://{tmp_path}/r")
    store.write_group("r1", "g", priced)
    df = _data.frame(store.read())
    assert set(df["config"]) == {"n1-standard-2 (+1× n1-standard-8)"}
    table = cost.summary(df)
    assert table["cost_usd"].iloc[0] == pytest.approx(HOURLY)
