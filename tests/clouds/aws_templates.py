"""The launch templates (and members' subnets) a `lifecycle: created` AWS stack declares,
made in moto for driver tests and the start-latency bench: per member and candidate zone,
tagged as `infra/aws/templates.py` tags them (tests/infra/test_aws_created.py checks the
program's side)."""

from __future__ import annotations

from typing import Any

from spotbench.clouds.aws.fleet import MARKET_TAG, MEMBER_TAG, SUBNET_TAG, ZONE_TAG
from spotbench.plan import sweep_labels
from spotbench.spec import SweepSpec
from tests.moto_server import MotoServer


def _tags(kind: str, tags: dict[str, str]) -> dict[str, Any]:
    return {"ResourceType": kind, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}


def declare_templates(ec2: Any, spec: SweepSpec, zones: list[str],
                      profile: str | None = None) -> dict[str, str]:
    """A VPC with a members' subnet per zone and every member's template in each (`profile`:
    the members' instance profile); zone → subnet id. The subnets and security groups carry
    the sweep's tags, as the stack's `default_tags` put them."""
    stack = {**spec.labels, **sweep_labels(spec.name)}
    vpc = ec2.create_vpc(CidrBlock="10.43.0.0/16")["Vpc"]["VpcId"]
    subnets = {z: ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.43.{n + 1}.0/24",
                                    AvailabilityZone=z,
                                    TagSpecifications=[_tags("subnet", stack)])["Subnet"]["SubnetId"]
               for n, z in enumerate(zones)}
    image = MotoServer.any_image(ec2)
    for group in spec.plan():
        sg = ec2.create_security_group(GroupName=f"members-{group.id}", VpcId=vpc,
                                       Description="members",
                                       TagSpecifications=[_tags("security-group", stack)])["GroupId"]
        for n, m in enumerate(group.members):
            tags = {**spec.labels, **group.member_labels(m), "Name": m.name}
            for zone, subnet in subnets.items():
                ec2.create_launch_template(
                    LaunchTemplateName=f"{m.name}-{zone}",
                    LaunchTemplateData={
                        "ImageId": image, "InstanceType": m.machine_type or group.machine_type,
                        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
                        "InstanceInitiatedShutdownBehavior": "terminate",
                        "NetworkInterfaces": [{"DeviceIndex": 0, "SubnetId": subnet,
                                               "Groups": [sg], "AssociatePublicIpAddress": False,
                                               "DeleteOnTermination": True,
                                               "PrivateIpAddress": f"10.43.{list(subnets).index(zone) + 1}.{10 + n}"}],
                        "TagSpecifications": [_tags("instance", tags), _tags("volume", tags)],
                        **({"IamInstanceProfile": {"Name": profile}} if profile else {})},
                    TagSpecifications=[_tags("launch-template", {
                        **tags, MEMBER_TAG: m.name, ZONE_TAG: zone, SUBNET_TAG: subnet,
                        MARKET_TAG: "spot" if m.spot else "on-demand"})])  # its role's
    return subnets
