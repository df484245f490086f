"""Per-role provisioning (issue #36) in both clouds' programs under Pulumi mocks: a reserved
master — tf-mnist's chief and parameter server `standard` (`role_provisioning`), the workers
spot — declares each member with its role's provisioning, read back from the declared
inputs: GCE `scheduling` (VMs, and a created group's role templates), EC2 instances'
`instanceMarketOptions` (spot members only) and the created lifecycle's launch templates'
market tag (the fleet request's market); each member's context says whether it is spot."""

from __future__ import annotations

import base64
import json

import yaml

from spotbench.clouds.aws.fleet import MARKET_TAG, MEMBER_TAG
from spotbench.clouds.gcp import template_name
from spotbench.member import ENV_KEY
from spotbench.spec import load_spec
from tests.infra.test_aws import INSTANCE, env_of, sweep
from tests.infra.test_gcp import CONFIG, _env, _snapshot

RESERVED = {"chief": "standard", "ps": "standard"}
TF = {"name": "tf-mnist", "strategy": "parameter_server", "workers": 2, "ps": 1, "steps": 100}
GCP_VM = "gcp:compute/instance:Instance"
GCP_TEMPLATE = "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"
AWS_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


def _gcp(**over):
    from infra.gcp import GcpSweep, GcpSweepArgs

    spec = load_spec({"name": "gr", "cloud": "gcp", "zone": "us-central1-b", "workload": TF,
                      "matrix": {"machine_type": ["n1-standard-2"]}, "deadline": "40m",
                      "role_provisioning": RESERVED, "schedule": {"cron": "0 4 * * *"}, **over})
    return spec, _snapshot(CONFIG, lambda: GcpSweep(spec.name, GcpSweepArgs(spec=spec)))


def _context(user_data: str) -> dict:
    doc = yaml.safe_load(user_data.removeprefix("#cloud-config\n"))
    return json.loads(_env(doc)[ENV_KEY])


def test_multinode_per_role_provisioning_gcp_vms_follow_their_role():
    spec, snap = _gcp()
    [group] = spec.plan()
    vms = {v.inputs["name"]: v.inputs for v in snap.of_type(GCP_VM)}
    assert sorted(vms) == sorted(m.name for m in group.members) and len(vms) == 4
    for m in group.members:
        s = vms[m.name]["scheduling"]
        if m.role in RESERVED:
            assert (s["provisioningModel"], s["preemptible"], s["automaticRestart"]) == (
                "STANDARD", False, True), m.name
        else:
            assert (s["provisioningModel"], s["preemptible"], s["automaticRestart"]) == (
                "SPOT", True, False), m.name
        # the deadline holds for a STANDARD VM too (GCE limits any VM's run time but a
        # legacy preemptible one's): the platform's dead-man switch on every member
        assert s["maxRunDuration"]["seconds"] == 40 * 60 and s["instanceTerminationAction"] == "STOP"
        assert _context(vms[m.name]["metadata"]["user-data"])["spot"] is (m.role not in RESERVED)


def test_multinode_per_role_provisioning_gcp_created_templates_one_provisioning_per_role():
    """A created group's members come from one template per role, one bulkInsert per role
    (spotbench.clouds.gcp.created): a group mixing standard and spot roles never mixes
    them in one request, and each template carries its role's scheduling."""
    spec, snap = _gcp(zone=None, region="us-central1", zones=["us-central1-a", "us-central1-b"],
                      lifecycle="created")
    [group] = spec.plan()
    assert snap.of_type(GCP_VM) == []
    templates = {t.inputs["name"]: t.inputs for t in snap.of_type(GCP_TEMPLATE)}
    assert len(templates) == 3
    for role, model in (("chief", "STANDARD"), ("ps", "STANDARD"), ("worker", "SPOT")):
        s = templates[template_name(group.id, role)]["scheduling"]
        assert s["provisioningModel"] == model and s["preemptible"] is (model == "SPOT")
        assert s["instanceTerminationAction"] == "DELETE" and s["maxRunDuration"]["seconds"] == 40 * 60


