"""AWS preflight: STS, EC2 instance types and Service Quotas (vCPU-based EC2 limits).

1. credentials: `sts get-caller-identity` answers;
2. instance types exist in the region (describe_instance_types), giving their vCPUs;
3. quota: per quota class (instance family letters), the vCPUs of the sweep's largest
   concurrent footprint fit the class's limit — "All Standard (A, C, D, H, I, M, R, T, Z)
   Spot Instance Requests" and kin for spot, "Running On-Demand … instances" otherwise.
   (Running instances count against the same limit; Service Quotas gives the limit only.)
3b. location: each candidate Availability Zone (`zones`, or the one `zone`) offers each
   instance type (`describe_instance_type_offerings`, location type `availability-zone`):
   a fleet cannot choose a zone whose subnet cannot host the type. Quotas are regional (one
   limit for every zone of a region).
   Steps 2, 3 and 3b run in every candidate region (`SweepSpec.candidate_regions`, the
   created lifecycle's candidates may span regions; else the spec's region), each with a
   client for that region: a fleet may place the sweep's whole footprint in any of them.
3a. boot image: the public SSM parameter of each AMI the sweep boots (the ECS-optimized
   AL2023 AMI, its GPU variant on GPU types, or `aws.ami_ssm_parameter`) resolves in the
   region (`ssm:GetParameter`): the GPU variant is not published in every region, and
   `pulumi up` would fail there at its first lookup.
3c. launch templates (`lifecycle: created`): the sweep declares one per member and candidate
   zone (infra/aws/templates.py); a region holds at most `LAUNCH_TEMPLATES_PER_REGION`
   (an account's fixed limit, shared with everything else in it): the templates already
   there (`describe_launch_templates`) plus the sweep's must fit, in every candidate region.
4. IAM: the account has room for the sweep's roles and instance profile (`SWEEP_ROLES`,
   `SWEEP_INSTANCE_PROFILES`: constant in the group count, issue #29), from
   `iam:GetAccountSummary` (`Roles`/`RolesQuota`, `InstanceProfiles`/`InstanceProfilesQuota`;
   1,000 roles per account by default, shared with everything else in it).
5. Spot service-linked role: a `lifecycle: created` spot sweep's functions launch Spot
   instances with their own role, and the first Spot launch in an account needs
   AWSServiceRoleForEC2Spot (EC2 creates it only for a caller allowed
   `iam:CreateServiceLinkedRole`; the functions are not: docs/aws.md). Preflight names it
   when missing, with the command that creates it once.

`endpoint_url` (`AWS_ENDPOINT_URL`, moto in tests) redirects every client.
"""

from __future__ import annotations

import re
from typing import Any

from spotbench.facts.aws import FACTS, ami_parameter, has_gpu
from spotbench.interfaces import Problem
from spotbench.plan import RunGroup, concurrent_footprint
from spotbench.spec import SweepSpec

# quota class → (families, spot quota code, on-demand quota code); codes from the EC2
# section of the Service Quotas console / https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html
QUOTA_CLASSES: dict[str, tuple[frozenset[str], str, str]] = {
    "Standard (A, C, D, H, I, M, R, T, Z)": (frozenset("acdhimrtz"), "L-34B43A08", "L-1216C47A"),
    "G and VT": (frozenset({"g", "vt"}), "L-3819A6DF", "L-DB2E81BA"),
    "P": (frozenset({"p"}), "L-7212CCBC", "L-417A185B"),
    "X": (frozenset({"x"}), "L-E3A00192", "L-7295265B"),
    "F": (frozenset({"f"}), "L-88CF9481", "L-74FC7D96"),
    "Inf": (frozenset({"inf"}), "L-B5D1601B", "L-1945791B"),
}


# what one sweep creates in IAM, whatever its group count (infra/aws/identity.py: member,
# grant, Lambda and scheduler roles; the members' one instance profile)
SWEEP_ROLES = 4
SWEEP_INSTANCE_PROFILES = 1
# "You can create up to 5,000 launch templates per Region" (docs/platform.md, the launch
# template restrictions page)
LAUNCH_TEMPLATES_PER_REGION = 5000


def quota_class(instance_type: str) -> str | None:
    """c5.xlarge → the Standard class; g4dn.xlarge → G and VT; unknown → None."""
    letters = re.match(r"[a-z]+", instance_type.lower())
    prefix = letters.group(0) if letters else ""
    for name, (families, _, _) in QUOTA_CLASSES.items():
        if prefix in families:
            return name
    return None


