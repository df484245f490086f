"""The neutral instance → group rule and the grant shape (spotbench/auth/instance.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spotbench.auth import Forbidden
from spotbench.auth.instance import (
    Grant,
    InstanceClaim,
    InstanceRefused,
    LiveInstance,
    Roster,
    deadline_of,
    group_of,
)

ROSTER = Roster("s", "proj", {"s--aa-t1-l0": "s--aa-t1", "s--aa-t1-p0": "s--aa-t1",
                              "s--bb-t1-l0": "s--bb-t1"})
LIVE = {"s--aa-t1-l0": LiveInstance("101", "s--aa-t1-l0", "s--aa-t1"),
        "s--bb-t1-l0": LiveInstance("202", "s--bb-t1-l0", "s--bb-t1")}


def lookup(claim: InstanceClaim) -> LiveInstance | None:
    return LIVE.get(claim.instance_name)


def claim(name: str, iid: str, account: str = "proj") -> InstanceClaim:
    return InstanceClaim(iid, name, "us-central1-a", account)


def test_a_live_member_with_its_id_is_its_planned_group():
    assert group_of(claim("s--aa-t1-l0", "101"), ROSTER, lookup) == "s--aa-t1"
    assert group_of(claim("s--bb-t1-l0", "202"), ROSTER, lookup) == "s--bb-t1"


@pytest.mark.parametrize("c, reason", [
    (claim("s--aa-t1-l0", "101", account="other"), "other-account"),
    (claim("t--aa-t1-l0", "101"), "not-a-member"),  # an instance of another sweep
    (claim("s--aa-t1-p0", "103"), "no-such-instance"),  # planned, not live
    (claim("s--aa-t1-l0", "202"), "id-mismatch"),  # another instance's id under this name
])
def test_anything_else_is_refused_with_its_reason(c, reason):
    with pytest.raises(InstanceRefused) as err:
        group_of(c, ROSTER, lookup)
    assert err.value.reason == reason
    assert isinstance(err.value, Forbidden)


def test_a_relabelled_instance_is_refused():
    def relabelled(c):
        return LiveInstance("101", "s--aa-t1-l0", "s--bb-t1")
    with pytest.raises(InstanceRefused) as err:
        group_of(claim("s--aa-t1-l0", "101"), ROSTER, relabelled)
    assert err.value.reason == "group-mismatch"


def test_roster_of_plan_maps_every_member_to_its_group():
    from spotbench.plan import plan
    from spotbench.spec import load_spec

    from pathlib import Path

    spec = load_spec(Path(__file__).parents[2] / "examples" / "gcp-osu.yaml")
    groups = plan(spec)
    roster = Roster.of_plan(spec.name, "p", groups)
    assert len(groups) > 1
    assert len(roster.members) == sum(len(g.members) for g in groups)
    assert {roster.members[m.name] for g in groups for m in g.members} == {g.id for g in groups}


def test_grant_covers_only_its_prefixes_until_its_deadline():
    end = datetime(2026, 1, 1, 12, tzinfo=UTC)
    g = Grant.for_group("s--aa-t1", "20260101T110000Z", end, checkpoints=True)
    before = end - timedelta(seconds=1)
    assert g.prefixes == ("runs/20260101T110000Z/s--aa-t1.", "checkpoints/s--aa-t1/")
    assert g.allows("runs/20260101T110000Z/s--aa-t1.1.jsonl", before)
    assert g.allows("checkpoints/s--aa-t1/20260101T110000Z/ckpt-1.index", before)
    assert not g.allows("runs/20260101T110000Z/s--aa-t1.1.jsonl", end)  # at the deadline
    assert not g.allows("runs/20260101T110000Z/s--bb-t1.1.jsonl", before)
    assert not g.allows("runs/20260101T110000Z/s--aa-t10.1.jsonl", before)
    assert not g.allows("runs/20260101T110000Z/s--aa-t1./../run.json", before)
    assert not g.allows("checkpoints/s--bb-t1/x", before)
    assert Grant.from_json(g.to_json()) == g


def test_grant_prefixes_refuse_ids_that_escape():
    with pytest.raises(ValueError):
        Grant.for_group("../x", "r", datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError):
        deadline_of(datetime(2026, 1, 1), timedelta(hours=1))
