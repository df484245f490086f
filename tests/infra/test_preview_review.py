"""`spotbench preview` shows what a reviewer needs before `pulumi up`: every firewall /
security-group rule (protocol, ports, sources, targets) and every IAM policy document and
role binding, in the table and in `--json`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
RULE_TYPES = {"gcp:compute/firewall:Firewall",
              "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
              "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"}


def _preview(example: str, *extra: str):
    from spotbench.cli import app

    result = CliRunner().invoke(app, ["preview", str(ROOT / example), *extra],
                                env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def rows():
    return {ex: json.loads(_preview(ex, "--json"))
            for ex in ("examples/gcp-osu.yaml", "examples/aws-osu.yaml")}


def test_json_shows_every_network_rule(rows):
    for example, declared in rows.items():
        rules = [r for r in declared if r["type"] in RULE_TYPES]
        assert rules, example
        for r in rules:
            shown = r["properties"]["rules"]
            assert shown, r
            for rule in shown:
                assert rule["protocol"] and rule["ports"] and rule["sources"] and rule["targets"]
        members = [rule for r in rules for rule in r["properties"]["rules"]
                   if rule["direction"] == "INGRESS" and "sourceRanges" not in rule["sources"]]
        assert {(m["protocol"], m["ports"]) for m in members} <= {
            ("tcp", "all"), ("udp", "all"), ("tcp", "0-65535"), ("udp", "0-65535")}
        wide = [rule for r in rules for rule in r["properties"]["rules"]
                if "0.0.0.0/0" in json.dumps(rule)]
        # the only rule open to the internet is AWS egress (image pulls, S3, done URL)
        assert all(w["direction"] == "EGRESS" for w in wide), wide


def test_json_shows_every_iam_document_and_binding(rows):
    aws = rows["examples/aws-osu.yaml"]
    policies = [r for r in aws if r["type"] == "aws:iam/rolePolicy:RolePolicy"]
    assert len(policies) >= 3
    for p in policies:
        assert p["properties"]["policy"]["Statement"], p
    for role in (r for r in aws if r["type"] == "aws:iam/role:Role"):
        assert role["properties"]["assumeRolePolicy"]["Statement"], role
    gcp = rows["examples/gcp-osu.yaml"]
    bindings = [r for r in gcp if "IAMMember" in r["type"] or "IamMember" in r["type"]]
    assert bindings and all(b["properties"]["role"] and b["properties"]["member"]
                            for b in bindings)


def test_table_shows_rules_and_policies():
    text = _preview("examples/aws-osu.yaml")
    assert '"protocol": "udp"' in text and "referencedSecurityGroupId" in text
    assert "policy=" in text and "PutResults" in text
