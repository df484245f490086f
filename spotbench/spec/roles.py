"""A sweep spec's per-role sections (issue #36): `role_machine_types` (a role's machine type)
and `role_provisioning` (a role's provisioning: a reserved master, e.g. tf-mnist's chief and
parameter servers `standard` while the workers run spot). Both map a role of the spec's
workload (its descriptor's `roles`: tf-mnist chief/ps/worker, torch worker, osu
launcher/peer, container member) to its value; a role they do not name keeps the group's
machine type and the spec's `provisioning`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

Provisioning = Literal["spot", "preemptible", "standard"]


def check_roles(workload: str, roles: Iterable[str], sections: Mapping[str, Mapping[str, Any]]) -> None:
    """ValueError naming the section, the role and the workload's roles when a section
    (`role_machine_types`, `role_provisioning`) names a role the workload does not have."""
    known = sorted(set(roles))
    for field, given in sections.items():
        for role in given:
            if role not in known:
                raise ValueError(f"{field}.{role}: {workload} has no role {role!r}; "
                                 f"its roles are {', '.join(known)}")
