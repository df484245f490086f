"""Planning: matrix × trials → groups with stable ids, labels and roles."""

from __future__ import annotations

import re

from spotbench.plan import Member, RunGroup, plan
from spotbench.spec import load_spec


def spec(**extra):
    base = {"name": "p", "workload": {"name": "tf-mnist", "ps": 2},
            "matrix": {"workers": [1, 3], "machine_type": ["a", "b"]}, "trials": 2}
    return load_spec({**base, **extra})


def test_matrix_times_trials() -> None:
    groups = plan(spec())
    assert len(groups) == 2 * 2 * 2
    assert {(g.machine_type, g.params.workers, g.trial) for g in groups} == {
        (m, w, t) for m in "ab" for w in (1, 3) for t in (1, 2)
    }


def test_ids_are_stable_and_unique() -> None:
    ids = [g.id for g in plan(spec())]
    assert ids == [g.id for g in plan(spec())]
    assert len(set(ids)) == len(ids)
    reordered = load_spec({"name": "p", "workload": {"name": "tf-mnist", "ps": 2}, "trials": 2,
                           "matrix": {"machine_type": ["a", "b"], "workers": [1, 3]}})
    assert sorted(ids) == sorted(g.id for g in plan(reordered))


def test_labels_and_member_names_follow_cloud_rules() -> None:
    for group in plan(spec()):
        assert group.labels["managed-by"] == "spotbench"
        assert group.labels["spotbench-sweep"] == "p"
        assert group.labels["spotbench-group"] == group.id
        for member in group.members:
            assert re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", member.name)
            assert group.member_labels(member)["spotbench-role"] == member.role


def test_roles_per_workload() -> None:
    ps = [g for g in plan(spec()) if g.params.workers == 3][0]
    assert [m.role for m in ps.members] == ["chief", "ps", "ps", "worker", "worker", "worker"]
    assert [m.rank for m in ps.members] == list(range(6))
    mwm = plan(load_spec({"name": "m", "workload": {"name": "tf-mnist", "strategy": "multi_worker_mirrored", "workers": 2}}))
    assert [m.role for m in mwm[0].members] == ["worker", "worker"]
    osu = plan(load_spec({"name": "o", "workload": {"name": "osu"}}))
    assert [m.role for m in osu[0].members] == ["launcher", "peer"]
    group, member = find_member(osu, osu[0].members[1].name)
    assert group is osu[0] and member.role == "peer"


def test_placement_can_be_a_matrix_key() -> None:
    spec = load_spec({"name": "pl", "workload": {"name": "osu"}, "placement": "spread",
                      "matrix": {"placement": ["compact", "spread"]}, "trials": 2})
    groups = plan(spec)
    assert sorted(g.placement for g in groups) == ["compact", "compact", "spread", "spread"]
    assert len({g.id for g in groups}) == 4
    assert all("placement" not in g.params.model_dump() for g in groups)
    assert plan(load_spec({"name": "p2", "workload": {"name": "osu"}, "placement": "spread"}))[0].placement == "spread"


def find_member(groups: list[RunGroup], name: str) -> tuple[RunGroup, Member]:
    """(Was spotbench.plan.find_member, which nothing but this test used.)"""
    for group in groups:
        for member in group.members:
            if member.name == name:
                return group, member
    raise KeyError(name)
