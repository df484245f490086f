"""The `aws` driver against a real moto_server on 127.0.0.1 (started and stopped here).

moto does not simulate EC2 capacity errors, so the one capacity test injects
`InsufficientInstanceCapacity` for a single instance through a botocore `before-call`
hook on that call; everything else goes to moto.
"""

from __future__ import annotations

import boto3
import pytest

from spotbench.clouds import get_cloud
from spotbench.clouds.aws.ec2 import AwsCloud, AwsCloudError
from spotbench.clouds.base import State
from tests.moto_server import MotoServer

REGION = "us-east-1"
SWEEP = {"managed-by": "spotbench", "spotbench-sweep": "osu-aws"}


@pytest.fixture
def aws_env(moto_url, monkeypatch):
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    MotoServer.reset_url(moto_url)
    return moto_url


@pytest.fixture
def ec2(aws_env):
    return boto3.client("ec2", region_name=REGION, endpoint_url=aws_env)


@pytest.fixture
def cloud(aws_env):
    return AwsCloud(REGION, endpoint_url=aws_env, wait_timeout_s=10, poll_s=1)


def launch(ec2, group: str, role: str, *, spot: bool = True) -> str:
    """One member the way the Pulumi stack declares it: tagged, persistent spot, stopped."""
    image = MotoServer.any_image(ec2)
    extra = {}
    if spot:
        extra["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": {
                "SpotInstanceType": "persistent",
                "InstanceInterruptionBehavior": "stop",
            },
        }
    tags = {**SWEEP, "spotbench-group": group, "spotbench-role": role, "Name": f"{group}-{role}"}
    out = ec2.run_instances(
        ImageId=image,
        InstanceType="c5n.large",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[{
            "ResourceType": "instance",
            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
        }],
        **extra,
    )
    instance_id = out["Instances"][0]["InstanceId"]
    ec2.stop_instances(InstanceIds=[instance_id])
    return instance_id


def count_calls(cloud: AwsCloud, operation: str) -> list[list[str]]:
    calls: list[list[str]] = []
    cloud.ec2.meta.events.register(
        f"provide-client-params.ec2.{operation}",
        lambda params, **_: calls.append(list(params["InstanceIds"])),
    )
    return calls


def test_get_cloud_builds_the_aws_driver(aws_env):
    assert isinstance(get_cloud("aws", region=REGION, endpoint_url=aws_env), AwsCloud)


def test_query_selects_by_tag_and_reports_instance_ids(ec2, cloud):
    a1 = launch(ec2, "g-a", "launcher")
    a2 = launch(ec2, "g-a", "peer")
    b1 = launch(ec2, "g-b", "launcher")
    gone = launch(ec2, "g-a", "peer")
    ec2.terminate_instances(InstanceIds=[gone])

    group_a = cloud.query({**SWEEP, "spotbench-group": "g-a"})
    assert sorted(i.name for i in group_a) == sorted([a1, a2])  # terminated one excluded
    assert {i.state for i in group_a} == {State.STOPPED}
    first = next(i for i in group_a if i.name == a1)
    assert first.labels["Name"] == "g-a-launcher"
    assert first.group() == "g-a"
    assert first.zone and first.zone.startswith(REGION)
    assert first.ip
    assert {i.name for i in cloud.query(SWEEP)} == {a1, a2, b1}
    assert cloud.query({"spotbench-sweep": "another"}) == []


def test_start_and_stop_by_tag_are_idempotent(ec2, cloud):
    a1, a2 = launch(ec2, "g-a", "launcher"), launch(ec2, "g-a", "peer")
    b1 = launch(ec2, "g-b", "launcher")
    starts, stops = count_calls(cloud, "StartInstances"), count_calls(cloud, "StopInstances")
    group = {**SWEEP, "spotbench-group": "g-a"}

    started = cloud.start(group)
    assert {i.name: i.state for i in started} == {a1: State.RUNNING, a2: State.RUNNING}
    assert all(i.detail == "" for i in started)
    assert cloud.query({**SWEEP, "spotbench-group": "g-b"})[0].state == State.STOPPED
    assert starts == [sorted([a1, a2])]

    again = cloud.start(group)  # already running: success, no API call
    assert {i.state for i in again} == {State.RUNNING}
    assert starts == [sorted([a1, a2])]

    stopped = cloud.stop(group)
    assert {i.name: i.state for i in stopped} == {a1: State.STOPPED, a2: State.STOPPED}
    assert cloud.stop(group)[0].state == State.STOPPED
    assert stops == [sorted([a1, a2])]
    assert b1 not in {i.name for i in stopped}


