"""`lifecycle: created` under IAM enforcement (tests/iam/account.py): the start function's
role, with the policies the program declares (`lambda_policy` + `fleet_policy`), makes a
group's instances with an instant EC2 Fleet from the sweep's own launch templates and
terminates them — and cannot launch from another sweep's template, nor a fleet without the
sweep's tag, nor pass another role (issue #26). The harness evaluates what moto ignores:
the tag conditions, `ec2:CreateAction`, `iam:PassedToService` (tests/iam/requests.py models
what CreateFleet authorizes)."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.exceptions import ClientError

from infra.aws.identity import assume_role, fleet_policy, lambda_policy
from spotbench.clouds.aws.identity import member_role_name
from spotbench.clouds.aws.ec2 import AwsCloud
from spotbench.clouds.aws.fleet import fleet_request, templates
from spotbench.clouds.base import State
from spotbench.spec import load_spec
from tests.clouds.aws_templates import declare_templates
from tests.iam.account import ACCOUNT, EnforcedAccount
from tests.iam.policy import Authorization, evaluate
from tests.moto_server import MotoServer

pytestmark = pytest.mark.fidelity

REGION = "us-east-1"
ZONES = [f"{REGION}a", f"{REGION}b"]


def _spec(name: str):
    return load_spec({"name": name, "cloud": "aws", "region": REGION, "zones": ZONES,
                      "lifecycle": "created", "workload": {"name": "osu"},
                      "matrix": {"machine_type": ["g4dn.xlarge"]}, "trials": 1,
                      "results": f"s3://bucket/{name}", "schedule": {"cron": "0 3 * * *"}})


@pytest.fixture(scope="module")
def account():
    with MotoServer() as moto, EnforcedAccount(moto, REGION) as acct:
        yield acct


@pytest.fixture
def deployed(account):
    account.reset()
    sweeps = {}
    with account.setup():
        iam = account.admin("iam")
        for name in ("ax", "bx"):
            role = member_role_name(name, REGION)
            iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(
                assume_role("ec2.amazonaws.com")))
            iam.create_instance_profile(InstanceProfileName=role)
            iam.add_role_to_instance_profile(InstanceProfileName=role, RoleName=role)
            spec = _spec(name)
            declare_templates(account.admin("ec2"), spec, ZONES, profile=role)
            sweeps[name] = spec
        member = f"arn:aws:iam::{ACCOUNT}:role/{member_role_name('ax', REGION)}"
        account.create_role("ax-lambda", json.dumps(assume_role("lambda.amazonaws.com")),
                            [lambda_policy("ax", "bucket", "ax"), fleet_policy("ax", REGION, member)])
    start = account.session("ax-lambda", "start")
    return sweeps, start


def _session(principal) -> boto3.Session:
    return boto3.Session(aws_access_key_id=principal.access_key,
                         aws_secret_access_key=principal.secret_key,
                         aws_session_token=principal.token, region_name=REGION)


def test_capacity_iam_the_start_function_makes_and_deletes_its_group_from_its_templates(account, deployed):
    sweeps, start = deployed
    group = sweeps["ax"].plan()[0]
    cloud = AwsCloud(REGION, endpoint_url=account.url, session=_session(start),
                     wait_timeout_s=5, poll_s=0.5, lifecycle="created")
    out = cloud.start(group.labels, zones=ZONES)
    assert {i.state for i in out} == {State.RUNNING}, [i.detail for i in out]
    assert account.denial_lines() == []
    assert {i.state for i in cloud.stop(group.labels)} == {State.TERMINATED}
    assert account.denial_lines() == []
    fleets = [r for r in account.decisions if r.auth.action == "ec2:CreateFleet"]
    assert fleets and all(r.decision.allowed for r in fleets)
    # CreateFleet is evaluated on every launch resource, as RunInstances is (research §3 F1)
    kinds = {r.auth.resource.split(":")[-1].split("/")[0] for r in fleets}
    assert {"fleet", "launch-template", "subnet", "security-group", "network-interface",
            "image", "instance", "volume", "spot-instances-request"} <= kinds


def _without(doc: dict, sid: str, action: str | None) -> dict:
    """`doc` with `action` taken out of statement `sid` (None: the whole statement)."""
    out = json.loads(json.dumps(doc))
    kept = []
    for st in out["Statement"]:
        if st.get("Sid") == sid:
            if action is None:
                continue
            st["Action"] = [a for a in st["Action"] if a != action]
        kept.append(st)
    out["Statement"] = kept
    return out


@pytest.mark.parametrize("sid,action,kind", [
    ("LaunchParts", "ec2:CreateFleet", "network-interface"),
    ("SweepInstances", "ec2:CreateFleet", "instance"),
    ("SpotRequests", None, "spot-instances-request"),
])
def test_capacity_iam_a_policy_without_createfleet_on_a_launch_resource_is_refused(
        account, deployed, sid, action, kind):
    """The harness checks `ec2:CreateFleet` beside `ec2:RunInstances` on each resource a
    fleet launches (and the spot request of a Spot launch): a policy lacking it fails."""
    sweeps, _ = deployed
    group = sweeps["ax"].plan()[0]
    member = f"arn:aws:iam::{ACCOUNT}:role/{member_role_name('ax', REGION)}"
    with account.setup():
        account.create_role("ax-narrow", json.dumps(assume_role("lambda.amazonaws.com")), [
            lambda_policy("ax", "bucket", "ax"),
            _without(fleet_policy("ax", REGION, member), sid, action)])
    narrow = account.session("ax-narrow", "start")
    cloud = AwsCloud(REGION, endpoint_url=account.url, session=_session(narrow),
                     wait_timeout_s=5, poll_s=0.5, lifecycle="created")
    from spotbench.clouds.aws.ec2 import AwsCloudError

    with pytest.raises(AwsCloudError, match="UnauthorizedOperation"):
        cloud.start(group.labels, zones=ZONES)
    refused = {(r.auth.action, r.auth.resource.split(":")[-1].split("/")[0])
               for r in account.denials()}
    assert ("ec2:CreateFleet", kind) in refused


def _fleet(account, start, spec, *, tagged: bool = True):
    ec2 = account.client("ec2", start)
    group = spec.plan()[0]
    with account.setup():
        found = templates(account.admin("ec2"), group.labels)
    member = sorted(found)[0]
    request = fleet_request([found[member][z] for z in ZONES],
                            _spec("ax").plan()[0].labels if tagged else {})
    if not tagged:
        request.pop("TagSpecifications")
    return ec2, request


def test_capacity_iam_another_sweeps_template_is_refused(account, deployed):
    sweeps, start = deployed
    ec2, request = _fleet(account, start, sweeps["bx"])  # tagged as ax, bx's templates
    with pytest.raises(ClientError) as err:
        ec2.create_fleet(**request)
    assert err.value.response["Error"]["Code"] == "UnauthorizedOperation"
    refused = {r.auth.resource.split(":")[-1].split("/")[0] for r in account.denials()}
    assert "launch-template" in refused


def test_capacity_iam_a_fleet_without_the_sweep_tag_is_refused(account, deployed):
    sweeps, start = deployed
    ec2, request = _fleet(account, start, sweeps["ax"], tagged=False)
    with pytest.raises(ClientError) as err:
        ec2.create_fleet(**request)
    assert err.value.response["Error"]["Code"] == "UnauthorizedOperation"
    assert any(r.auth.action == "ec2:CreateFleet" and r.auth.resource.endswith(":fleet/*")
               for r in account.denials())


def test_deploy_aws_a_fleet_tagging_only_itself_is_refused_on_what_it_launches(account, deployed):
    """The launch is authorized with the request's own tags: the templates' instance and
    volume tags do not reach it (karpenter-provider-aws#3948). The old request tagged the
    fleet alone and every created-lifecycle start was refused on `instance/*`."""
    sweeps, start = deployed
    ec2, request = _fleet(account, start, sweeps["ax"])
    kinds = {s["ResourceType"] for s in request["TagSpecifications"]}
    assert {"fleet", "instance", "volume"} <= kinds
    request["TagSpecifications"] = [s for s in request["TagSpecifications"]
                                    if s["ResourceType"] == "fleet"]
    with pytest.raises(ClientError) as err:
        ec2.create_fleet(**request)
    assert err.value.response["Error"]["Code"] == "UnauthorizedOperation"
    refused = {r.auth.resource.rsplit(":", 1)[-1] for r in account.denials()}
    assert "instance/*" in refused


def test_capacity_iam_tags_only_at_creation_and_only_the_member_role_is_passed():
    doc = fleet_policy("ax", REGION, f"arn:aws:iam::{ACCOUNT}:role/ax-member")
    tag = {"aws:RequestTag/spotbench-sweep": "ax"}
    instance = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/*"
    assert evaluate([doc], Authorization("ec2:CreateTags", instance,
                                         {**tag, "ec2:CreateAction": "RunInstances"})).allowed
    assert not evaluate([doc], Authorization("ec2:CreateTags", instance, tag)).allowed  # retag
    passed = {"iam:PassedToService": "ec2.amazonaws.com"}
    assert evaluate([doc], Authorization("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/ax-member",
                                         passed)).allowed
    assert not evaluate([doc], Authorization("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/admin",
                                             passed)).allowed
    other = {"aws:ResourceTag/managed-by": "spotbench", "aws:ResourceTag/spotbench-sweep": "bx"}
    assert not evaluate([doc], Authorization("ec2:TerminateInstances",
                                             f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-1", other)).allowed


def test_capacity_iam_teardown_deletes_only_spotbench_fleets(account, deployed):
    """The operator's teardown policy finds a created group's fleet and deletes it (its
    instances with it); a fleet that is not spotbench's it may not delete."""
    from spotbench.clouds.aws.orphans import AwsSweeper, teardown_policy

    sweeps, start = deployed
    group = sweeps["ax"].plan()[0]
    AwsCloud(REGION, endpoint_url=account.url, session=_session(start), wait_timeout_s=5,
             poll_s=0.5, lifecycle="created").start(group.labels, zones=ZONES)
    with account.setup():
        account.create_role("spotbench-operator", "{}", [teardown_policy()])
        ec2 = account.admin("ec2")
        lt = ec2.create_launch_template(LaunchTemplateName="stranger", LaunchTemplateData={
            "ImageId": MotoServer.any_image(ec2), "InstanceType": "t3.micro"})
        stranger = ec2.create_fleet(
            Type="instant", TargetCapacitySpecification={
                "TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
            LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {
                "LaunchTemplateId": lt["LaunchTemplate"]["LaunchTemplateId"],
                "Version": "$Default"}}])["FleetId"]
    operator = account.session("spotbench-operator", "teardown")
    sweeper = AwsSweeper(regions=[REGION], endpoint_url=account.url, session=_session(operator))
    fleets = [r for r in sweeper.find("ax") if r.kind == "fleet"]
    assert fleets
    for fleet_resource in fleets:
        sweeper.delete(fleet_resource)
    assert account.denial_lines() == []
    with pytest.raises(ClientError, match="UnauthorizedOperation"):
        account.client("ec2", operator).delete_fleets(FleetIds=[stranger], TerminateInstances=True)


