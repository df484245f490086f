"""The guardrail policy fences per-role provisioning (issue #36): `spot_only` refuses every
standard role, `standard_roles` names the only roles that may run standard (a reserved
master); each refusal names the field and its value, and a spec's own policy can only
tighten the team's."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.policy import Policy, effective, load_policy, violations
from spotbench.spec import load_spec

TF = {"name": "tf-mnist", "strategy": "parameter_server", "workers": 2, "ps": 1}
RESERVED = {"chief": "standard", "ps": "standard"}


def _spec(**over):
    return load_spec({"name": "g", "cloud": "gcp", "zone": "us-central1-a", "gcp": {"project": "p"},
                      "workload": TF, "matrix": {"machine_type": ["n1-standard-2"]},
                      "role_provisioning": RESERVED, **over})


def test_multinode_per_role_provisioning_policy_spot_only_refuses_each_standard_role():
    assert violations(_spec(), Policy(spot_only=True)) == [
        "role_provisioning.chief 'standard': the policy allows spot VMs only",
        "role_provisioning.ps 'standard': the policy allows spot VMs only"]
    assert violations(_spec(role_provisioning={}), Policy(spot_only=True)) == []


def test_multinode_per_role_provisioning_policy_standard_only_for_named_roles():
    assert violations(_spec(), Policy(spot_only=True, standard_roles=["chief", "ps"])) == []
    assert violations(_spec(), Policy(standard_roles=["chief"])) == [
        "role_provisioning.ps 'standard': the policy allows standard VMs only for roles chief "
        "(standard_roles)"]
    # a standard default makes every role not overridden standard: the field is named
    lines = violations(_spec(provisioning="standard", role_provisioning={"chief": "standard"}),
                       Policy(standard_roles=["chief"]))
    assert lines == ["provisioning 'standard': the policy allows standard VMs only for roles chief "
                     "(standard_roles) (provisioning: spot)"]
    assert violations(_spec(), Policy(standard_roles=[])) == [
        "role_provisioning.chief 'standard': the policy allows spot VMs only",
        "role_provisioning.ps 'standard': the policy allows spot VMs only"]


def test_multinode_per_role_provisioning_policy_a_spec_cannot_loosen_the_teams(tmp_path):
    spec = _spec(policy={"standard_roles": ["chief", "ps"]})
    team = {"SPOTBENCH_POLICY": json.dumps({"spot_only": True})}  # no standard role at all
    policy = load_policy(spec, None, env=team)
    assert policy.spot_only and policy.standard_roles == []
    carried, problems = effective(spec, None, env=team)
    assert len(problems) == 2 and all("spot VMs only" in p for p in problems)
    assert carried.policy["standard_roles"] == []  # what the start function re-checks
    assert Policy(standard_roles=["chief"]).merged(Policy(standard_roles=["chief", "ps"])).standard_roles == ["chief"]
    assert Policy().merged(Policy(standard_roles=["ps"])).standard_roles == ["ps"]


def test_multinode_per_role_provisioning_policy_plan_refuses_with_field_and_value(tmp_path, monkeypatch):
    monkeypatch.delenv("SPOTBENCH_POLICY", raising=False)
    monkeypatch.chdir(tmp_path)
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(yaml.safe_dump(_spec().model_dump(mode="json")))
    runner = CliRunner()
    (tmp_path / "spotbench-policy.yaml").write_text(yaml.safe_dump({"standard_roles": ["chief"]}))
    result = runner.invoke(app, ["plan", str(spec_file)])
    assert result.exit_code == 2, result.output
    assert "role_provisioning.ps 'standard'" in result.output and "roles chief" in result.output
    (tmp_path / "spotbench-policy.yaml").write_text(yaml.safe_dump({"standard_roles": ["chief", "ps"]}))
    assert runner.invoke(app, ["plan", str(spec_file)]).exit_code == 0
