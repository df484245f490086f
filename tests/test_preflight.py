"""`spotbench preflight`: the cloud's own answers (a local GCP endpoint; moto for AWS) turned
into one line per problem with its fix."""

from __future__ import annotations

import os

import boto3
import pytest
import yaml
from moto import mock_aws
from moto.servicequotas.models import ServiceQuotasBackend
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.clouds.aws.preflight import quota_class
from spotbench.clouds.gcp import BOOTSTRAP_APIS, REQUIRED_APIS
from spotbench.clouds.gcp.preflight import gpu_quota_metric
from spotbench.preflight import preflight
from spotbench.spec import load_spec
from tests.clouds.google_endpoint import GoogleEndpoint

ZONE, REGION = "us-central1-a", "us-central1"


def _gcp(**over) -> dict:
    base = {"name": "pf", "cloud": "gcp", "zone": ZONE, "gcp": {"project": "proj"},
            "workload": {"name": "tf-mnist", "workers": 2}, "trials": 2,
            "matrix": {"machine_type": ["n1-standard-4"], "accelerator": ["nvidia-tesla-t4"]},
            "schedule": {"cron": "0 3 * * *"}, "deadline": "30m"}
    return {**base, **over}


@pytest.fixture
def gcp(monkeypatch):
    endpoint = GoogleEndpoint()
    project = endpoint.project
    project.enabled = set(BOOTSTRAP_APIS) | set(REQUIRED_APIS)
    project.machine_types = {ZONE: {"n1-standard-4": 4, "n1-standard-2": 2}}
    project.accelerators = {ZONE: {"nvidia-tesla-t4"}}
    project.quotas = {REGION: {"CPUS": (24, 0), "PREEMPTIBLE_CPUS": (64, 0),
                               "PREEMPTIBLE_NVIDIA_T4_GPUS": (8, 0), "NVIDIA_T4_GPUS": (1, 0)}}
    project.project_quotas = {"GPUS_ALL_REGIONS": (16, 0)}
    monkeypatch.setenv("SPOTBENCH_GCP_API_ENDPOINT", endpoint.url_for("user:deployer@example.com"))
    monkeypatch.delenv("SPOTBENCH_POLICY", raising=False)
    yield endpoint
    endpoint.stop()


def _run(spec: dict, tmp_path) -> tuple[int, list[str]]:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(app, ["preflight", str(path)])
    return result.exit_code, [l for l in result.output.splitlines() if l.strip()]


def test_preflight_gcp_ready_project_passes(gcp, tmp_path):
    code, lines = _run(_gcp(), tmp_path)
    assert (code, lines) == (0, ["✓ pf: ready to deploy on gcp"])
    assert gpu_quota_metric("nvidia-tesla-t4", True) == "PREEMPTIBLE_NVIDIA_T4_GPUS"
    assert gpu_quota_metric("nvidia-l4", False) == "NVIDIA_L4_GPUS"


def test_preflight_gcp_missing_api_and_spot_gpu_quota_say_how_to_fix(gcp, tmp_path):
    gcp.project.enabled -= {"cloudscheduler.googleapis.com", "iap.googleapis.com"}
    gcp.project.quotas[REGION]["PREEMPTIBLE_NVIDIA_T4_GPUS"] = (8, 4)  # 4 free, 8 needed at once
    code, lines = _run(_gcp(), tmp_path)
    assert code == 1 and len(lines) == 2, lines
    apis, quota = lines
    assert apis == ("✗ apis: not enabled in proj: cloudscheduler.googleapis.com, iap.googleapis.com → "
                    "gcloud services enable cloudscheduler.googleapis.com iap.googleapis.com --project proj")
    assert quota.startswith("✗ quota: PREEMPTIBLE_NVIDIA_T4_GPUS in us-central1: the sweep needs 8 at "
                            "once, 4 free (limit 8, 4 in use) → request more: https://console.cloud.google.com/")
    assert "lower `concurrency`" in quota
    # concurrency 1: one group (4 GPUs) at a time fits the runs again; standard VMs use
    # NVIDIA_T4_GPUS. (The stopped lifecycle's deploy still needs all 8 at `pulumi up`:
    # test_deploy_preflight_gcp_stopped_lifecycle_needs_the_gpu_quota_at_pulumi_up.)
    code, lines = _run(_gcp(concurrency=1), tmp_path)
    assert [line for line in lines if not line.startswith("✗ deploy:")] == [apis]
    code, lines = _run(_gcp(concurrency=1, provisioning="standard"), tmp_path)
    assert any("NVIDIA_T4_GPUS in us-central1: the sweep needs 4" in l and "PREEMPTIBLE" not in l for l in lines)
    assert any("CPUS in us-central1" in l for l in lines) is False  # 16 vCPUs fit the 24


