"""A 500-group AWS sweep plans, previews (the real program under mocks) and passes preflight
(moto), with the same IAM objects as a 2-group one (issue #29: identities per sweep).

Before #29 every group declared its own role, instance profile and role policy: 500 groups
were 1,500 IAM objects, half of AWS's default 1,000 roles per account.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml
from moto import mock_aws
from moto.servicequotas.models import ServiceQuotasBackend

from spotbench.clouds.aws.preflight import SWEEP_INSTANCE_PROFILES, SWEEP_ROLES, iam_room
from spotbench.preflight import preflight
from spotbench.spec import load_spec

IAM = ("aws:iam/role:Role", "aws:iam/rolePolicy:RolePolicy",
       "aws:iam/instanceProfile:InstanceProfile", "aws:iam/policy:Policy",
       "aws:iam/rolePolicyAttachment:RolePolicyAttachment")


def _spec(trials: int) -> dict:
    # `container`: one VM a group, so 500 groups stay cheap to declare
    return {"name": "wide", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
            "image": "docker.io/library/python:3.12-slim",
            "workload": {"name": "container", "command": ["python", "-c", "print('x=1 s')"]},
            "matrix": {"machine_type": ["c5.large", "c5.xlarge", "m5.large", "m5.xlarge",
                                        "c5n.large"]},
            "trials": trials, "concurrency": 10, "schedule": {"cron": "0 3 * * *"},
            "deadline": "30m", "aws": {"subnet_cidr": "10.43.0.0/22"}}


def _preview(tmp_path: Path, trials: int) -> Counter:
    from infra.preview import preview

    path = tmp_path / f"wide{trials}.yaml"
    path.write_text(yaml.safe_dump(_spec(trials)))
    return Counter(d.type for d in preview(path))


@pytest.fixture
def aws(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("SPOTBENCH_POLICY", raising=False)

    def get_service_quota(self, service_code: str, quota_code: str) -> dict:
        if (service_code, quota_code) != ("ec2", "L-34B43A08"):  # moto serves VPC quotas only
            raise KeyError(quota_code)
        return {"ServiceCode": "ec2", "QuotaCode": quota_code, "Value": 64.0}

    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", get_service_quota)
    with mock_aws():
        yield


def test_aws_500_groups_plan_preview_and_pass_preflight_with_constant_iam_objects(tmp_path, aws):
    spec = load_spec(_spec(100))
    assert len(spec.plan()) == 500
    assert preflight(spec, None, {}) == []  # moto: types, the spot vCPU quota, IAM room
    big, small = _preview(tmp_path, 100), _preview(tmp_path, 1)
    assert big["aws:ec2/instance:Instance"] == 500 and small["aws:ec2/instance:Instance"] == 5
    iam = {t: big[t] for t in IAM if big[t]}
    assert iam == {t: small[t] for t in IAM if small[t]}
    assert iam == {"aws:iam/role:Role": SWEEP_ROLES, "aws:iam/rolePolicy:RolePolicy": 5,
                   "aws:iam/instanceProfile:InstanceProfile": SWEEP_INSTANCE_PROFILES}


def test_aws_preflight_says_when_the_account_has_no_room_for_the_sweeps_roles():
    class Iam:
        def __init__(self, summary):
            self.summary = summary

        def get_account_summary(self):
            return {"SummaryMap": self.summary}

    assert iam_room(Iam({"Roles": 996, "RolesQuota": 1000, "InstanceProfiles": 3,
                         "InstanceProfilesQuota": 1000})) == []
    (problem,) = iam_room(Iam({"Roles": 997, "RolesQuota": 1000, "InstanceProfiles": 3,
                               "InstanceProfilesQuota": 1000}))
    assert problem.check == "iam-quota" and "has 997 of 1000; the sweep adds 4" in problem.message
    assert "spotbench teardown" in problem.fix