def test_capacity_error_on_one_instance_is_reported_not_raised(ec2, cloud):
    a1, a2 = launch(ec2, "g-a", "launcher"), launch(ec2, "g-a", "peer")

    def no_capacity(params, **_):  # params: the serialized request; its body names the ids
        if a2 in str(params["body"]):
            error = {"Code": "InsufficientInstanceCapacity",
                     "Message": "We currently do not have sufficient c5n.large capacity."}
            return _FakeHttp(500), {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 500}}
        return None  # the real call goes to moto

    cloud.ec2.meta.events.register("before-call.ec2.StartInstances", no_capacity)
    result = {i.name: i for i in cloud.start({**SWEEP, "spotbench-group": "g-a"})}

    assert result[a1].state == State.RUNNING and result[a1].detail == ""
    assert result[a2].state == State.STOPPED
    assert "InsufficientInstanceCapacity" in result[a2].detail
    assert "next tick" in result[a2].detail
    assert result[a2].error == "capacity" and result[a1].error is None


def test_permission_errors_raise_with_a_hint(ec2, cloud):
    launch(ec2, "g-a", "launcher")

    def denied(params, **_):
        error = {"Code": "UnauthorizedOperation", "Message": "You are not authorized."}
        return _FakeHttp(403), {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 403}}

    cloud.ec2.meta.events.register("before-call.ec2.StartInstances", denied)
    with pytest.raises(AwsCloudError, match="UnauthorizedOperation.*managed-by=spotbench"):
        cloud.start(SWEEP)


def test_terminate_cancels_persistent_spot_requests_and_is_a_noop_when_gone(ec2, cloud):
    a1 = launch(ec2, "g-a", "launcher")
    od = launch(ec2, "g-a", "peer", spot=False)
    image = MotoServer.any_image(ec2)
    request = ec2.request_spot_instances(
        Type="persistent",
        InstanceInterruptionBehavior="stop",
        LaunchSpecification={"ImageId": image, "InstanceType": "c5n.large"},
    )["SpotInstanceRequests"][0]["SpotInstanceRequestId"]

    # Real EC2 names the request on the instance; moto leaves it out, so add it here.
    def link_request(parsed, **_):
        for reservation in parsed.get("Reservations", []):
            for instance in reservation["Instances"]:
                if instance["InstanceId"] == a1:
                    instance["SpotInstanceRequestId"] = request

    cloud.ec2.meta.events.register("after-call.ec2.DescribeInstances", link_request)
    cancels = []
    cloud.ec2.meta.events.register(
        "provide-client-params.ec2.CancelSpotInstanceRequests",
        lambda params, **_: cancels.append(params["SpotInstanceRequestIds"]),
    )
    done = cloud.terminate({**SWEEP, "spotbench-group": "g-a"})

    assert {i.name: i.state for i in done} == {a1: State.TERMINATED, od: State.TERMINATED}
    assert cancels == [[request]]
    left = ec2.describe_spot_instance_requests()["SpotInstanceRequests"]  # moto drops cancelled
    assert all(r["State"] == "cancelled" for r in left if r["SpotInstanceRequestId"] == request)
    assert cloud.query(SWEEP) == []
    assert cloud.terminate(SWEEP) == []


class _FakeHttp:
    def __init__(self, status_code: int) -> None:
        self.status_code = status_code
        self.headers: dict[str, str] = {}
        self.content = b""


def test_a_spot_reclaim_is_typed_preempted_and_a_stop_is_not(ec2, cloud):
    """EC2 says why a stopped instance stopped (`StateReason`): a spot interruption
    (`Server.SpotInstanceShutdown`) is `preempted`, so control retries the group and status
    names it; a stop call or the workload powering off (`Client.UserInitiatedShutdown`,
    what moto reports) is no error; a running instance's old reason is ignored.
    (moto never interrupts: the reclaim's answer is edited in, after the call.)"""
    from spotbench.clouds.base import ErrorKind
    from spotbench.control import broken

    reclaimed, stopped, running = (launch(ec2, "g-a", r) for r in ("launcher", "peer", "peer2"))
    ec2.start_instances(InstanceIds=[running])

    def reclaim(parsed, **_):
        for reservation in parsed.get("Reservations", []):
            for inst in reservation["Instances"]:
                if inst["InstanceId"] in (reclaimed, running):
                    inst["StateReason"] = {"Code": "Server.SpotInstanceShutdown",
                                           "Message": "Server.SpotInstanceShutdown: Spot interruption"}

    cloud.ec2.meta.events.register("after-call.ec2.DescribeInstances",
                                   lambda parsed, **kw: reclaim(parsed))
    got = {i.name: i for i in cloud.query({**SWEEP, "spotbench-group": "g-a"})}
    assert got[reclaimed].state == State.STOPPED and got[reclaimed].error == ErrorKind.PREEMPTED
    assert got[stopped].state == State.STOPPED and got[stopped].error is None
    assert got[running].state == State.RUNNING and got[running].error is None
    assert broken(list(got.values()))