def test_preflight_gcp_machine_types_accelerators_credentials_and_budget(gcp, tmp_path):
    spec = _gcp(matrix={"machine_type": ["n9-huge-4"], "accelerator": ["nvidia-h900"]}, budget=5)
    problems = preflight(load_spec(spec), None, dict(os.environ))
    assert [p.check for p in problems] == ["machine-types", "accelerators", "budget"], problems
    assert "gcloud compute machine-types list --filter=zone:us-central1-a" in problems[0].fix
    assert "no price for cloud=gcp" in problems[2].message  # cannot be priced: said so
    (budget,) = preflight(load_spec(_gcp(budget=0.01)), None, dict(os.environ))
    assert budget.check == "budget" and budget.message.startswith("budget $0.01 does not cover one run")
    assert preflight(load_spec(_gcp(budget=1000)), None, dict(os.environ)) == []
    gcp.project.exists = False
    (only,) = preflight(load_spec(_gcp()), None, dict(os.environ))
    assert only.check == "credentials" and "project proj not found" in only.message


def test_preflight_guardrail_violations_are_problems_too(gcp, tmp_path):
    problems = preflight(load_spec(_gcp(policy={"max_gpus_per_sweep": 4})), None, dict(os.environ))
    assert [p.check for p in problems] == ["policy"]
    assert "8 GPUs at once; the policy allows 4" in problems[0].message


# ---- AWS, against moto ----------------------------------------------------------------
def _aws(**over) -> dict:
    base = {"name": "pa", "cloud": "aws", "region": "us-east-1",
            "workload": {"name": "osu"}, "trials": 3,
            "matrix": {"machine_type": ["c5.xlarge", "g4dn.xlarge"]},
            "schedule": {"cron": "0 3 * * *"}, "deadline": "30m"}
    return {**base, **over}


