"""Guardrails: a team policy refuses sweeps that ask for more than it allows, at every gate
(plan, preview, the Pulumi program, the deployed start function), one line per violation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from functions.app import FunctionConfig, handle
from spotbench.auth import Caller
from spotbench.cli import app
from spotbench.policy import POLICY_FILE, Policy, PolicyError, effective, load_policy, violations
from spotbench.spec import load_spec
from tests.infra.conftest import declare, mocks, run_program  # noqa: F401 - Pulumi mock fixtures

POLICY = {
    "clouds": ["gcp"], "regions": ["europe-west4"], "machine_families": ["e2"],
    "accelerators": [], "spot_only": True, "max_vms_per_group": 3, "max_gpus_per_group": 0,
    "max_vms_per_sweep": 3, "max_gpus_per_sweep": 0, "max_deadline": "30m",
    "required_labels": ["team", "cost-center"],
}


def _aws(**over) -> dict:
    spec = {k: v for k, v in _gcp(**over).items() if k != "gcp"}
    return {**spec, "cloud": "aws", "region": "us-east-1", "zone": None, **over}


def _gcp(**over) -> dict:
    base = {"name": "g", "cloud": "gcp", "zone": "us-central1-a", "gcp": {"project": "p"},
            "workload": {"name": "tf-mnist", "workers": 2},
            "matrix": {"machine_type": ["n1-standard-4"], "accelerator": ["nvidia-tesla-t4"]},
            "provisioning": "standard", "schedule": {"cron": "0 3 * * *"}, "deadline": "1h",
            "labels": {"team": "ml"}}
    return {**base, **over}


def test_guardrail_every_field_reports_one_line_naming_value_and_limit():
    lines = violations(load_spec(_gcp()), Policy.model_validate(POLICY))
    text = "\n".join(lines)
    for expected in ("region 'us-central1'", "machine type 'n1-standard-4' (family n1)",
                     "accelerator 'nvidia-tesla-t4'", "provisioning 'standard'",
                     "4 VMs; the policy allows 3 per group", "GPUs; the policy allows 0 per group",
                     "VMs at once", "GPUs at once", "deadline 1:00:00", "missing cost-center"):
        assert expected in text, (expected, lines)
    assert len(lines) == 10
    ok = _gcp(zone="europe-west4-a", matrix={"machine_type": ["e2-standard-2"]},
              provisioning="spot", deadline="20m", concurrency=1,
              workload={"name": "tf-mnist", "workers": 1}, labels={"team": "ml", "cost-center": "x"})
    assert violations(load_spec(ok), Policy.model_validate(POLICY)) == []
    assert violations(load_spec(_gcp(cloud="aws", region="us-east-1", zone=None,
                                         matrix={"machine_type": ["c5.large"]})),
                      Policy(clouds=["gcp"]))[0].startswith("cloud 'aws'")


def test_guardrail_file_and_spec_policy_merge_to_the_stricter(tmp_path, monkeypatch):
    monkeypatch.delenv("SPOTBENCH_POLICY", raising=False)
    (tmp_path / POLICY_FILE).write_text(yaml.safe_dump({"max_vms_per_group": 8,
                                                        "machine_families": ["n1", "e2"]}))
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(yaml.safe_dump(_gcp(policy={"max_vms_per_group": 3,
                                                     "machine_families": ["n1", "n2"]})))
    spec = load_spec(spec_file)
    policy = load_policy(spec, spec_file, env={})
    assert policy.max_vms_per_group == 3 and policy.machine_families == ["n1"]
    carried, problems = effective(spec, spec_file, env={})
    assert carried.policy == {"machine_families": ["n1"], "max_vms_per_group": 3}
    assert problems == ["group g-" + spec.plan()[0].id.split("-", 1)[1] + ": 4 VMs; the policy allows 3 per group"]
    with pytest.raises(PolicyError, match="max_vms_per_group"):
        load_policy(spec, spec_file, env={"SPOTBENCH_POLICY": '{"max_vms_per_group": 0}'})


def test_guardrail_plan_and_preview_refuse_with_one_line_per_violation(tmp_path, monkeypatch):
    monkeypatch.delenv("SPOTBENCH_POLICY", raising=False)
    monkeypatch.chdir(tmp_path)
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(yaml.safe_dump(_gcp()))
    runner = CliRunner()
    assert runner.invoke(app, ["plan", str(spec_file)]).exit_code == 0
    (tmp_path / POLICY_FILE).write_text(yaml.safe_dump({"max_deadline": "30m", "spot_only": True}))
    for command in (["plan", str(spec_file)], ["preview", str(spec_file)]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2, result.output
        lines = [l for l in result.output.splitlines() if l.strip().startswith("- ")]
        assert len(lines) == 2, result.output
        assert "deadline 1:00:00: the policy allows at most 0:30:00" in result.output
        assert "spot VMs only" in result.output


def test_guardrail_pulumi_program_refuses_and_deploys_the_policy_with_the_spec(
        tmp_path, monkeypatch, run_program):
    monkeypatch.delenv("SPOTBENCH_POLICY", raising=False)
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(yaml.safe_dump(_gcp(provisioning="spot", matrix={"machine_type": ["n1-standard-4"]})))
    (tmp_path / POLICY_FILE).write_text(yaml.safe_dump({"machine_families": ["n1"], "max_deadline": "2h"}))
    config = {"gcp:project": "p", "spotbench:spec": str(spec_file)}
    snap = run_program(config)
    fn = snap.of_type("gcp:cloudfunctionsv2/function:Function")[0]
    deployed = json.loads(fn.inputs["serviceConfig"]["environmentVariables"]["SPOTBENCH_SPEC"])
    assert deployed["policy"] == {"machine_families": ["n1"], "max_deadline": "PT2H"}
    (tmp_path / POLICY_FILE).write_text(yaml.safe_dump({"machine_families": ["e2"]}))
    with pytest.raises(Exception, match=r"breaks the policy[\s\S]*family n1"):
        run_program(config)


def test_guardrail_start_function_refuses_a_deployed_sweep_edited_past_its_policy(tmp_path):
    spec = load_spec({"name": "loc", "workload": {"name": "tf-mnist", "workers": 3},
                      "deadline": "2h", "results": f"file://{tmp_path}/results",
                      "policy": {"max_deadline": "1h", "max_vms_per_group": 2}})
    env = {"SPOTBENCH_CLOUD": "local", "SPOTBENCH_SPEC": spec.model_dump_json(),
           "SPOTBENCH_STATE_DIR": str(tmp_path / "state")}
    status, body = handle("start", {}, Caller("scheduler", "sched"), FunctionConfig(env))
    assert status == 403 and "nothing started" in body["error"]
    assert len(body["violations"]) == 2 and any("deadline" in v for v in body["violations"])
    assert not (tmp_path / "results").exists()  # no run opened, nothing started
    # the team policy deployed beside it applies too
    within = spec.model_copy(update={"policy": None, "deadline": spec.deadline / 4})
    env = {**env, "SPOTBENCH_SPEC": within.model_dump_json(),
           "SPOTBENCH_POLICY": json.dumps({"max_vms_per_group": 1})}
    status, body = handle("start", {}, Caller("scheduler", "sched"), FunctionConfig(env))
    assert status == 403 and body["violations"][0].endswith("allows 1 per group")


# ---- attacks on the guardrails (issue 24: 5) ------------------------------------------------
@pytest.mark.security
def test_guardrail_every_members_machine_type_is_checked():
    """`role_machine_types` put a worker on a family the policy forbids."""
    spec = load_spec(_gcp(matrix={"machine_type": ["e2-standard-4"]},
                          role_machine_types={"worker": "a2-highgpu-8g"}))
    lines = violations(spec, Policy(machine_families=["e2"]))
    assert any("'a2-highgpu-8g' (family a2)" in line for line in lines), lines


def test_guardrail_machine_families_are_the_catalogs(monkeypatch):
    """The policy names a type's family by its cloud's catalog (the one home of the rule),
    not a copy of its own."""
    from spotbench.catalog import GcpCatalog

    spec = load_spec(_gcp(matrix={"machine_type": ["e2-standard-4"]}))
    assert violations(spec, Policy(machine_families=["e2"])) == []
    monkeypatch.setattr(GcpCatalog, "family", lambda self, machine_type: "from-the-catalog")
    assert violations(spec, Policy(machine_families=["from-the-catalog"])) == []
    assert violations(spec, Policy(machine_families=["e2"])) == [
        "machine type 'e2-standard-4' (family from-the-catalog): the policy allows machine families e2"]


@pytest.mark.security
@pytest.mark.parametrize("cloud,machine,gpu,count", [
    ("gcp", "g2-standard-48", "nvidia-l4", 4), ("gcp", "a2-highgpu-2g", "nvidia-tesla-a100", 2),
    ("aws", "p4d.24xlarge", "nvidia-a100", 8), ("aws", "g5.12xlarge", "nvidia-a10g", 4)])
def test_guardrail_gpus_built_into_a_machine_type_are_counted(cloud, machine, gpu, count):
    make = _gcp if cloud == "gcp" else _aws
    spec = load_spec(make(matrix={"machine_type": [machine]},
                          workload={"name": "tf-mnist", "workers": 1}, concurrency=1))
    members = len(spec.plan()[0].members)
    lines = violations(spec, Policy(max_gpus_per_group=0, max_gpus_per_sweep=1, accelerators=[]))
    text = "\n".join(lines)
    assert f"{count * members} GPUs; the policy allows 0 per group" in text, lines
    assert f"{count * members} GPUs at once" in text, lines
    assert f"accelerator {gpu!r}" in text, lines


@pytest.mark.security
def test_guardrail_a_gpu_type_of_unknown_size_is_refused_under_a_gpu_cap():
    spec = load_spec(_aws(matrix={"machine_type": ["p5.4xlarge"]}))
    lines = violations(spec, Policy(max_gpus_per_sweep=64))
    assert any("p5.4xlarge" in line and "does not know" in line for line in lines), lines


@pytest.mark.security
def test_guardrail_a_policy_beside_the_spec_only_tightens_the_teams(tmp_path, monkeypatch):
    """The spec's folder holds a permissive `spotbench-policy.yaml`: the team's (current
    folder, or SPOTBENCH_POLICY) still applies."""
    team, mine = tmp_path / "team", tmp_path / "mine"
    team.mkdir()
    mine.mkdir()
    (team / POLICY_FILE).write_text(yaml.safe_dump({"machine_families": ["e2"], "max_vms_per_group": 2}))
    (mine / POLICY_FILE).write_text(yaml.safe_dump({"machine_families": ["e2", "n1", "a2"],
                                                    "max_vms_per_group": 100, "max_deadline": "2h"}))
    spec_file = mine / "s.yaml"
    spec_file.write_text(yaml.safe_dump(_gcp()))
    spec = load_spec(spec_file)
    monkeypatch.delenv("SPOTBENCH_POLICY", raising=False)
    monkeypatch.chdir(team)
    policy = load_policy(spec, spec_file, env={})
    assert policy.machine_families == ["e2"] and policy.max_vms_per_group == 2
    assert policy.max_deadline is not None  # the spec folder's own tightening still counts
    monkeypatch.chdir(tmp_path)  # the team's file named by SPOTBENCH_POLICY
    policy = load_policy(spec, spec_file, env={"SPOTBENCH_POLICY": str(team / POLICY_FILE)})
    assert policy.machine_families == ["e2"] and policy.max_vms_per_group == 2
    _, problems = effective(spec, spec_file, env={"SPOTBENCH_POLICY": str(team / POLICY_FILE)})
    assert any("family n1" in p for p in problems), problems


def test_guardrail_every_candidate_zone_must_be_in_an_allowed_region():
    """`zones:` (issue #26): a candidate outside the allowed regions is named, not just the
    first; with `region` given every candidate is of it (the spec checks hold that)."""
    spec = load_spec(_gcp(zone=None, zones=["europe-west4-a", "europe-west4-b"], lifecycle="created"))
    assert not [v for v in violations(spec, Policy(regions=["europe-west4"])) if "region" in v]
    spec = load_spec(_gcp(zone=None, region="us-central1", zones="any", lifecycle="created"))
    lines = violations(spec, Policy(regions=["europe-west4"]))
    assert [v for v in lines if v.startswith("region 'us-central1'")], lines


@pytest.mark.security
@pytest.mark.parametrize("machine,chip,count", [
    ("trn1.32xlarge", "aws-trainium", 16), ("inf2.24xlarge", "aws-inferentia2", 6)])
def test_guardrail_accelerators_that_are_not_gpus_pass_no_policy_forbidding_gpus(machine, chip, count):
    """Trainium and Inferentia types passed `accelerators: []` and a GPU cap of 0 (issue 38)."""
    spec = load_spec(_aws(matrix={"machine_type": [machine]}, workload={"name": "tf-mnist", "workers": 1},
                          concurrency=1))
    members = len(spec.plan()[0].members)
    text = "\n".join(violations(spec, Policy(max_gpus_per_group=0, accelerators=[])))
    assert f"{count * members} GPUs; the policy allows 0 per group" in text, text
    assert f"accelerator {chip!r}" in text, text
