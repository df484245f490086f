"""EC2's spot request state machine (tests/ec2_spot_front.py in front of moto_server) and
what the driver and control make of it: a stop that is still settling is waited for, an
interrupted member is left to EC2; neither is a capacity failure."""

from __future__ import annotations

import time
from pathlib import Path

import boto3
import pytest

from spotbench import control
from spotbench.auth import Caller
from spotbench.clouds.base import ErrorKind, State
from spotbench.clouds.aws.ec2 import AwsCloud
from spotbench.results import ResultStore
from spotbench.spec import load_spec
from tests.ec2_spot_front import SpotFront
from tests.moto_server import MotoServer

REGION = "us-east-1"
SCHEDULER = Caller("scheduler", "tick")


@pytest.fixture
def front(moto_url, monkeypatch):
    MotoServer.fresh_account(moto_url, monkeypatch, REGION)
    spot = SpotFront(moto_url, settle_s=1.5, region=REGION)
    with spot:
        yield spot
    assert spot.errors == []


def _launch(ec2, labels: dict[str, str]) -> str:
    """A member as the program declares it: RunInstances with persistent spot options that
    stop on interruption; its creation boot powers it off (a stop, settled here)."""
    tags = [{"Key": k, "Value": v} for k, v in labels.items()]
    out = ec2.run_instances(
        ImageId=MotoServer.any_image(ec2), InstanceType="c5n.large", MinCount=1, MaxCount=1,
        InstanceMarketOptions={"MarketType": "spot", "SpotOptions": {
            "SpotInstanceType": "persistent", "InstanceInterruptionBehavior": "stop"}},
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
    instance = out["Instances"][0]["InstanceId"]
    ec2.stop_instances(InstanceIds=[instance])
    return instance


def _sweep(tmp_path: Path, front: SpotFront) -> control.Sweep:
    spec = load_spec({"name": "sx", "cloud": "aws", "region": REGION, "zone": f"{REGION}a",
                      "workload": {"name": "osu"}, "matrix": {"machine_type": ["c5n.large"]},
                      "trials": 2, "concurrency": 1,
                      "schedule": {"cron": "0 3 * * *"}})
    groups = spec.plan()
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=front.url)
    for group in groups:
        for member in group.members:
            _launch(ec2, {**group.member_labels(member), "Name": member.name})
    time.sleep(front.settle_s + 0.1)  # the creation boot's power-off has settled
    cloud = AwsCloud(REGION, endpoint_url=front.url, wait_timeout_s=10, poll_s=0.5)
    return control.Sweep(spec=spec, cloud=cloud, store=ResultStore(f"file://{tmp_path}"),
                         groups=groups)


@pytest.mark.fidelity
def test_aws_a_start_right_after_a_stop_waits_for_the_spot_request_to_be_disabled(front):
    """After a stop the request is `active` a moment longer; EC2 answers StartInstances
    with IncorrectSpotRequestState until it is `disabled`. The driver took that for a
    capacity failure: the group did not start and waited for the next day's tick."""
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=front.url)
    labels = {"managed-by": "spotbench", "spotbench-sweep": "sx", "spotbench-group": "g"}
    ids = [_launch(ec2, {**labels, "Name": n}) for n in ("g-l0", "g-p0")]
    time.sleep(front.settle_s + 0.1)
    cloud = AwsCloud(REGION, endpoint_url=front.url, wait_timeout_s=10, poll_s=0.5)
    assert {i.state for i in cloud.start(labels)} == {State.RUNNING}
    assert {i.state for i in cloud.stop(labels)} == {State.STOPPED}

    again = cloud.start(labels)  # the done of the last attempt, then the next start

    assert front.refused and front.refused[0][0] == "StartInstances"  # EC2 said not yet
    assert {i.name: (i.state, i.error) for i in again} == {
        i: (State.RUNNING, None) for i in ids}