@pytest.fixture
def aws(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("SPOTBENCH_POLICY", raising=False)
    limits = {"L-34B43A08": 64.0, "L-3819A6DF": 8.0}  # moto serves only VPC quotas: EC2's here

    def get_service_quota(self, service_code: str, quota_code: str) -> dict:
        if service_code != "ec2" or quota_code not in limits:
            raise KeyError(quota_code)
        return {"ServiceCode": "ec2", "QuotaCode": quota_code, "Value": limits[quota_code]}

    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", get_service_quota)
    with mock_aws():
        yield limits


def test_preflight_aws_spot_vcpu_quota_by_family(aws):
    assert quota_class("c5.xlarge").startswith("Standard") and quota_class("g4dn.xlarge") == "G and VT"
    assert quota_class("inf1.xlarge") == "Inf" and quota_class("u-6tb1.metal") is None
    assert preflight(load_spec(_aws(concurrency=1)), None, {}) == []
    (problem,) = preflight(load_spec(_aws()), None, {})  # 3 g4dn groups × 2 × 4 vCPUs at once
    assert problem.check == "quota" and "G and VT Spot Instance Requests" in problem.message
    assert "needs 24 vCPUs at once, the limit is 8" in problem.message
    assert problem.fix.startswith("aws service-quotas request-service-quota-increase --service-code ec2 "
                                  "--quota-code L-3819A6DF --desired-value 24")


def test_preflight_aws_unknown_instance_type(aws):
    # well formed, so spec validation lets it through with a warning; only the cloud knows
    problems = preflight(load_spec(_aws(matrix={"machine_type": ["zz9.large"]})), None, {})
    assert [p.check for p in problems] == ["machine-types"]
    assert "zz9.large is not offered in us-east-1" in problems[0].message
    boto3.client("sts").get_caller_identity()  # the same credentials answer


def test_preflight_gcp_counts_the_projects_service_accounts_and_custom_roles(gcp, tmp_path):
    """Issue #29: a sweep needs 4 service accounts and 4 custom roles whatever its group
    count; preflight counts what the project already holds (not this sweep's own)."""
    project = gcp.project
    project.service_accounts = [{"email": f"a{i}@proj.iam", "displayName": "other"} for i in range(96)]
    project.service_accounts += [{"email": "sb-pf-vm@proj.iam", "displayName": "spotbench pf: every VM"}]
    assert preflight(load_spec(_gcp()), None, dict(os.environ)) == []  # 96 + 4 = 100
    project.service_accounts.append({"email": "x@proj.iam", "displayName": "someone's"})
    (problem,) = preflight(load_spec(_gcp()), None, dict(os.environ))
    assert problem.check == "service-accounts"
    assert "holds 97 service accounts of its 100; the sweep needs 4 more" in problem.message
    project.service_accounts.pop()
    project.roles = [{"name": f"projects/proj/roles/r{i}"} for i in range(297)]
    project.roles.append({"name": "projects/proj/roles/spotbench_pf_abc123.list"})  # its own
    (problem,) = preflight(load_spec(_gcp()), None, dict(os.environ))
    assert problem.check == "custom-roles" and "holds 297 custom roles of its 300" in problem.message


def test_preflight_gcp_passes_a_500_group_sweep(gcp, tmp_path):
    """Issue #29's done-when: 500 groups (5 machine types × 100 trials) pass preflight; no
    group cap remains (it was 90)."""
    gcp.project.machine_types = {ZONE: {f"n2-standard-{n}": n for n in (2, 4, 8, 16, 32)}}
    gcp.project.quotas[REGION]["PREEMPTIBLE_CPUS"] = (256, 0)  # a 4 × 32-vCPU group at once
    spec = _gcp(trials=100, matrix={"machine_type": [f"n2-standard-{n}" for n in (2, 4, 8, 16, 32)]},
                concurrency=1)
    assert len(load_spec(spec).plan()) == 500
    assert preflight(load_spec(spec), None, dict(os.environ)) == []


def test_preflight_gcp_capacity_checks_every_candidate_zone_and_region(gcp, tmp_path):
    """`zones` (the created lifecycle): a group may be made in any candidate, so each one must
    offer the machine and GPU, and each candidate region's quota must hold the sweep."""
    spec = _gcp(zone=None, zones=[ZONE, "us-central1-b"], lifecycle="created", concurrency=1)
    gcp.project.machine_types["us-central1-b"] = {"n1-standard-4": 4}
    gcp.project.accelerators["us-central1-b"] = set()  # no T4 in b
    problems = preflight(load_spec(spec), None, dict(os.environ))
    assert [(p.check, p.message) for p in problems] == [
        ("accelerators", "nvidia-tesla-t4 is not offered in us-central1-b (HTTP 404)")]
    gcp.project.accelerators["us-central1-b"] = {"nvidia-tesla-t4"}
    assert preflight(load_spec(spec), None, dict(os.environ)) == []
    # the candidates share one region (spec checks): its quota must hold the sweep
    gcp.project.quotas[REGION] = {**gcp.project.quotas.get(REGION, {}),
                                  "PREEMPTIBLE_NVIDIA_T4_GPUS": (2, 0)}  # granted, too small
    problems = preflight(load_spec(spec), None, dict(os.environ))
    assert [p.message.split(":")[0] for p in problems] == [f"PREEMPTIBLE_NVIDIA_T4_GPUS in {REGION}"]


def test_preflight_gcp_says_when_another_subnet_overlaps_the_operators_tunnel_range(gcp, tmp_path):
    """Operators tunnel by destination address (the sweep's subnet, docs/platform.md): a
    subnet of another VPC on an overlapping range would share that grant. Preflight names
    it and the fix; the sweep's own subnet (an earlier deploy) and a free range pass, and a
    sweep without operators is not concerned."""
    url = "https://www.googleapis.com/compute/v1/projects/proj/global/networks"
    gcp.project.subnetworks = {REGION: [
        {"name": "pf-net-subnet", "network": f"{url}/pf-net-vpc", "ipCidrRange": "10.42.0.0/24"},
        {"name": "other-net-subnet", "network": f"{url}/other-net-vpc",
         "ipCidrRange": "10.42.0.0/16"}]}
    ops = {"project": "proj", "operators": ["user:ops@example.com"]}
    code, lines = _run(_gcp(gcp=ops), tmp_path)
    assert code != 0
    assert any("10.42.0.0/24 overlaps subnet(s) other-net-subnet (10.42.0.0/16)" in l
               for l in lines), lines
    assert any("gcp.network_cidr" in l for l in lines), lines
    assert _run(_gcp(gcp={**ops, "network_cidr": "10.43.0.0/24"}), tmp_path) == (
        0, ["✓ pf: ready to deploy on gcp"])
    assert _run(_gcp(), tmp_path)[0] == 0


def test_capacity_preflight_aws_quota_and_offerings_in_every_candidate_region(aws, monkeypatch):
    """Candidates in two regions (`lifecycle: created`): quotas are regional, so each
    candidate region's limit is read with a client of that region and must hold the
    sweep's footprint (a fleet may place all of it there)."""
    per_region = {"us-east-1": 64.0, "us-west-2": 8.0}

    def get_service_quota(self, service_code: str, quota_code: str) -> dict:
        if service_code != "ec2" or quota_code != "L-3819A6DF":
            raise KeyError(quota_code)
        return {"ServiceCode": "ec2", "QuotaCode": quota_code, "Value": per_region[self.region_name]}

    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", get_service_quota)
    spec = load_spec(_aws(matrix={"machine_type": ["g4dn.xlarge"]}, lifecycle="created",
                          zones=["us-east-1a", "us-west-2a"]))
    boto3.client("iam").create_service_linked_role(AWSServiceName="spot.amazonaws.com")
    (problem,) = preflight(spec, None, {})
    assert problem.check == "quota" and "in us-west-2" in problem.message
    assert "--region us-west-2" in problem.fix
    per_region["us-west-2"] = 64.0
    assert preflight(spec, None, {}) == []


def test_preflight_gcp_capacity_checks_the_quota_of_each_candidate_region_not_the_home(gcp, tmp_path):
    """Candidates across regions (`lifecycle: created`): the sweep's home is `region`, but a
    group is made in a candidate zone of another region and uses that region's quota: each
    candidate region is asked, in the spec's order."""
    east = "us-east1-b"
    spec = _gcp(zone=None, region=REGION, zones=[ZONE, east], lifecycle="created", concurrency=1)
    gcp.project.machine_types[east] = {"n1-standard-4": 4}
    gcp.project.accelerators[east] = {"nvidia-tesla-t4"}
    gcp.project.quotas["us-east1"] = {"PREEMPTIBLE_CPUS": (64, 0),
                                      "PREEMPTIBLE_NVIDIA_T4_GPUS": (2, 0)}  # granted, too small
    problems = preflight(load_spec(spec), None, dict(os.environ))
    assert [p.message.split(":")[0] for p in problems] == ["PREEMPTIBLE_NVIDIA_T4_GPUS in us-east1"]
    assert "region us-east1" in problems[0].fix
    gcp.project.quotas["us-east1"]["PREEMPTIBLE_NVIDIA_T4_GPUS"] = (8, 0)
    assert preflight(load_spec(spec), None, dict(os.environ)) == []


def test_capacity_preflight_aws_names_the_missing_spot_service_linked_role(aws, monkeypatch):
    """A created spot sweep's functions launch Spot with their own role, which may not
    create the account's Spot service-linked role: preflight names it and the command that
    creates it; once it exists (or the sweep is on demand, or stopped) nothing is said."""
    limits = {"L-3819A6DF": 64.0, "L-DB2E81BA": 64.0}

    def get_service_quota(self, service_code: str, quota_code: str) -> dict:
        return {"ServiceCode": "ec2", "QuotaCode": quota_code, "Value": limits[quota_code]}

    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", get_service_quota)
    created = _aws(matrix={"machine_type": ["g4dn.xlarge"]}, lifecycle="created",
                   zones=["us-east-1a", "us-east-1b"])
    (problem,) = preflight(load_spec(created), None, {})
    assert problem.check == "spot-role" and "AWSServiceRoleForEC2Spot" in problem.message
    assert "aws iam create-service-linked-role --aws-service-name spot.amazonaws.com" in problem.fix
    assert preflight(load_spec({**created, "spot": False}), None, {}) == []
    assert preflight(load_spec({**created, "lifecycle": "stopped", "zones": None,
                                "zone": "us-east-1a"}), None, {}) == []
    boto3.client("iam").create_service_linked_role(AWSServiceName="spot.amazonaws.com")
    assert preflight(load_spec(created), None, {}) == []


def test_capacity_preflight_aws_counts_launch_templates_per_candidate_region(aws, monkeypatch):
    """A created sweep declares a launch template per member and candidate zone: the
    templates already in a region plus the sweep's must fit the region's limit (5,000; made
    small here), in each candidate region."""
    from spotbench.clouds.aws import preflight as aws_preflight

    limits = {"L-3819A6DF": 64.0, "L-DB2E81BA": 64.0}
    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota",
                        lambda self, service_code, quota_code: {
                            "ServiceCode": "ec2", "QuotaCode": quota_code, "Value": limits[quota_code]})
    boto3.client("iam").create_service_linked_role(AWSServiceName="spot.amazonaws.com")
    spec = load_spec(_aws(matrix={"machine_type": ["g4dn.xlarge"]}, lifecycle="created",
                          zones=["us-east-1a", "us-east-1b", "us-west-2a"]))
    members = sum(len(g.members) for g in spec.plan())
    west = boto3.client("ec2", region_name="us-west-2")
    for n in range(members + 1):  # someone else's templates, in the second region only
        west.create_launch_template(LaunchTemplateName=f"other-{n}",
                                    LaunchTemplateData={"InstanceType": "t3.micro"})
    # us-east-1 needs 2 zones × members; us-west-2 holds members + 1 and needs 1 × members
    monkeypatch.setattr(aws_preflight, "LAUNCH_TEMPLATES_PER_REGION", 2 * members)
    (problem,) = preflight(spec, None, {})
    assert problem.check == "templates" and "in us-west-2" in problem.message
    assert f"the account has {members + 1}, the sweep adds {members}" in problem.message
    assert "fewer candidate zones in us-west-2" in problem.fix
    monkeypatch.setattr(aws_preflight, "LAUNCH_TEMPLATES_PER_REGION", 2 * members - 1)
    east, west_problem = preflight(spec, None, {})
    assert "in us-east-1" in east.message and f"adds {2 * members}" in east.message
    assert "in us-west-2" in west_problem.message
    monkeypatch.setattr(aws_preflight, "LAUNCH_TEMPLATES_PER_REGION", 2 * members + 1)
    assert preflight(spec, None, {}) == []
    stopped = load_spec(_aws(matrix={"machine_type": ["g4dn.xlarge"]}, zone="us-east-1a"))
    monkeypatch.setattr(aws_preflight, "LAUNCH_TEMPLATES_PER_REGION", 0)
    assert preflight(stopped, None, {}) == []  # the stopped lifecycle declares none