OTHER = "us-west-2"
WEST = [f"{OTHER}a", f"{OTHER}b"]


@pytest.fixture
def two_regions(account):
    """Sweep `ax` with candidates in REGION and OTHER: templates in both (as the stack
    declares them, each region's own), and two start roles: one whose fleet policy names
    both candidate regions (what the program declares), one naming REGION only."""
    account.reset()
    spec = load_spec({**_spec("ax").model_dump(mode="json", exclude_none=True),
                      "zones": [*ZONES, *WEST]})
    with account.setup():
        iam = account.admin("iam")
        role = member_role_name("ax", REGION)
        iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(
            assume_role("ec2.amazonaws.com")))
        iam.create_instance_profile(InstanceProfileName=role)
        iam.add_role_to_instance_profile(InstanceProfileName=role, RoleName=role)
        declare_templates(account.admin("ec2"), spec, ZONES, profile=role)
        declare_templates(account.admin("ec2", OTHER), spec, WEST, profile=role)
        member = f"arn:aws:iam::{ACCOUNT}:role/{role}"
        for name, regions in (("ax-lambda", spec.candidate_regions), ("ax-home-only", [REGION])):
            account.create_role(name, json.dumps(assume_role("lambda.amazonaws.com")),
                                [lambda_policy("ax", "bucket", "ax"),
                                 fleet_policy("ax", regions, member)])
    return spec, account.session("ax-lambda", "start"), account.session("ax-home-only", "start")


