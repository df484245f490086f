"""What EC2 holds for the members the AWS program declares: each member's declared inputs
go through the provider's argument → API-call mapping (`tests/infra/aws_provider_api.py`,
from terraform-provider-aws's source), the call goes to moto_server, and the instance is read
back with `DescribeInstances` / `DescribeVolumes`. A declared argument the provider drops
never reaches the instance, whatever the mocks recorded."""

from __future__ import annotations

import boto3
import pytest

from tests.infra import aws_provider_api as provider
from tests.infra.test_aws import sweep
from tests.moto_server import MotoServer

REGION = "eu-west-1"


@pytest.fixture
def ec2(moto_url, monkeypatch):
    MotoServer.fresh_account(moto_url, monkeypatch, REGION)
    return boto3.client("ec2", region_name=REGION, endpoint_url=moto_url)


def _account(ec2, moto_url: str) -> dict[str, str]:
    """The network the declared ids stand for, made in moto: a VPC, the subnet, a group."""
    vpc = ec2.create_vpc(CidrBlock="10.43.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.43.1.0/24",
                               AvailabilityZone=f"{REGION}a")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="g", Description="g", VpcId=vpc)["GroupId"]
    return {"subnet": subnet, "group": group, "image": MotoServer.any_image(ec2)}


def _as_deployed(inputs: dict, real: dict[str, str], iam) -> dict:
    """The declared inputs with the mocks' ids replaced by the resources made in moto."""
    out = dict(inputs)
    out.update(ami=real["image"], subnetId=real["subnet"], vpcSecurityGroupIds=[real["group"]])
    profile = inputs.get("iamInstanceProfile")
    if profile:
        try:
            iam.create_instance_profile(InstanceProfileName=profile)
        except iam.exceptions.EntityAlreadyExistsException:
            pass
    return out


def _deploy(ec2, moto_url, mocks) -> dict[str, dict]:
    """Every declared member sent to EC2 as the provider would: name → described instance."""
    real = _account(ec2, moto_url)
    iam = boto3.client("iam", region_name=REGION, endpoint_url=moto_url)
    out = {}
    for type_ in (provider.INSTANCE, provider.SPOT_REQUEST):
        for res in mocks.of_type(type_):
            instance_id = provider.launch(ec2, type_, _as_deployed(res.inputs, real, iam))
            described = ec2.describe_instances(InstanceIds=[instance_id])
            out[res.name] = described["Reservations"][0]["Instances"][0]
    return out


@pytest.mark.fidelity
@pytest.mark.security
@pytest.mark.parametrize("provisioning", ["spot", "standard"])
def test_aws_members_hold_imdsv2_and_tagged_volumes_on_what_ec2_holds(declare, ec2, moto_url,
                                                                       provisioning):
    """docs/aws.md and docs/security.md say IMDSv2 is required (hop limit 2 for the
    container). With an `aws.ec2.SpotInstanceRequest` the provider dropped `metadataOptions`
    and `volumeTags` (the spot launch specification has no field for them): the spot members
    ran with IMDSv1 allowed and untagged disks."""
    over = {} if provisioning == "spot" else {"provisioning": "standard"}
    _, mocks = sweep(declare, **over)
    held = _deploy(ec2, moto_url, mocks)
    assert len(held) == 4
    for name, inst in held.items():
        metadata = inst["MetadataOptions"]
        assert (metadata["HttpTokens"], metadata["HttpEndpoint"]) == ("required", "enabled"), name
        assert metadata["HttpPutResponseHopLimit"] == 2, name
        tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
        assert tags["managed-by"] == "spotbench" and tags["spotbench-sweep"] == "ax", name
        volumes = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id",
                                                 "Values": [inst["InstanceId"]]}])["Volumes"]
        assert volumes, name
        for volume in volumes:
            vtags = {t["Key"]: t["Value"] for t in volume.get("Tags", [])}
            assert vtags.get("spotbench-sweep") == "ax", (name, vtags)
        assert inst.get("InstanceLifecycle") == ("spot" if provisioning == "spot" else None), name


@pytest.mark.fidelity
def test_aws_provider_model_drops_what_the_spot_request_cannot_carry():
    """The model itself, against the provider's source: a spot request's launch
    specification never carries metadata options, the shutdown behaviour or volume tags; an
    instance's `RunInstances` carries all three and its spot market options."""
    member = {"ami": "ami-1", "instanceType": "c5n.large", "subnetId": "subnet-1",
              "privateIp": "10.0.0.10", "associatePublicIpAddress": False,
              "vpcSecurityGroupIds": ["sg-1"], "metadataOptions": {"httpTokens": "required",
                                                                    "httpEndpoint": "enabled"},
              "volumeTags": {"a": "b"}, "instanceInitiatedShutdownBehavior": "stop",
              "tags": {"a": "b"}, "placementGroup": "pg"}
    op, call = provider.api_call(provider.SPOT_REQUEST, {
        **member, "spotType": "persistent", "instanceInterruptionBehavior": "stop"})
    assert op == "RequestSpotInstances"
    spec = call["LaunchSpecification"]
    assert not {"MetadataOptions", "InstanceInitiatedShutdownBehavior", "Placement"} & set(spec)
    assert [s["ResourceType"] for s in call["TagSpecifications"]] == ["spot-instances-request"]
    op, call = provider.api_call(provider.INSTANCE, {**member, "instanceMarketOptions": {
        "marketType": "spot", "spotOptions": {"spotInstanceType": "persistent",
                                              "instanceInterruptionBehavior": "stop"}}})
    assert op == "RunInstances"
    assert call["MetadataOptions"]["HttpTokens"] == "required"
    assert call["InstanceInitiatedShutdownBehavior"] == "stop"
    assert "Placement" not in call  # a stop-on-interruption spot instance takes no placement group
    assert {s["ResourceType"] for s in call["TagSpecifications"]} == {"instance", "volume"}
    assert call["NetworkInterfaces"][0]["PrivateIpAddress"] == "10.0.0.10"
    with pytest.raises(NotImplementedError, match="does not cover"):
        provider.api_call(provider.INSTANCE, {**member, "cpuOptions": {"coreCount": 2}})


@pytest.mark.fidelity
def test_aws_preview_shows_imdsv2_only_where_the_api_call_carries_it(declare):
    """`spotbench preview` shows a member's IMDS token setting and spot market; a spot
    request's declared `metadataOptions` (which never reached EC2) is not shown as held."""
    from spotbench.preview import Declared, key_properties

    _, mocks = sweep(declare)
    for member in mocks.of_type(provider.INSTANCE):
        shown = key_properties(member)
        assert shown["imdsTokens"] == "required" and shown["market"] == "spot persistent stop"
    dropped = Declared(provider.SPOT_REQUEST, "old", {"metadataOptions": {"httpTokens": "required"}},
                       True, frozenset())
    assert "imdsTokens" not in key_properties(dropped)
