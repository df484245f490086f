"""`lifecycle: created` on AWS under Pulumi mocks: a members' subnet per candidate zone and
per member and zone a launch template carrying what an instance carries today — and no
instances (issue #26). The driver's side is tests/clouds/test_aws_capacity.py."""

from __future__ import annotations

import base64
import ipaddress

import pytest
import yaml

from infra.aws.network import zone_cidrs
from spotbench.clouds.aws.identity import member_role_name
from spotbench.clouds.aws.fleet import MARKET_TAG, MEMBER_TAG, SUBNET_TAG, ZONE_TAG
from tests.infra.test_aws import INSTANCE, SPOT, sweep

TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SUBNET = "aws:ec2/subnet:Subnet"
ZONES = ["eu-west-1b", "eu-west-1a"]


def created(declare, **over):
    data = {"zone": None, "zones": ZONES, "lifecycle": "created",
            "matrix": {"machine_type": ["g4dn.xlarge"]}, **over}
    return sweep(declare, **data)


def test_capacity_created_lifecycle_declares_templates_per_member_and_zone_not_instances(declare):
    spec, mocks = created(declare)
    assert not mocks.of_type(INSTANCE) and not mocks.of_type(SPOT)
    members = [m for g in spec.plan() for m in g.members]
    templates = mocks.of_type(TEMPLATE)
    assert len(templates) == len(members) * len(ZONES) == 8
    subnets = {s.inputs["availabilityZone"]: s for s in mocks.of_type(SUBNET)
               if s.inputs["tags"]["Name"].startswith("ax-private")}
    assert sorted(subnets) == sorted(ZONES)
    for t in templates:
        i, tags = t.inputs, t.inputs["tags"]
        zone, member = tags[ZONE_TAG], tags[MEMBER_TAG]
        assert t.inputs["name"] == f"{member}-{zone}"
        assert tags[MARKET_TAG] == "spot" and tags[SUBNET_TAG] == f"{subnets[zone].name}-id"
        # what reaches the instances: TagSpecifications (default_tags never do)
        specs = {s["resourceType"]: s["tags"] for s in i["tagSpecifications"]}
        assert set(specs) == {"instance", "volume"}
        for kind_tags in specs.values():
            assert kind_tags["Name"] == member  # spotbench.auth.instance.group_of checks it
            assert kind_tags["spotbench-group"] in member and kind_tags["managed-by"] == "spotbench"
            assert kind_tags["spotbench-sweep"] == "ax"
        assert i["instanceType"] == "g4dn.xlarge" and i["imageId"] == "ami-0mock"
        assert i["iamInstanceProfile"] == {"name": member_role_name("ax", "eu-west-1")}
        assert i["metadataOptions"]["httpTokens"] == "required"
        assert i["instanceInitiatedShutdownBehavior"] == "terminate"  # the deadman leaves nothing
        assert "instanceMarketOptions" not in i  # the fleet request sets the market
        [nic] = i["networkInterfaces"]
        assert nic["subnetId"] == f"{subnets[zone].name}-id"
        assert nic["associatePublicIpAddress"] == "false"
        assert ipaddress.ip_address(nic["privateIpAddress"]) in ipaddress.ip_network(
            subnets[zone].inputs["cidrBlock"])
        ebs = i["blockDeviceMappings"][0]["ebs"]
        assert ebs["encrypted"] == "true" and ebs["deleteOnTermination"] == "true"
        doc = yaml.safe_load(base64.b64decode(i["userData"]).decode().removeprefix("#cloud-config\n"))
        assert "power_state" not in doc  # its first boot is the run
        assert "systemctl start --no-block spotbench.service" in doc["runcmd"]
        env = next(f["content"] for f in doc["write_files"] if f["path"].endswith("/env"))
        assert zone in env


def test_capacity_zone_subnets_do_not_overlap_and_fit_the_vpc():
    cidrs = zone_cidrs("10.43.0.0/16", "10.43.1.0/24", ["a", "b", "c"])
    nets = [ipaddress.ip_network(c) for c in cidrs.values()]
    assert cidrs["a"] == "10.43.1.0/24"
    assert not any(x.overlaps(y) for n, x in enumerate(nets) for y in nets[n + 1:])
    assert not any(n.overlaps(ipaddress.ip_network("10.43.0.0/28")) for n in nets)  # NAT
    with pytest.raises(Exception, match="no room"):
        zone_cidrs("10.43.0.0/23", "10.43.1.0/24", ["a", "b", "c"])


def test_capacity_created_lifecycle_needs_candidate_zones(declare):
    with pytest.raises(Exception, match="needs candidate zones"):
        created(declare, zones=None)
