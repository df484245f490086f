"""Expand a sweep spec into run groups: one group = the VMs of one matrix point × trial.

Ids are stable (the same spec gives the same ids) so that a re-plan, a restarted runner or
a Pulumi update finds the same groups again. Labels follow cloud label rules (lowercase,
≤ 63 characters) so they can be put on GCE instances and EC2 tags alike.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from spotbench.facts import facts_of
from spotbench.labels import (
    GROUP_LABEL, MANAGED_BY, ROLE_LABEL, SWEEP_LABEL, name_prefix, sweep_labels,
)
from spotbench.search.spec import SearchSpec
from spotbench.workload import Params, Workload
from spotbench.workload_registry import get_workload

__all__ = [
    "GROUP_LABEL", "MANAGED_BY", "ROLE_LABEL", "SWEEP_LABEL", "Member", "PlannedSpec", "RunGroup",
    "concurrent_footprint", "plan", "provisionings", "sweep_labels",
]


class PlannedSpec(Protocol):
    """What planning reads of a sweep spec (`spotbench.spec.SweepSpec` is one; plan sits
    below spec and never imports it)."""

    name: str
    cloud: str
    trials: int
    placement: str
    role_machine_types: dict[str, str]
    search: SearchSpec | None

    def provisioning_of(self, role: str) -> str: ...

    @property
    def max_concurrency(self) -> int | None: ...

    def points(self) -> list[dict[str, Any]]: ...

    def params_for(self, point: dict[str, Any]) -> Params: ...


@dataclass(frozen=True)
class Member:
    """One VM (or local process) of a group, with its task role."""

    name: str
    role: str  # osu: launcher|peer · tf: chief|ps|worker
    index: int  # index within its role (ps 0, worker 2, …)
    rank: int  # position within the group, 0-based
    machine_type: str = ""  # the VM's type: the group's, or the spec's role override
    provisioning: str = "spot"  # spot | preemptible | standard: the spec's, or its role's

    @property
    def spot(self) -> bool:
        """Whether this member runs spot/preemptible (else standard: on-demand)."""
        return self.provisioning != "standard"


@dataclass(frozen=True)
class RunGroup:
    id: str
    sweep: str
    trial: int  # 1-based
    point: dict[str, Any]  # the matrix values of this group
    params: Params  # the workload's config model, with this point's values
    machine_type: str
    accelerator: str | None
    accelerator_count: int
    members: tuple[Member, ...]
    placement: str = "none"  # spread | compact | none (the spec's, or the matrix point's)
    labels: dict[str, str] = field(default_factory=dict)
    scaling: dict[str, Any] | None = None  # the spec's `scaling` {axis, base}
    work: dict[str, Any] | None = None  # the spec's `work` {epochs | steps}

    @property
    def workload(self) -> str:
        return self.params.name

    @property
    def descriptor(self) -> Workload:
        return get_workload(self.params.name)

    def member(self, name: str) -> Member:
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(f"{name} is not a member of group {self.id}")

    def member_labels(self, member: Member) -> dict[str, str]:
        return {**self.labels, ROLE_LABEL: member.role}

    @property
    def record_params(self) -> dict[str, Any]:
        """The parameters this group's records carry: the workload's config, and each
        parameter of its point that is no field of it (a search's `${name}`) by name."""
        own = self.params.model_dump()
        extra = {k: v for k, v in self.point.items() if k not in own and k not in MACHINE_KEYS}
        return {**own, **extra}


def provisionings(groups: list[RunGroup]) -> set[str]:
    """Every provisioning a member of `groups` runs with (spot, preemptible, standard)."""
    return {m.provisioning for g in groups for m in g.members}


def point_key(point: dict[str, Any]) -> str:
    """Short stable hash of a matrix point (order of keys does not matter)."""
    blob = json.dumps(point, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:6]


def concurrent_footprint(spec: PlannedSpec, groups: list[RunGroup],
                         size: Callable[[RunGroup], float]) -> float:
    """The largest total of `size(group)` over the groups that may run at once: the spec's
    `max_concurrency` largest groups (policy's limits and preflight's quota both count it)."""
    values = sorted((size(g) for g in groups), reverse=True)
    return sum(values[: spec.max_concurrency or len(values)])


def _dumped(spec: PlannedSpec, name: str) -> dict[str, Any] | None:
    """The spec's optional section `name` as plain data (a spec without it: None)."""
    value = getattr(spec, name, None)
    return value.model_dump(exclude_none=True) if value is not None else None


MACHINE_KEYS = ("machine_type", "accelerator", "accelerator_count", "placement")


def search_group_id(sweep: str, trial: int, repeat: int) -> str:
    """A search trial's group: `x<trial>` where a matrix point has its hash, `-t<repeat>`."""
    return f"{name_prefix(sweep)}x{trial:04d}-t{repeat}"


def plan(spec: PlannedSpec) -> list[RunGroup]:
    """Matrix: every point × `trials`. Search: trial 1…n × `repeats` (an adaptive search's
    trials are planned with its fixed values; control asks each one's parameters)."""
    if spec.search is not None:
        search = spec.search
        points = spec.points() or [search.fixed()] * (search.n or 0)
        return [_group(spec, search_group_id(spec.name, trial, repeat), trial, point)
                for trial, point in enumerate(points, start=1)
                for repeat in range(1, search.repeats + 1)]
    return [_group(spec, f"{name_prefix(spec.name)}{point_key(point)}-t{trial}", trial, point)
            for point in spec.points() for trial in range(1, spec.trials + 1)]


def _group(spec: PlannedSpec, gid: str, trial: int, point: dict[str, Any]) -> RunGroup:
    params = spec.params_for(point)
    workload = get_workload(params.name)
    machine_type = point.get("machine_type", facts_of(spec.cloud).default_machine_type)
    if machine_type is None:
        raise ValueError(f"{spec.name}: matrix.machine_type is required for cloud {spec.cloud}")
    accelerator = point.get("accelerator") or None
    members = tuple(
        Member(name=f"{gid}-{workload.member_code(role)}{index}", role=role, index=index, rank=rank,
               machine_type=spec.role_machine_types.get(role, str(machine_type)),
               provisioning=spec.provisioning_of(role))
        for rank, (role, index) in enumerate(workload.roles(params))
    )
    return RunGroup(
        id=gid, sweep=spec.name, trial=trial, point=dict(point), params=params,
        machine_type=str(machine_type), accelerator=accelerator,
        accelerator_count=int(point.get("accelerator_count", 1 if accelerator else 0)),
        members=members, placement=str(point.get("placement", spec.placement)),
        labels={**sweep_labels(spec.name), GROUP_LABEL: gid},
        scaling=_dumped(spec, "scaling"), work=_dumped(spec, "work"),
    )
