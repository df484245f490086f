"""A `container` sweep's declared secret env (`secret_env`: API tokens, passwords) is a
secret (issue 24: 6, 8; declared since #35, the rest of `env` being parameters):

- never in a record, `records.csv` or the report (a real local run);
- never in GCE metadata or EC2 user-data (readable by anyone allowed to describe the
  instance, and on the VM by any process reaching the metadata server), nor in the
  functions' configuration: delivered at boot from Secret Manager / SSM Parameter Store,
  readable by the group's own identity only (Pulumi program under mocks);
- env keys and values cannot add lines to the docker env-file.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pulumi
import pytest
import yaml

from infra.units import env_file
from spotbench.clouds.aws.identity import member_role_name
from spotbench.spec import SpecError, load_spec
from tests.iam.policy import Authorization, evaluate
from tests.infra.conftest import snapshot as _declared
from tests.test_e2e_local import cli

pytestmark = pytest.mark.security

SECRET = "tok-3f9a1c7e5b2d-SECRET"
ENV = {"API_TOKEN": SECRET, "MODE": "fast"}
BASE = {"name": "byo", "schedule": {"cron": "0 3 * * *"}, "deadline": "20m",
        "image": "docker.io/library/python:3.12-slim",
        "workload": {"name": "container", "command": ["python", "-c", "print('x=1 s')"], "env": ENV,
                     "secret_env": ["API_TOKEN"]}}


def _forms(value: str) -> list[str]:
    return [value, base64.b64encode(value.encode()).decode(),
            base64.b64encode(f"API_TOKEN={value}\n".encode()).decode()[:20]]


def _leaks(obj: object, value: str) -> bool:
    text = json.dumps(obj, default=str)
    return any(form in text for form in _forms(value))


# ---- env-file injection ---------------------------------------------------------------------
@pytest.mark.parametrize("env", [{"X\nLD_PRELOAD": "/tmp/evil.so"}, {"A B": "1"}, {"1A": "1"},
                                 {"": "1"}, {"A": "1\nLD_PRELOAD=/tmp/evil.so"}, {"A": "1\r2"},
                                 {"A": "1\x002"}])
def test_env_that_would_add_lines_to_the_env_file_is_refused(env):
    with pytest.raises(SpecError, match="env"):
        load_spec({**BASE, "cloud": "local", "workload": {**BASE["workload"], "env": env}})
    with pytest.raises(ValueError, match="env"):
        env_file(env)


# ---- clouds: what the program declares --------------------------------------------------------
def _secret_holders(mocks, *types: str) -> tuple[list, list]:
    holders = [d for d in mocks.declared if d.type in types]
    others = [d for d in mocks.declared if d.type not in types]
    return holders, others


@pytest.mark.fidelity
def test_gcp_container_env_is_in_secret_manager_for_its_group_only_never_in_metadata():
    from infra.gcp import GcpSweep, GcpSweepArgs

    spec = load_spec({**BASE, "cloud": "gcp", "zone": "us-central1-a", "trials": 2,
                      "matrix": {"machine_type": ["e2-standard-2"]}})
    mocks = _declared(lambda: GcpSweep(spec.name, GcpSweepArgs(spec=spec)),
                      {"gcp:project": "proj-1", "gcp:region": "us-central1"})
    versions, others = _secret_holders(mocks, "gcp:secretmanager/secretVersion:SecretVersion")
    leaking = [f"{d.type} {d.name}" for d in others if _leaks(d.inputs, SECRET)]
    assert not leaking, f"the env value is declared outside Secret Manager: {leaking}"
    holding = [v for v in versions if SECRET in str(v.inputs.get("secretData"))]
    # issue #29: the sweep's one secret holds each distinct env once; only the functions'
    # account reads it, and `grant` hands a group's env to that group's instances alone
    # (tests/security/test_gcp_grant.py)
    assert len(holding) == 1, "the sweep's one secret holds the env file"
    instances = mocks.of_type("gcp:compute/instance:Instance")
    grants = mocks.of_type("gcp:secretmanager/secretIamMember:SecretIamMember")
    functions = {f.inputs["serviceConfig"]["serviceAccountEmail"]
                 for f in mocks.of_type("gcp:cloudfunctionsv2/function:Function")}
    readers = {g.inputs["member"] for g in grants}
    assert readers == {f"serviceAccount:{e}" for e in functions}, readers
    for vm in instances:
        account = vm.inputs["serviceAccount"]["email"]
        user_data = vm.inputs["metadata"]["user-data"]
        assert "fetch-keys" in user_data and "fetch env /" in user_data, "fetched at boot"
        assert f"serviceAccount:{account}" not in readers


@pytest.mark.fidelity
def test_aws_container_env_is_an_ssm_securestring_for_its_group_only_never_in_user_data():
    from infra.aws import AwsSweep, AwsSweepArgs

    spec = load_spec({**BASE, "cloud": "aws", "region": "eu-west-1", "zone": "eu-west-1a",
                      "trials": 2, "matrix": {"machine_type": ["c5.large"]},
                      "results": "s3://res-bucket/runs/byo"})
    mocks = _declared(lambda: AwsSweep(spec.name, AwsSweepArgs(spec=spec)), {})
    params, others = _secret_holders(mocks, "aws:ssm/parameter:Parameter")
    leaking = [f"{d.type} {d.name}" for d in others if _leaks(d.inputs, SECRET)]
    assert not leaking, f"the env value is declared outside SSM: {leaking}"
    holding = {p.inputs["name"]: p.inputs for p in params
               if SECRET in base64.b64decode(str(p.inputs["value"])).decode(errors="replace")}
    groups = [g.id for g in spec.plan()]
    assert sorted(holding) == sorted(f"/spotbench/byo/{g}/user.env" for g in groups)
    assert all(p["type"] == "SecureString" for p in holding.values())
    members = [*mocks.of_type("aws:ec2/spotInstanceRequest:SpotInstanceRequest"),
               *mocks.of_type("aws:ec2/instance:Instance")]
    assert len(members) == 2
    for vm in members:
        group = vm.inputs["tags"]["spotbench-group"]
        assert group.startswith("byo--")
        # fetched at boot from the function's `/keys` (which answers its own group's only)
        assert "put user.env " in vm.inputs["userData"] and "/keys" in vm.inputs["userData"]
    role_ids = {f"{r.name}-id": r.inputs["name"] for r in mocks.of_type("aws:iam/role:Role")}
    policies = {role_ids[p.inputs["role"]]: json.loads(p.inputs["policy"])
                for p in mocks.of_type("aws:iam/rolePolicy:RolePolicy")}
    assert member_role_name("byo", "eu-west-1") in policies
    for role, doc in policies.items():  # the functions read it (for its group), nobody else
        for name in holding:
            arn = f"arn:aws:ssm:eu-west-1:123456789012:parameter{name}"
            allowed = bool(evaluate([doc], Authorization("ssm:GetParameter", arn)))
            assert allowed == (role == "byo-lambda"), (role, name)


@pytest.mark.fidelity
def test_aws_an_env_larger_than_one_standard_parameter_is_refused_before_deploy():
    from infra.aws.secrets import STANDARD_VALUE_MAX, EnvTooLarge, user_env_parameter

    text = "A=" + "x" * (STANDARD_VALUE_MAX * 3 // 4) + "\n"
    with pytest.raises(EnvTooLarge, match="shorten `env`"):
        user_env_parameter("n", "s", "g", text, {}, pulumi.ResourceOptions())


# ---- local: a real run --------------------------------------------------------------------
BENCH = """
import os
TOKEN = SECRET_HERE
print("token_seen=%d flag" % (os.environ.get("API_TOKEN") == TOKEN))
"""


def test_local_run_delivers_env_but_stores_it_nowhere(tmp_path: Path) -> None:
    script = tmp_path / "bench.py"
    script.write_text(BENCH.replace("SECRET_HERE", repr(SECRET)))
    spec = {"name": "byo", "cloud": "local", "deadline": "2m", "results": str(tmp_path / "results"),
            "workload": {"name": "container", "command": [sys.executable, str(script)], "env": ENV,
                         "secret_env": ["API_TOKEN"]}}
    path = tmp_path / "byo.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = cli(tmp_path, "run", str(path), "--report-dir", str(tmp_path / "report"))
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    stored = [p for p in (tmp_path / "results").rglob("*") if p.is_file()]
    records = [p for p in stored if p.suffix == ".jsonl"]
    seen = [json.loads(line) for p in records for line in p.read_text().splitlines()]
    assert [(r["metric"], r["value"]) for r in seen] == [("token_seen", 1.0)], "the command saw its env"
    reports = [p for p in (tmp_path / "report").rglob("*") if p.is_file()]
    assert any(p.name == "records.csv" for p in reports)
    for p in stored + reports:
        assert SECRET.encode() not in p.read_bytes(), f"{p} holds the env value"
