"""A sweep torn down and deployed again in the same project: GCP keeps a deleted custom
role's id. For 7 days the role can be undeleted (the Google provider's create does that);
from day 7 to day 37 the id can be neither undeleted nor reused ("You can't create a role_id
(…) which has been marked for deletion"); after day 37 it is free again
(cloud.google.com/iam/docs/creating-custom-roles#deleting-custom-role). With fixed ids, a
`spotbench teardown` followed by `pulumi up` a week or more later failed for a month."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from tests.infra.test_gcp import _spec, _sweep

ROLE = "gcp:projects/iAMCustomRole:IAMCustomRole"
RANDOM_ID = "random:index/randomId:RandomId"


class FailedPrecondition(Exception):
    pass


@dataclass
class CustomRoles:
    """IAM's custom-role ids in one project, with their soft-deletion windows."""

    deleted_at: dict[str, datetime] = field(default_factory=dict)
    live: set[str] = field(default_factory=set)

    def create(self, role_id: str, now: datetime) -> str:
        if role_id in self.live:
            raise FailedPrecondition(f"role {role_id} already exists")
        gone = self.deleted_at.get(role_id)
        if gone is not None and now - gone < timedelta(days=7):
            del self.deleted_at[role_id]  # the provider undeletes it, then updates it
        elif gone is not None and now - gone < timedelta(days=37):
            raise FailedPrecondition(
                f"You can't create a role_id ({role_id}) which has been marked for deletion.")
        self.live.add(role_id)
        return role_id

    def delete(self, role_id: str, now: datetime) -> None:
        self.live.discard(role_id)
        self.deleted_at[role_id] = now


def _role_ids(snapshot) -> list[str]:
    return [r.inputs["roleId"] for r in snapshot.of_type(ROLE)]


@pytest.mark.fidelity
@pytest.mark.parametrize("days_later", [1, 10, 30])
def test_gcp_a_sweep_redeployed_after_teardown_creates_its_custom_roles(days_later):
    spec = _spec(gcp={"operators": ["user:ops@example.com"]})
    iam, t0 = CustomRoles(), datetime(2026, 11, 1)
    first = _role_ids(_sweep(spec))
    for rid in first:
        iam.create(rid, t0)
    for rid in first:  # `spotbench teardown`: pulumi destroy
        iam.delete(rid, t0 + timedelta(hours=1))
    second = _role_ids(_sweep(spec))  # a fresh stack: `pulumi up` again
    for rid in second:
        iam.create(rid, t0 + timedelta(days=days_later))
    assert len(second) == len(first) == 4  # start/stop, list, sign (issue #29), ops
    for rid in second:
        assert re.fullmatch(r"[a-zA-Z0-9_.]{3,64}", rid), rid


def test_gcp_role_tag_is_kept_by_later_updates_of_the_same_stack():
    """The tag is a RandomId whose only keeper is the sweep's name: an update of the same
    stack keeps it (and so the roles and their bindings), whatever else the spec changes."""
    snap = _sweep(_spec())
    (tag,) = [r for r in snap.of_type(RANDOM_ID) if r.name.endswith("-role-tag")]  # not the key seed
    assert tag.inputs["keepers"] == {"sweep": "t"}
    assert tag.inputs["byteLength"] == 3