def test_capacity_iam_the_fleet_policy_covers_each_candidate_region(account, two_regions):
    """Under enforcement: the program's policy (both regions) makes and deletes the group in
    the second region; a policy naming only the home region is refused there, on the second
    region's ARNs (the region is part of each EC2 ARN; IAM itself is global)."""
    from spotbench.clouds.aws.ec2 import AwsCloudError
    from spotbench.clouds.aws.regions import AwsRegions

    spec, start, home_only = two_regions
    assert spec.candidate_regions == [REGION, OTHER]
    group = spec.plan()[0]
    cloud = AwsRegions(REGION, spec.candidate_regions, endpoint_url=account.url,
                       session=_session(start), wait_timeout_s=5, poll_s=0.5)
    out = cloud.start(group.labels, zones=WEST)
    assert {i.state for i in out} == {State.RUNNING}, [i.detail for i in out]
    assert {i.zone for i in out} <= set(WEST)
    assert account.denial_lines() == []
    assert {i.state for i in cloud.stop(group.labels)} == {State.TERMINATED}
    assert account.denial_lines() == []
    fleets = [r for r in account.decisions if r.auth.action == "ec2:CreateFleet"]
    assert fleets and {r.auth.resource.split(":")[3] for r in fleets} == {OTHER}

    narrow = AwsRegions(REGION, spec.candidate_regions, endpoint_url=account.url,
                        session=_session(home_only), wait_timeout_s=5, poll_s=0.5)
    with pytest.raises(AwsCloudError, match="UnauthorizedOperation"):
        narrow.start(group.labels, zones=WEST)
    assert {r.auth.resource.split(":")[3] for r in account.denials()} == {OTHER}