# ---- issue #37: the GPU quotas a first deploy meets ------------------------------------
def _problems(spec: dict) -> list:
    return preflight(load_spec(spec), None, dict(os.environ))


def test_deploy_preflight_gcp_names_gpus_all_regions_and_how_to_raise_it(gcp, tmp_path):
    """`GPUS_ALL_REGIONS` is a project-level quota (projects.get), 0 on many new projects:
    every GPU of the sweep counts against it beside the regional per-model quota."""
    gcp.project.project_quotas = {"GPUS_ALL_REGIONS": (0, 0)}
    code, lines = _run(_gcp(lifecycle="created", zone=None, zones=[ZONE]), tmp_path)
    assert code == 1 and len(lines) == 1, lines
    (line,) = lines
    assert line.startswith("✗ quota: GPUS_ALL_REGIONS (project proj, every region together): the "
                           "sweep needs 8 GPUs at once, 0 free (limit 0, 0 in use; 0 on many new "
                           "projects) → request more: https://console.cloud.google.com/iam-admin/"
                           "quotas?project=proj (metric GPUS_ALL_REGIONS)"), line
    gcp.project.project_quotas = {"GPUS_ALL_REGIONS": (8, 0)}  # exactly the footprint
    assert _problems(_gcp(lifecycle="created", zone=None, zones=[ZONE])) == []
    gcp.project.project_quotas = {"GPUS_ALL_REGIONS": (8, 1)}  # one in use elsewhere
    (problem,) = _problems(_gcp(lifecycle="created", zone=None, zones=[ZONE]))
    assert "needs 8 GPUs at once, 7 free" in problem.message
    # a CPU sweep needs none of it
    gcp.project.project_quotas = {}
    assert _problems(_gcp(matrix={"machine_type": ["n1-standard-4"]})) == []