def check(spec: SweepSpec, endpoint_url: str | None = None) -> list[Problem]:
    import boto3
    import botocore.exceptions as bexc

    kw = _client_options(spec.region, endpoint_url)
    try:
        who = boto3.client("sts", **kw).get_caller_identity()
    except (bexc.NoCredentialsError, bexc.ClientError, bexc.BotoCoreError) as exc:
        return [Problem("credentials", f"AWS credentials do not work: {exc}",
                        "`aws configure` or `aws sso login`, or set AWS_PROFILE")]
    del who
    groups = spec.plan()
    problems: list[Problem] = []
    # every candidate region: types, zone offerings and quotas are regional (the home
    # region when the spec names no candidate)
    for region in spec.candidate_regions or [spec.region or ""]:
        zones = [z for z in spec.candidate_zones if FACTS.region_of_zone(z) == region]
        problems += _region(spec, groups, region, zones, endpoint_url)
    iam = boto3.client("iam", **kw)  # IAM is global
    problems += iam_room(iam)
    if spec.lifecycle == "created" and any(m.spot for g in groups for m in g.members):
        problems += spot_role(iam)
    return problems


SPOT_ROLE = "AWSServiceRoleForEC2Spot"
SPOT_ROLE_PATH = "/aws-service-role/spot.amazonaws.com/"  # a service-linked role's path
SPOT_ROLE_COMMAND = "aws iam create-service-linked-role --aws-service-name spot.amazonaws.com"


def spot_role(iam: Any) -> list[Problem]:
    """The account's Spot service-linked role (the role under `SPOT_ROLE_PATH`), which the
    sweep's functions need and may not create: a problem naming it and the command that
    creates it, when it is missing."""
    try:
        pages = iam.get_paginator("list_roles").paginate(PathPrefix=SPOT_ROLE_PATH)
        if any(page.get("Roles") for page in pages):
            return []
    except Exception as exc:  # noqa: BLE001 - botocore ClientError; the check cannot run
        return [Problem("spot-role", f"cannot list the IAM roles under {SPOT_ROLE_PATH}: {exc}",
                        f"grant iam:ListRoles, or look for {SPOT_ROLE} in IAM > Roles; "
                        f"`{SPOT_ROLE_COMMAND}` creates it")]
    return [Problem(
        "spot-role", f"the account has no Spot service-linked role {SPOT_ROLE}: the sweep's "
        "start function launches Spot instances with its own role, which may not create it",
        f"create it once per account: `{SPOT_ROLE_COMMAND}`")]


def _client_options(region: str | None, endpoint_url: str | None) -> dict[str, Any]:
    kw: dict[str, Any] = {"region_name": region}
    if endpoint_url:
        kw["endpoint_url"] = endpoint_url
    return kw


def _region(spec: SweepSpec, groups: list[RunGroup], region: str, zones: list[str],
            endpoint_url: str | None) -> list[Problem]:
    """One candidate region: its instance types, its zones' offerings, its quotas (a fleet
    may place the sweep's whole concurrent footprint there)."""
    import boto3
    import botocore.exceptions as bexc

    kw = _client_options(region, endpoint_url)
    ec2 = boto3.client("ec2", **kw)
    problems: list[Problem] = []
    vcpus: dict[str, int] = {}
    for itype in sorted({g.machine_type for g in groups}):
        try:
            info = ec2.describe_instance_types(InstanceTypes=[itype])["InstanceTypes"][0]
            vcpus[itype] = int(info["VCpuInfo"]["DefaultVCpus"])
        except bexc.ClientError as exc:
            problems.append(Problem("machine-types", f"{itype} is not offered in {region} "
                                    f"({exc.response['Error'].get('Code')})",
                                    f"pick one from `aws ec2 describe-instance-type-offerings --region {region}`"))
    problems += zone_offerings(ec2, sorted(vcpus), zones, region)
    problems += ami_parameters(boto3.client("ssm", **kw), spec, groups, region)
    if spec.lifecycle == "created":
        problems += template_room(ec2, sum(len(g.members) for g in groups) * len(zones), region)
    problems += _quota(boto3.client("service-quotas", **kw), spec, groups, vcpus, region)
    return problems


def ami_parameters(ssm: Any, spec: SweepSpec, groups: list[RunGroup], region: str) -> list[Problem]:
    """A problem per AMI parameter the sweep needs that `region` does not publish."""
    gpus = {has_gpu(m.machine_type or g.machine_type, g.accelerator)
            for g in groups for m in g.members}
    out = []
    for name in sorted({ami_parameter(spec.aws.ami_ssm_parameter, gpu) for gpu in gpus}):
        try:
            ssm.get_parameter(Name=name)
        except Exception as exc:  # noqa: BLE001 - botocore ClientError
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            if code not in ("ParameterNotFound", "ParameterVersionNotFound"):
                out.append(Problem("ami", f"cannot read the SSM parameter {name} in {region}: {exc}",
                                   "grant ssm:GetParameter, or check the parameter in the console"))
                continue
            out.append(Problem(
                "ami", f"{region} publishes no SSM parameter {name}: the members' AMI cannot be "
                "found there", f"pick a region that has it (`aws ssm get-parameter --name {name} "
                f"--region <region>` answers an AMI id there), or set aws.ami_ssm_parameter to a "
                f"parameter {region} has that names an Amazon Linux 2023 AMI with docker (and, on "
                "GPU types, the NVIDIA driver and nvidia-container-toolkit)"))
    return out


