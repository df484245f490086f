"""`role_provisioning` in the spec (issue #36): a role's own provisioning over `provisioning`,
checked against the workload's roles (errors name the field, the role, the valid roles, or
the value and its choices); the plain string form keeps working unchanged."""

from __future__ import annotations

import pytest

from spotbench.spec import SpecError, load_spec

TF = {"name": "tf-mnist", "strategy": "parameter_server", "workers": 2, "ps": 1}
BASE = {"name": "r", "workload": TF, "role_provisioning": {"chief": "standard", "ps": "standard"}}


def _error(**over) -> str:
    with pytest.raises(SpecError) as info:
        load_spec({**BASE, **over}, origin="r.yaml")
    return str(info.value)


def test_multinode_per_role_provisioning_each_member_follows_its_role():
    spec = load_spec(BASE)
    [group] = spec.plan()
    assert [(m.role, m.provisioning, m.spot) for m in group.members] == [
        ("chief", "standard", False), ("ps", "standard", False),
        ("worker", "spot", True), ("worker", "spot", True)]
    assert spec.provisioning == "spot" and spec.spot  # the default stays the spec's field
    # `spot: false` (the shorthand) sets the default; a role overrides it the other way
    inverse = load_spec({**BASE, "spot": False, "role_provisioning": {"worker": "preemptible"}})
    assert {(m.role, m.provisioning) for m in inverse.plan()[0].members} == {
        ("chief", "standard"), ("ps", "standard"), ("worker", "preemptible")}
    # round trip: the dumped spec (what a deploy embeds) loads to the same members
    again = load_spec(spec.model_dump(mode="json"))
    assert again == spec and again.plan()[0].members == group.members


def test_multinode_per_role_provisioning_plain_string_unchanged():
    for value in ("spot", "preemptible", "standard"):
        spec = load_spec({**BASE, "role_provisioning": {}, "provisioning": value})
        assert {m.provisioning for m in spec.plan()[0].members} == {value}
        assert spec.role_provisioning == {}


@pytest.mark.parametrize("workload, role, roles", [
    (TF, "master", "chief, ps, worker"),
    ({"name": "tf-mnist", "strategy": "multi_worker_mirrored", "workers": 2}, "chief", "worker"),
    ({"name": "osu"}, "chief", "launcher, peer"),
    ({"name": "torch"}, "leader", "worker"),
    ({"name": "container", "command": ["true"], "nodes": 2}, "leader", "member"),
])
def test_multinode_per_role_provisioning_unknown_role_names_field_role_and_valid_roles(workload, role, roles):
    text = _error(workload=workload, role_provisioning={role: "standard"})
    assert f"role_provisioning.{role}:" in text and repr(role) in text
    assert f"its roles are {roles}" in text


def test_multinode_per_role_provisioning_bad_value_names_field_value_and_choices():
    text = _error(role_provisioning={"chief": "reserved"})
    assert "role_provisioning.chief" in text and "'reserved'" in text
    assert "'spot', 'preemptible' or 'standard'" in text


def test_multinode_per_role_provisioning_aws_placement_refuses_a_spot_role():
    """EC2 places no spot instance that stops on interruption in a placement group: a
    standard sweep with one spot role and `placement` is refused like a spot sweep."""
    aws = {**BASE, "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
           "matrix": {"machine_type": ["c5n.large"]}, "placement": "compact",
           "provisioning": "standard", "role_provisioning": {}}
    load_spec(aws)  # all standard: a cluster placement group takes them
    text = _error(**{k: v for k, v in aws.items() if k != "role_provisioning"},
                  role_provisioning={"worker": "spot"})
    assert "placement" in text and "spot instance" in text