def test_deploy_preflight_gcp_spot_gpus_fall_back_to_the_standard_quota_and_say_so(gcp, tmp_path):
    """Spot VMs use the preemptible GPU quota where the region grants one; where it does not
    (no metric, or limit 0) they count against the standard GPU quota: preflight checks that
    one and says why."""
    quotas = gcp.project.quotas[REGION]
    del quotas["PREEMPTIBLE_NVIDIA_T4_GPUS"]  # not granted: standard NVIDIA_T4_GPUS (1) it is
    spec = _gcp(lifecycle="created", zone=None, zones=[ZONE])
    (problem,) = _problems(spec)
    assert problem.check == "quota"
    assert problem.message == (
        "NVIDIA_T4_GPUS in us-central1: the sweep needs 8 at once, 1 free (limit 1, 0 in use); the "
        "region grants no PREEMPTIBLE_NVIDIA_T4_GPUS quota, so spot VMs count against the standard "
        "NVIDIA_T4_GPUS (or request PREEMPTIBLE_NVIDIA_T4_GPUS)")
    quotas["PREEMPTIBLE_NVIDIA_T4_GPUS"] = (0, 0)  # listed at 0: the same
    assert [p.message.split(":")[0] for p in _problems(spec)] == ["NVIDIA_T4_GPUS in us-central1"]
    quotas["NVIDIA_T4_GPUS"] = (8, 0)  # the standard quota holds the spot sweep
    assert _problems(spec) == []
    quotas["PREEMPTIBLE_NVIDIA_T4_GPUS"] = (4, 0)  # granted: spot VMs use it, and it is short
    (problem,) = _problems(spec)
    assert problem.message.startswith("PREEMPTIBLE_NVIDIA_T4_GPUS in us-central1: the sweep needs 8")