def zone_offerings(ec2: Any, types: list[str], zones: list[str], region: str) -> list[Problem]:
    """A problem per candidate zone that does not offer one of `types`."""
    if not types or not zones:
        return []
    try:
        pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": types},
                     {"Name": "location", "Values": zones}])
        offered = {(o["Location"], o["InstanceType"]) for page in pages
                   for o in page.get("InstanceTypeOfferings", [])}
    except Exception as exc:  # noqa: BLE001 - botocore ClientError; the check cannot run
        return [Problem("zones", f"cannot list instance type offerings in {region}: {exc}",
                        "grant ec2:DescribeInstanceTypeOfferings, or check the zones in the console")]
    out = []
    for zone in zones:
        missing = [t for t in types if (zone, t) not in offered]
        if missing:
            out.append(Problem(
                "zones", f"zone {zone} does not offer {', '.join(missing)}",
                f"drop {zone} from `zones` (`aws ec2 describe-instance-type-offerings --location-type "
                f"availability-zone --filters Name=instance-type,Values={missing[0]} --region {region}` "
                "lists the zones that do)"))
    return out


def template_room(ec2: Any, need: int, region: str) -> list[Problem]:
    """Whether `region` has room for `need` more launch templates (one per member and
    candidate zone of the region)."""
    if not need:
        return []
    try:
        pages = ec2.get_paginator("describe_launch_templates").paginate()
        used = sum(len(page.get("LaunchTemplates", [])) for page in pages)
    except Exception as exc:  # noqa: BLE001 - botocore ClientError; the check cannot run
        return [Problem("templates", f"cannot list the launch templates in {region}: {exc}",
                        "grant ec2:DescribeLaunchTemplates, or count them in the console")]
    if used + need <= LAUNCH_TEMPLATES_PER_REGION:
        return []
    return [Problem(
        "templates", f"launch templates in {region}: the account has {used}, the sweep adds {need} "
        f"(one per member and candidate zone there); a region holds {LAUNCH_TEMPLATES_PER_REGION}",
        f"give fewer candidate zones in {region} (`zones`), split the sweep, or delete unused "
        "templates (old sweeps: `spotbench teardown`)")]


def iam_room(iam: Any) -> list[Problem]:
    """Whether the account has room for the sweep's roles and instance profile."""
    try:
        summary = iam.get_account_summary()["SummaryMap"]
    except Exception as exc:  # noqa: BLE001 - botocore ClientError; the check cannot run
        return [Problem("iam-quota", f"cannot read the IAM account summary: {exc}",
                        "grant iam:GetAccountSummary, or check IAM quotas in the console")]
    out = []
    for what, used_key, quota_key, need in (
            ("roles", "Roles", "RolesQuota", SWEEP_ROLES),
            ("instance profiles", "InstanceProfiles", "InstanceProfilesQuota",
             SWEEP_INSTANCE_PROFILES)):
        used, limit = summary.get(used_key), summary.get(quota_key)
        if used is None or limit is None:
            continue
        if used + need > limit:
            out.append(Problem(
                "iam-quota", f"IAM {what}: the account has {used} of {limit}; the sweep adds {need}",
                f"delete unused {what} (or old sweeps: `spotbench teardown`), or ask AWS to raise "
                f"the IAM {what} quota (Service Quotas, service `iam`)"))
    return out


def _quota(client: Any, spec: SweepSpec, groups: list[RunGroup], vcpus: dict[str, int],
           region: str | None = None) -> list[Problem]:
    region = region or spec.region
    out = []
    # each member counts against its own market's quota (`role_provisioning`: a standard
    # role's instances On-Demand, the spot roles' Spot)
    for (name, (_, spot_code, od_code)), spot in ((c, s) for c in QUOTA_CLASSES.items()
                                                  for s in sorted({m.spot for g in groups for m in g.members})):
        def size(g: RunGroup, cls: str = name, s: bool = spot) -> float:
            return sum(vcpus.get(m.machine_type, 0) for m in g.members
                       if quota_class(m.machine_type) == cls and m.spot == s)

        need = concurrent_footprint(spec, groups, size)
        if not need:
            continue
        code = spot_code if spot else od_code
        kind = "Spot Instance Requests" if spot else "Running On-Demand instances"
        try:
            limit = float(client.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"])
        except Exception as exc:  # noqa: BLE001 - botocore ClientError; the check cannot run
            out.append(Problem("quota", f"cannot read EC2 quota {code} ({name} {kind}): {exc}",
                               "grant servicequotas:GetServiceQuota, or check the quota in the console"))
            continue
        if need > limit:
            out.append(Problem(
                "quota", f"EC2 {name} {kind} in {region}: the sweep needs {need:g} vCPUs at once, "
                f"the limit is {limit:g}",
                f"aws service-quotas request-service-quota-increase --service-code ec2 --quota-code {code} "
                f"--desired-value {need:g} --region {region}, or lower `concurrency`"))
    return out
