"""Attack: read a group's ssh private keys where anyone allowed to describe an instance can.

User-data is returned by `ec2:DescribeInstanceAttribute` (any operator, any tool with
read-only EC2 access) and served by IMDS to every process on the VM. The login and host
private keys of each run group must not be in it, nor the sweep's one key seed they derive
from (`spotbench.auth.group_keys`): a SecureString parameter `/spotbench/<sweep>/key-seed.hex`,
which only the functions' role may read; the function derives and hands a group's keys to
that group's instances only (its `/keys` path, which the boot asks; issue #29). The enforcing account (tests/iam) proves the refusals with moto and the real
function; here, the declared program: every member's user-data, every parameter and every
role's policy.
"""

from __future__ import annotations

import base64
import json

import pytest

from spotbench.auth.group_keys import private_openssh
from spotbench.clouds.aws.identity import member_role_name
from spotbench.spec import load_spec
from tests.iam.policy import Authorization, evaluate

pytestmark = pytest.mark.security

PARAMETER = "aws:ssm/parameter:Parameter"
POLICY = "aws:iam/rolePolicy:RolePolicy"
ROLE = "aws:iam/role:Role"
SPEC = {"name": "kx", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
        "workload": {"name": "osu"}, "matrix": {"machine_type": ["c5n.large"]}, "trials": 2,
        "results": "s3://kx-bucket/kx", "schedule": {"cron": "0 3 * * *", "timezone": "UTC"},
        "deadline": "45m", "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/spotbench/osu:1"}


def _raw(openssh: str) -> bytes:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_ssh_private_key(openssh.encode(), None)
    return key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                             serialization.NoEncryption())


def test_aws_user_data_holds_no_private_key_and_each_group_reads_only_its_own(declare):
    from infra.aws import AwsSweep, AwsSweepArgs

    spec = load_spec(SPEC)
    mocks = declare(lambda: AwsSweep(spec.name, AwsSweepArgs(spec=spec)))
    groups = [g.id for g in spec.plan()]
    params = {p.inputs["name"]: p.inputs for p in mocks.of_type(PARAMETER)}
    assert sorted(params) == ["/spotbench/kx/key-seed.hex"]  # one per sweep, not per group
    seed = params["/spotbench/kx/key-seed.hex"]["value"]
    keys = {f"{g}/{f}": private_openssh(bytes.fromhex(seed), g, f) for g in groups
            for f in ("id_ed25519", "ssh_host_ed25519_key")}
    assert all(p["type"] == "SecureString" for p in params.values())
    assert all("BEGIN OPENSSH PRIVATE KEY" in k for k in keys.values())
    assert len(set(keys.values())) == len(keys)  # per group, per key
    # (an OpenSSH text carries random check integers: the keys themselves must differ too)
    raw = {n: _raw(k) for n, k in keys.items()}
    assert len(set(raw.values())) == len(raw)

    members = [*mocks.of_type("aws:ec2/instance:Instance"),
               *mocks.of_type("aws:ec2/spotInstanceRequest:SpotInstanceRequest")]
    assert len(members) == 4
    for inst in members:
        user_data = inst.inputs["userData"]
        assert "PRIVATE KEY" not in user_data and seed not in user_data
        for key in keys.values():
            body = [line for line in key.splitlines() if line and "-----" not in line]
            assert not any(line in user_data for line in body)
            assert base64.b64encode(key.encode()).decode() not in user_data
        for secret in raw.values():
            assert secret.hex() not in user_data
            assert base64.b64encode(secret).decode() not in user_data

    role_ids = {f"{r.name}-id": r.inputs["name"] for r in mocks.of_type(ROLE)}
    policies = {role_ids[p.inputs["role"]]: json.loads(p.inputs["policy"])
                for p in mocks.of_type(POLICY)}
    readers = {role for role, doc in policies.items()
               if any(evaluate([doc], Authorization(
                   "ssm:GetParameter", f"arn:aws:ssm:us-east-1:123456789012:parameter{n}"))
                   for n in params)}
    assert readers == {"kx-lambda"}  # the functions alone; no member, grant or scheduler role
    assert member_role_name("kx", "us-east-1") in policies
    lam = policies["kx-lambda"]
    assert not evaluate([lam], Authorization(  # and only this sweep's path
        "ssm:GetParameter", "arn:aws:ssm:us-east-1:123456789012:parameter/spotbench/kx2/g/id_ed25519"))