@pytest.mark.fidelity
def test_aws_an_interrupted_member_is_left_to_ec2_and_is_no_capacity_failure(front, tmp_path):
    """Only EC2 restarts a spot instance it stopped. The start tick must not ask (it was
    refused and counted as a stockout); the group waits for EC2 without using a retry, the
    slot goes to the next group, and once EC2 has restarted the member (it powers itself
    off outside a run) the group starts."""
    sweep = _sweep(tmp_path, front)
    first, second = sweep.groups
    out = control.start(sweep, SCHEDULER)
    assert out["started"] == [first.id]
    launcher = next(i for i in sweep.cloud.query(first.labels)
                    if i.labels["spotbench-role"] == "launcher")
    reclaimed = launcher.name
    front.interrupt(reclaimed)
    out = control.stop(sweep, SCHEDULER, {"groups": [first.id], "reason": "broken"})
    assert out["started"] == [second.id]
    time.sleep(front.settle_s + 0.1)

    # the second group's slot frees up: the first is tried again while EC2 still holds it
    out = control.stop(sweep, SCHEDULER, {"groups": [second.id], "reason": "done"})

    [waiting] = [u for u in out["unavailable"] if u["group"] == first.id]
    assert waiting["error"] == "waiting"
    assert "only EC2 restarts it" in waiting["members"][launcher.member]["detail"]
    assert not any(reclaimed in ids for _, ids in front.refused)  # never asked
    assert sweep.store.launch_count(out["run"], first.id) == 1  # the first attempt only
    assert out["started"] == [second.id]  # the slot went to the other pending group
    assert all(i.state == State.STOPPED for i in sweep.cloud.query(first.labels))

    front.restore(reclaimed)  # capacity is back: EC2 starts it; no run for it: it powers off
    boto3.client("ec2", region_name=REGION, endpoint_url=front.url).stop_instances(
        InstanceIds=[reclaimed])
    again = sweep.cloud.start(first.labels)  # right away: the stop is still settling
    assert {i.state for i in again} == {State.RUNNING}
    assert {i.error for i in again} == {None}


@pytest.mark.fidelity
def test_aws_a_settling_stop_that_outlasts_the_wait_is_waiting_not_capacity(front):
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=front.url)
    labels = {"managed-by": "spotbench", "spotbench-sweep": "sx", "spotbench-group": "h"}
    member = _launch(ec2, {**labels, "Name": "h-l0"})
    front.settle_s = 30  # EC2 takes longer than the driver waits
    cloud = AwsCloud(REGION, endpoint_url=front.url, wait_timeout_s=1, poll_s=0.5)
    [inst] = cloud.start(labels)
    assert (inst.name, inst.state, inst.error) == (member, State.STOPPED, ErrorKind.WAITING)
    assert "waiting for EC2" in inst.detail


@pytest.mark.fidelity
def test_aws_teardown_cancels_spot_requests_before_the_stack_is_destroyed(front):
    """`pulumi destroy` deletes each member `Instance` by terminating it; the provider does
    not cancel its persistent request first (hashicorp/terraform-provider-aws#38142), so EC2
    opened the request again and would launch a replacement into the subnet being deleted.
    Teardown cancels the sweep's requests before it destroys the stack."""
    from spotbench.clouds.aws.orphans import AwsSweeper
    from spotbench.ops.teardown import teardown

    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=front.url)
    labels = {"managed-by": "spotbench", "spotbench-sweep": "sx", "spotbench-group": "t"}
    members = [_launch(ec2, {**labels, "Name": n}) for n in ("t-l0", "t-p0")]
    other = _launch(ec2, {"managed-by": "spotbench", "spotbench-sweep": "other", "Name": "o"})
    time.sleep(front.settle_s + 0.1)
    ec2.start_instances(InstanceIds=[members[0]])  # one still running, one stopped

    def pulumi_destroy(yes: bool, echo) -> str:  # the provider's delete: terminate only
        ec2.terminate_instances(InstanceIds=members)
        return "destroyed"

    sweeper = AwsSweeper(regions=[REGION], endpoint_url=front.url)
    report = teardown("sx", sweeper, yes=True, destroy_stack=pulumi_destroy, echo=lambda _: None)

    assert not report.failed, report.failed
    assert front.relaunched == []  # no request of the sweep was open when its instance went
    assert {front.request_of(i).state for i in members} == {"cancelled"}
    assert front.request_of(other).state == "disabled"  # another sweep's: untouched