def test_deploy_preflight_gcp_gpus_built_into_the_machine_type_are_counted(gcp, tmp_path):
    """G2 carries its L4s (g2-standard-24: 2): no `accelerator` in the spec, yet quota."""
    gcp.project.machine_types = {ZONE: {"g2-standard-24": 24}}
    gcp.project.quotas[REGION].update({"PREEMPTIBLE_NVIDIA_L4_GPUS": (4, 0), "PREEMPTIBLE_CPUS": (96, 0)})
    spec = _gcp(lifecycle="created", zone=None, zones=[ZONE], concurrency=1,
                matrix={"machine_type": ["g2-standard-24"]})
    (problem,) = _problems(spec)  # a tf-mnist group: 4 members × 2 L4s = 8 at once
    assert problem.message.startswith("PREEMPTIBLE_NVIDIA_L4_GPUS in us-central1: the sweep needs 8 at once, 4 free")
    gcp.project.quotas[REGION]["PREEMPTIBLE_NVIDIA_L4_GPUS"] = (8, 0)
    assert _problems(spec) == []


def test_deploy_preflight_gcp_stopped_lifecycle_needs_the_gpu_quota_at_pulumi_up(gcp, tmp_path):
    """The stopped lifecycle creates every VM during `pulumi up` (each runs until the
    provider stops it): the runs may fit (`concurrency` 1) while the deploy does not. Said as
    its own line, with the parallelism that fits."""
    spec = _gcp(concurrency=1)  # 2 groups × 4 T4s; 8 PREEMPTIBLE free, 16 all-regions
    assert _problems(spec) == []
    gcp.project.quotas[REGION]["PREEMPTIBLE_NVIDIA_T4_GPUS"] = (5, 0)  # a group's 4 fit, not 8
    (problem,) = _problems(spec)
    assert problem.check == "deploy"
    assert problem.message.startswith("PREEMPTIBLE_NVIDIA_T4_GPUS in us-central1: `pulumi up` creates "
                                      "the VMs of all 8 GPUs (the stopped lifecycle")
    assert problem.fix.endswith("or deploy 5 VMs at a time: `pulumi up --parallel 5`")
    # the created lifecycle makes VMs at start only: the runs' footprint is all it needs
    assert _problems(_gcp(concurrency=1, lifecycle="created", zone=None, zones=[ZONE])) == []
    # runs short too: one line, the run's, whose fix names the deploy
    gcp.project.quotas[REGION]["PREEMPTIBLE_NVIDIA_T4_GPUS"] = (3, 0)
    (problem,) = _problems(spec)
    assert problem.check == "quota" and "the quota must hold then too" in problem.fix
    gcp.project.project_quotas = {"GPUS_ALL_REGIONS": (4, 0)}
    gcp.project.quotas[REGION]["PREEMPTIBLE_NVIDIA_T4_GPUS"] = (8, 0)
    (problem,) = _problems(spec)
    assert problem.check == "deploy" and problem.message.startswith("GPUS_ALL_REGIONS (project proj")


