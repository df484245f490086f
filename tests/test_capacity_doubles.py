"""Capacity that says no, per zone and per call, on each cloud's double, and today's start
path (control.start over the real drivers) recording it as a capacity failure: the group is
answered `unavailable` with kind `capacity`, uses no attempt, its started members are stopped
again, and the start ledger (what `market` counts) types each refused member `capacity`."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

import boto3
import pytest

from spotbench import control
from spotbench.capacity import order_zones, zone_history
from spotbench.auth import Caller
from spotbench.clouds.base import ErrorKind, State
from spotbench.clouds.gcp.gce import GcpCloud
from spotbench.results import ResultStore, StartRecord
from spotbench.spec import load_spec
from tests.clouds.fake_gce import FakeGce
from tests.clouds.test_aws_spot_states import REGION, _sweep as _aws_sweep
from tests.ec2_spot_front import SpotFront
from tests.moto_server import MotoServer

TICK = Caller("scheduler", "scheduler")


def _starts(root: Path, run: str) -> list[StartRecord]:
    files = sorted((root / "runs" / run / "starts").glob("*.json"))
    return [StartRecord.model_validate(json.loads(f.read_text())) for f in files]


# ---- GCE ------------------------------------------------------------------------------
@pytest.fixture
def gcp(tmp_path):
    spec = load_spec({"name": "cap", "cloud": "gcp", "zone": "us-central1-a",
                      "gcp": {"project": "proj"}, "workload": {"name": "osu"},
                      "matrix": {"machine_type": ["n1-standard-4"]}, "trials": 1,
                      "concurrency": 1, "schedule": {"cron": "0 3 * * *"}, "deadline": "30m"})
    gce = FakeGce(project="proj")
    for g in spec.plan():
        for m in g.members:
            gce.add(m.name, "us-central1-a", "TERMINATED", g.member_labels(m))
    gce.start()
    cloud = GcpCloud("proj", zones=["us-central1-a"], api_endpoint=gce.url, timeout_s=30,
                     retry_initial_s=0.05, poll_s=0.05)
    sweep = control.Sweep(spec=spec, cloud=cloud, store=ResultStore(f"file://{tmp_path}"))
    yield gce, sweep, tmp_path
    gce.stop()


@pytest.mark.parametrize("code", ["ZONE_RESOURCE_POOL_EXHAUSTED",
                                  "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"])
def test_capacity_gcp_an_exhausted_zone_is_a_capacity_failure_of_the_start(gcp, code):
    gce, sweep, root = gcp
    gce.exhaust("us-central1-a", code)
    out = control.start(sweep, TICK)
    (group,) = [g.id for g in sweep.groups]
    assert out["started"] == []
    [refused] = out["unavailable"]
    assert refused["group"] == group and refused["error"] == ErrorKind.CAPACITY
    assert all(code in m["detail"] for m in refused["members"].values())
    assert sweep.store.launch_count(out["run"], group) == 0  # no attempt used
    [record] = _starts(root, out["run"])
    assert set(record.errors.values()) == {"capacity"} and len(record.errors) == record.members
    assert record.zone == "us-central1-a"
    assert {gce.status("us-central1-a", m.name) for m in sweep.groups[0].members} == {"TERMINATED"}

    # the ledger now ranks the exhausted zone last among the candidates (spotbench.capacity)
    seen = zone_history(_starts(root, out["run"]), machine_type="n1-standard-4",
                        now=record.at + timedelta(minutes=1))
    assert order_zones(["us-central1-a", "us-central1-b", "us-central1-f"], seen) == [
        "us-central1-b", "us-central1-f", "us-central1-a"]

    gce.replenish("us-central1-a")  # capacity is back: the next tick starts the group
    again = control.start(sweep, TICK)
    assert again["started"] == [group]


def test_capacity_gcp_one_refused_call_fails_the_whole_group_and_stops_the_rest(gcp):
    gce, sweep, root = gcp
    gce.exhaust_calls(1)  # the first start operation, whichever member it is, gets no capacity
    out = control.start(sweep, TICK)
    [refused] = out["unavailable"]
    assert refused["error"] == ErrorKind.CAPACITY and len(refused["members"]) == 1
    assert {i.state for i in sweep.cloud.query(sweep.groups[0].labels)} == {State.STOPPED}
    [record] = _starts(root, out["run"])
    assert list(record.errors.values()) == ["capacity"]
    assert "does not have enough resources available" in next(iter(record.failed.values()))


# ---- EC2 ------------------------------------------------------------------------------
@pytest.fixture
def front(moto_url, monkeypatch):
    MotoServer.fresh_account(moto_url, monkeypatch, REGION)
    spot = SpotFront(moto_url, settle_s=0.5, region=REGION)
    with spot:
        yield spot
    assert spot.errors == []


def test_capacity_aws_an_exhausted_zone_is_a_capacity_failure_of_the_start(front, tmp_path):
    sweep = _aws_sweep(tmp_path, front)
    first = sweep.groups[0]
    front.exhaust(f"{REGION}a")
    out = control.start(sweep, TICK)
    assert out["started"] == []
    refused = {u["group"]: u for u in out["unavailable"]}
    assert refused[first.id]["error"] == ErrorKind.CAPACITY
    assert all("InsufficientInstanceCapacity" in m["detail"]
               for m in refused[first.id]["members"].values())
    assert sweep.store.launch_count(out["run"], first.id) == 0
    records = [r for r in _starts(tmp_path, out["run"]) if r.group == first.id]
    assert records and set(records[0].errors.values()) == {"capacity"}
    assert records[0].zone == f"{REGION}a"
    assert front.capacity_refused and all(a == "StartInstances" for a, _ in front.capacity_refused)

    front.replenish(f"{REGION}a")
    time.sleep(front.settle_s + 0.1)
    again = control.start(sweep, TICK)
    assert again["started"] == [first.id]


def test_capacity_aws_refused_calls_fail_the_group_all_or_nothing(front, tmp_path):
    sweep = _aws_sweep(tmp_path, front)
    first = sweep.groups[0]
    # the batch StartInstances and the driver's first one-by-one retry get no capacity; the
    # second member starts, so the group is stopped again and answered `capacity`
    front.exhaust_calls(2)
    out = control.start(sweep, TICK)
    refused = {u["group"]: u for u in out["unavailable"]}
    assert refused[first.id]["error"] == ErrorKind.CAPACITY
    assert len(refused[first.id]["members"]) == 1
    time.sleep(front.settle_s + 0.1)
    assert {i.state for i in sweep.cloud.query(first.labels)} <= {State.STOPPED, State.STOPPING}


def test_capacity_aws_run_instances_placed_in_an_exhausted_zone_gets_ec2s_error(front):
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=front.url)
    front.exhaust(f"{REGION}b")
    with pytest.raises(ec2.exceptions.ClientError) as err:
        ec2.run_instances(ImageId=MotoServer.any_image(ec2), InstanceType="g4dn.xlarge",
                          MinCount=1, MaxCount=1, Placement={"AvailabilityZone": f"{REGION}b"})
    assert err.value.response["Error"]["Code"] == "InsufficientInstanceCapacity"
    assert "capacity in the Availability Zone you requested (us-east-1b)" in str(err.value)
    ok = ec2.run_instances(ImageId=MotoServer.any_image(ec2), InstanceType="g4dn.xlarge",
                           MinCount=1, MaxCount=1, Placement={"AvailabilityZone": f"{REGION}c"})
    assert ok["Instances"][0]["Placement"]["AvailabilityZone"] == f"{REGION}c"


def test_capacity_aws_an_open_spot_request_in_an_exhausted_zone_is_capacity_not_available(front):
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=front.url)
    out = ec2.run_instances(
        ImageId=MotoServer.any_image(ec2), InstanceType="g4dn.xlarge", MinCount=1, MaxCount=1,
        Placement={"AvailabilityZone": f"{REGION}a"},
        InstanceMarketOptions={"MarketType": "spot", "SpotOptions": {
            "SpotInstanceType": "persistent", "InstanceInterruptionBehavior": "stop"}})
    instance = out["Instances"][0]["InstanceId"]
    request = front.request_of(instance)
    assert request is not None and request.zone == f"{REGION}a"
    ec2.terminate_instances(InstanceIds=[instance])  # the persistent request re-opens

    def status() -> tuple[str, str]:
        [r] = ec2.describe_spot_instance_requests(SpotInstanceRequestIds=[request.id])[
            "SpotInstanceRequests"]
        return r["State"], r["Status"]["Code"]

    assert status() == ("open", "instance-terminated-by-user")
    front.exhaust(f"{REGION}a")
    assert status() == ("open", "capacity-not-available")
