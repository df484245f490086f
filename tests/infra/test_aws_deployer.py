"""The deployer's permissions (infra/aws/deployer.py) cover every resource type the AWS
program declares, and docs/aws.md lists every action of that policy."""

from __future__ import annotations

from pathlib import Path

import yaml

from infra.aws.deployer import ACTIONS, deployer_policy
from spotbench.clouds.aws.orphans import teardown_policy

ROOT = Path(__file__).resolve().parents[2]


def _actions(doc: dict) -> set[str]:
    out: set[str] = set()
    for s in doc["Statement"]:
        out |= {s["Action"]} if isinstance(s["Action"], str) else set(s["Action"])
    return out


def test_aws_deployer_policy_covers_every_declared_resource_type(run_program):
    declared: set[str] = set()
    for stack in ("aws-osu", "aws-tf-gpu"):
        config = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
        mocks = run_program({k: str(v) for k, v in config.items()})
        declared |= {d.type for d in mocks.declared if d.custom}
    declared.discard("pulumi:providers:aws")
    declared = {t for t in declared if t.startswith("aws:")}
    assert "aws:ec2/instance:Instance" in declared  # the spot members too (market options)
    assert sorted(declared - set(ACTIONS)) == []  # a new resource type needs its permissions


def test_aws_docs_list_the_deployer_and_teardown_permissions():
    text = (ROOT / "docs" / "aws.md").read_text()
    missing = sorted(a for a in _actions(deployer_policy()) | _actions(teardown_policy())
                     if f"`{a}`" not in text)
    assert missing == [], f"docs/aws.md does not list: {missing}"