def test_preflight_limits_aws_a_region_without_the_ami_parameter_is_named_with_the_fix(aws):
    """Preflight reads the public SSM parameter of each AMI the sweep boots in its region:
    moto's us-east-1 has both ECS-optimized AL2023 ones (CPU and GPU), its mx-central-1
    neither; an `aws.ami_ssm_parameter` the region lacks is named the same way."""
    from spotbench.facts.aws import CPU_AMI_PARAMETER, GPU_AMI_PARAMETER

    ssm = boto3.client("ssm", region_name="us-east-1")
    for name in (CPU_AMI_PARAMETER, GPU_AMI_PARAMETER):
        assert ssm.get_parameter(Name=name)["Parameter"]["Value"].startswith("ami-")
    assert preflight(load_spec(_aws(concurrency=1)), None, {}) == []
    from spotbench.clouds.aws.preflight import ami_parameters

    spec = load_spec(_aws(concurrency=1))
    problems = ami_parameters(boto3.client("ssm", region_name="mx-central-1"), spec,
                              spec.plan(), "mx-central-1")
    assert [p.check for p in problems] == ["ami", "ami"]
    problem = next(p for p in problems if GPU_AMI_PARAMETER in p.message)
    assert "mx-central-1 publishes no SSM parameter" in problem.message
    assert f"aws ssm get-parameter --name {GPU_AMI_PARAMETER}" in problem.fix
    assert "aws.ami_ssm_parameter" in problem.fix
    missing = "/aws/service/ecs/optimized-ami/amazon-linux-2023/none/recommended/image_id"
    problems = preflight(load_spec(_aws(concurrency=1, aws={"ami_ssm_parameter": missing})), None, {})
    assert [p.check for p in problems] == ["ami"] and missing in problems[0].message
