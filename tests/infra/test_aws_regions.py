"""Candidate zones in several regions on AWS, under Pulumi mocks (issue #26): each candidate
region other than the home one gets an explicit `aws.Provider(region=…)` and, through it, a
VPC, a members' subnet per candidate zone, the groups' security groups and launch
templates; the boot documents still name the home region; the fleet policy names each
candidate region and no other. A one-region sweep declares what it declared before."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import yaml

from infra.preview import RecordingMocks, install, run_declarations
from spotbench.clouds.aws.fleet import ZONE_TAG
from spotbench.spec import load_spec
from tests.infra.conftest import MOCKS, snapshot
from tests.infra.test_aws import env_of
from tests.iam.policy import Authorization, evaluate

PROVIDER = "pulumi:providers:aws"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
HOME, OTHER = "eu-west-1", "us-east-1"
ZONES = [f"{HOME}b", f"{OTHER}a", f"{OTHER}b"]
BEFORE = json.loads((Path(__file__).parent / "aws_one_region_resources.json").read_text())


class ProviderMocks(RecordingMocks):
    """The recorder, plus the provider each resource and each invoke went through."""

    def __init__(self) -> None:
        super().__init__()
        self.provider_of: dict[str, str] = {}
        self.invoked: list[tuple[str, str]] = []

    def new_resource(self, args: Any) -> tuple[str, dict[str, Any]]:
        self.provider_of[args.name] = args.provider or ""
        return super().new_resource(args)

    def call(self, args: Any):
        self.invoked.append((args.token, args.provider or ""))
        return super().call(args)

    def region_of(self, name: str) -> str:
        """The region of the provider resource `name` was declared through."""
        ref = self.provider_of[name].rsplit("::", 1)[-1]
        [provider] = [d for d in self.of_type(PROVIDER) if f"{d.name}-id" == ref]
        return provider.inputs["region"]


def _spec(**over):
    data = {"name": "ax", "cloud": "aws", "region": HOME, "zones": ZONES, "lifecycle": "created",
            "workload": {"name": "osu"}, "matrix": {"machine_type": ["g4dn.xlarge"]},
            "trials": 2, "placement": "none", "results": "s3://res-bucket/runs/ax",
            "image": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/spotbench/osu:1",
            "schedule": {"cron": "0 3 * * 1-5", "timezone": "Europe/Berlin"},
            "deadline": "45m", **over}
    return load_spec(data)


def _declare(spec) -> ProviderMocks:
    from infra.aws import AwsSweep, AwsSweepArgs

    mocks = ProviderMocks()
    install(mocks, stack="test")
    try:
        run_declarations(lambda: AwsSweep(spec.name, AwsSweepArgs(spec=spec)))
    finally:
        install(MOCKS, stack="test")
    return mocks


def test_capacity_each_extra_region_gets_its_provider_network_and_templates():
    spec = _spec()
    mocks = _declare(spec)
    providers = {d.name: d.inputs["region"] for d in mocks.of_type(PROVIDER)}
    assert providers == {"ax-aws": HOME, f"ax-aws-{OTHER}": OTHER}
    vpcs = {d.name: mocks.region_of(d.name) for d in mocks.of_type("aws:ec2/vpc:Vpc")}
    assert vpcs == {"ax-net-vpc": HOME, f"ax-net-{OTHER}-vpc": OTHER}
    cidrs = {d.inputs["cidrBlock"] for d in mocks.of_type("aws:ec2/vpc:Vpc")}
    assert cidrs == {spec.aws.vpc_cidr}  # the same plan in each region: they never peer
    private = {d.inputs["availabilityZone"]: mocks.region_of(d.name)
               for d in mocks.of_type("aws:ec2/subnet:Subnet")
               if d.inputs["tags"]["Name"].startswith("ax-private")}
    assert private == {ZONES[0]: HOME, ZONES[1]: OTHER, ZONES[2]: OTHER}
    members = [m for g in spec.plan() for m in g.members]
    templates = mocks.of_type(TEMPLATE)
    assert len(templates) == len(members) * len(ZONES)
    for t in templates:  # each through its zone's region's provider
        zone = t.inputs["tags"][ZONE_TAG]
        assert mocks.region_of(t.name) == private[zone]
        sg = t.inputs["networkInterfaces"][0]["securityGroups"][0]
        assert mocks.region_of(sg.removesuffix("-id")) == private[zone]  # that region's SG
        # the boot names the home region: S3, the function URL and its keys live there
        doc = base64.b64decode(t.inputs["userData"]).decode()
        env = env_of(doc)
        assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == HOME
        fetch = next(f["content"] for f in yaml.safe_load(doc.removeprefix("#cloud-config\n"))[
            "write_files"] if f["path"].endswith("fetch-keys"))
        assert f"aws:amz:{HOME}:lambda" in fetch and f":{OTHER}:" not in fetch
    # the other region's AMI is read from its own SSM parameter, through its provider
    other_ref = next(p for p in mocks.provider_of.values() if p.endswith(f"ax-aws-{OTHER}-id"))
    assert ("aws:ssm/getParameter:getParameter", other_ref) in mocks.invoked
    # a gateway endpoint reaches its own region's S3 only: the home network has one
    endpoints = [mocks.region_of(d.name) for d in mocks.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")]
    assert endpoints == [HOME]


def test_capacity_an_extra_region_adds_a_fixed_object_count_per_group():
    """Per extra region: a provider, the network (VPC, NAT and its pieces), a subnet and
    route association per further zone, and per group a security group with 3 rules and
    a launch template per member and zone (docs/aws.md, "Several regions")."""
    one = _declare(_spec(zones=ZONES[:1]))
    two = _declare(_spec())
    added = len(two.declared) - len(one.declared)
    spec = _spec()
    groups = spec.plan()
    members = sum(len(g.members) for g in groups)
    # provider 1; network: component, vpc, private, public, igw, 2 rts, 2 rtas, eip, nat = 11,
    # + 2 per further zone; per group: sg + 3 rules + (component + members × zones) templates
    expected = 1 + 11 + 2 * (2 - 1) + 4 * len(groups) + len(groups) + members * 2
    assert added == expected


def test_capacity_the_fleet_policy_names_each_candidate_region_and_no_other():
    mocks = _declare(_spec())
    [doc] = [json.loads(d.inputs["policy"]) for d in mocks.of_type("aws:iam/rolePolicy:RolePolicy")
             if d.inputs["name"] == "spotbench-lambda-fleet"]
    regions = {arn.split(":")[3] for s in doc["Statement"]
               for arn in ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])
               if arn.startswith("arn:aws:ec2:")}
    assert regions == {HOME, OTHER}
    tag = {"aws:RequestTag/spotbench-sweep": "ax"}
    for region, allowed in ((HOME, True), (OTHER, True), ("ap-south-1", False)):
        fleet = f"arn:aws:ec2:{region}:123456789012:fleet/*"
        assert evaluate([doc], Authorization("ec2:CreateFleet", fleet, tag)).allowed is allowed


def test_capacity_one_region_declares_what_it_declared_before_candidate_regions():
    for key, over in (("stopped", {"zones": None, "zone": "eu-west-1a", "lifecycle": "stopped",
                                   "matrix": {"machine_type": ["c5n.large"]}}),
                      ("created", {"zones": ["eu-west-1b", "eu-west-1a"]})):
        spec = _spec(**over)
        from infra.aws import AwsSweep, AwsSweepArgs

        snap = snapshot(lambda: AwsSweep(spec.name, AwsSweepArgs(spec=spec)),
                        {"aws:region": HOME})
        assert sorted([d.type, d.name] for d in snap.declared) == BEFORE[key], key


def test_capacity_no_candidate_in_the_home_region_declares_no_home_network():
    """The home keeps the bucket, functions and scheduler; with every candidate elsewhere it
    gets no VPC (no idle NAT gateway there)."""
    mocks = _declare(_spec(zones=[f"{OTHER}a"]))
    vpcs = {d.name: mocks.region_of(d.name) for d in mocks.of_type("aws:ec2/vpc:Vpc")}
    assert vpcs == {f"ax-net-{OTHER}-vpc": OTHER}
    assert {mocks.region_of(t.name) for t in mocks.of_type(TEMPLATE)} == {OTHER}
    assert mocks.region_of("ax-fn-start") == HOME  # the functions stay home