def test_multinode_per_role_provisioning_gcp_plain_string_unchanged():
    """No `role_provisioning`: every member as the spec's one `provisioning` says."""
    for provisioning, model in (("spot", "SPOT"), ("standard", "STANDARD")):
        _, snap = _gcp(role_provisioning={}, provisioning=provisioning)
        assert {v.inputs["scheduling"]["provisioningModel"] for v in snap.of_type(GCP_VM)} == {model}
    # the inverse: a standard sweep whose workers alone run spot
    spec, snap = _gcp(provisioning="standard", role_provisioning={"worker": "spot"})
    models = {v.inputs["name"]: v.inputs["scheduling"]["provisioningModel"] for v in snap.of_type(GCP_VM)}
    assert {m.role: models[m.name] for m in spec.plan()[0].members} == {
        "chief": "STANDARD", "ps": "STANDARD", "worker": "SPOT"}


def _aws(declare, **over):
    return sweep(declare, workload=TF, trials=1, matrix={"machine_type": ["c5.xlarge"]},
                 role_provisioning=RESERVED, **over)


def test_multinode_per_role_provisioning_aws_market_options_only_for_spot_roles(declare):
    spec, mocks = _aws(declare)
    [group] = spec.plan()
    declared = {i.inputs["tags"]["Name"]: i.inputs for i in mocks.of_type(INSTANCE)}
    assert sorted(declared) == sorted(m.name for m in group.members)
    for m in group.members:
        i = declared[m.name]
        if m.role in RESERVED:  # on-demand: RunInstances without market options
            assert i.get("instanceMarketOptions") is None, m.name
        else:
            market = i["instanceMarketOptions"]
            assert market["marketType"] == "spot"
            assert market["spotOptions"]["spotInstanceType"] == "persistent"
        ctx = json.loads(env_of(i["userData"])[ENV_KEY])
        assert ctx["spot"] is (m.role not in RESERVED)


def test_multinode_per_role_provisioning_aws_created_templates_carry_each_members_market(declare):
    spec, mocks = _aws(declare, zone=None, zones=["eu-west-1a", "eu-west-1b"], lifecycle="created")
    [group] = spec.plan()
    assert not mocks.of_type(INSTANCE)
    roles = {m.name: m.role for m in group.members}
    templates = mocks.of_type(AWS_TEMPLATE)
    assert len(templates) == len(roles) * 2
    for t in templates:
        tags = t.inputs["tags"]
        role = roles[tags[MEMBER_TAG]]
        assert tags[MARKET_TAG] == ("on-demand" if role in RESERVED else "spot"), tags
        assert "instanceMarketOptions" not in t.inputs  # the fleet request sets the market
        doc = base64.b64decode(t.inputs["userData"]).decode()
        assert json.loads(env_of(doc)[ENV_KEY])["spot"] is (role not in RESERVED)


def _cli(*args: str) -> str:
    from typer.testing import CliRunner

    from spotbench.cli import app

    out = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    assert out.exit_code == 0, out.output
    return out.output


def test_multinode_per_role_provisioning_preview_of_both_clouds_shows_each_roles_provisioning():
    """`spotbench preview --json` of the reserved-master examples: every VM names its role
    and its provisioning (GCE `provisioningModel`, EC2 `market`), as the role says."""
    from tests.infra.test_aws import ROOT

    shown = {"gcp": ("provisioningModel", {"standard": "STANDARD", "spot": "SPOT"}),
             "aws": ("market", {"standard": "on-demand", "spot": "spot persistent stop"})}
    for cloud, (key, value) in shown.items():
        path = ROOT / "examples" / f"{cloud}-tf-reserved.yaml"
        spec = load_spec(path)
        want = {m.name: value[m.provisioning] for g in spec.plan() for m in g.members}
        assert set(want.values()) == set(value.values())  # the example mixes both
        rows = json.loads(_cli("preview", str(path), "--json"))
        vms = {r["name"]: r["properties"] for r in rows if r["type"] in (GCP_VM, INSTANCE)}
        got = {p.get("role"): set() for p in vms.values()}
        for p in vms.values():
            got[p["role"]].add(p[key])
        assert got == {r: {value[spec.provisioning_of(r)]} for r in ("chief", "ps", "worker")}, got
        assert len(vms) == len(want)
        text = _cli("preview", str(path))
        assert 'role="chief"' in text and f'{key}="{value["standard"]}"' in text


def test_multinode_per_role_provisioning_plan_names_each_members_provisioning():
    from tests.infra.test_aws import ROOT

    path = ROOT / "examples" / "aws-tf-reserved.yaml"
    groups = json.loads(_cli("plan", str(path), "--json"))
    assert {(m["role"], m["provisioning"]) for g in groups for m in g["members"]} == {
        ("chief", "standard"), ("ps", "standard"), ("worker", "spot")}
    assert "provisioning: spot, but chief: standard, ps: standard" in _cli("plan", str(path))
