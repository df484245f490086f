"""Guardrails: what a team lead allows sweeps to ask for, checked before anything costs money.

A policy is YAML, set once: `spotbench-policy.yaml` files and/or a `policy:` block in the
spec itself. Every file found counts — the team's (`SPOTBENCH_POLICY`: a path, or the
policy as JSON; and the current folder's) and the one next to the spec — merged with the
spec's block so that each limit is the strictest of them: a spec's folder (which whoever
writes the spec controls) can only tighten the team's policy, never replace it. Every
field is optional; a missing field allows anything:

    clouds: [gcp]                      # allowed clouds
    regions: [us-central1, europe-west4]
    machine_families: [n2, e2, g2]     # the part before the first '-' (GCP) or '.' (AWS), of
                                       # every member's type (role_machine_types too)
    accelerators: [nvidia-tesla-t4]    # [] forbids GPUs, attached or built into the type
    spot_only: true                    # provisioning must be spot/preemptible (every role's)
    standard_roles: [chief, ps]        # the only roles that may run standard (a reserved
                                       # master, `role_provisioning`); with spot_only: its exceptions
    max_vms_per_group: 8
    max_gpus_per_group: 4              # counted from the catalog: a2/a3/g2, p*/g* types
    max_vms_per_sweep: 16              # VMs running at once (the largest concurrent footprint)
    max_gpus_per_sweep: 8
    max_deadline: 2h
    required_labels: [team, cost-center]   # keys the spec's `labels:` must set

`violations(spec, policy)` lists one line per violation naming the field, the value and
the limit. `plan`, `preflight`, `preview`, `pulumi up` (infra/config.py) and the `start`
function (the deployed policy travels as `SPOTBENCH_POLICY`) refuse a violating sweep.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from spotbench.catalog import UNKNOWN_COUNT, machine_family, vm_gpus
from spotbench.facts import facts_of
from spotbench.plan import RunGroup, concurrent_footprint
from spotbench.spec import SweepSpec, parse_duration

POLICY_FILE = "spotbench-policy.yaml"
ENV = "SPOTBENCH_POLICY"  # a path to a policy file, or the policy as JSON (functions)


class PolicyError(ValueError):
    """The policy itself is unreadable or invalid."""


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    clouds: list[str] | None = None
    regions: list[str] | None = None
    machine_families: list[str] | None = None
    accelerators: list[str] | None = None
    spot_only: bool = False
    standard_roles: list[str] | None = None  # roles that may run standard (None: any, unless spot_only)
    max_vms_per_group: int | None = Field(None, ge=1)
    max_gpus_per_group: int | None = Field(None, ge=0)
    max_vms_per_sweep: int | None = Field(None, ge=1)
    max_gpus_per_sweep: int | None = Field(None, ge=0)
    max_deadline: timedelta | None = None
    required_labels: list[str] = Field(default_factory=list)

    @field_validator("max_deadline", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        return None if v is None else parse_duration(v)

    def merged(self, other: Policy | None) -> Policy:
        """Both policies at once (each limit: the stricter one)."""
        if other is None:
            return self
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            a, b = getattr(self, name), getattr(other, name)
            if name == "required_labels":
                out[name] = sorted(set(a) | set(b))
            elif name == "spot_only":
                out[name] = a or b
            elif name == "standard_roles":  # the roles both allow standard (spot_only: none)
                ea, eb = self.standard_allowed(), other.standard_allowed()
                out[name] = eb if ea is None else ea if eb is None else [x for x in ea if x in eb]
            elif a is None or b is None:
                out[name] = b if a is None else a
            elif isinstance(a, list):
                out[name] = [x for x in a if x in b]
            else:
                out[name] = min(a, b)
        return Policy.model_validate(out)

    def standard_allowed(self) -> list[str] | None:
        """The roles that may run standard VMs: `standard_roles`, else none under
        `spot_only`, else any (None)."""
        if self.standard_roles is not None:
            return self.standard_roles
        return [] if self.spot_only else None


def parse_policy(data: Any, origin: str) -> Policy:
    if not isinstance(data, Mapping):
        raise PolicyError(f"{origin}: a policy is a mapping of fields")
    try:
        return Policy.model_validate(dict(data))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise PolicyError(f"{origin}: {problems}") from None


def _read_file(path: Path) -> Policy:
    try:
        return parse_policy(yaml.safe_load(path.read_text()), str(path))
    except yaml.YAMLError as exc:
        raise PolicyError(f"{path}: not valid YAML: {exc}") from None


def _merge(policies: list[Policy | None]) -> Policy | None:
    out: Policy | None = None
    for policy in policies:
        if policy is not None:
            out = policy if out is None else out.merged(policy)
    return out


def load_policy(spec: SweepSpec, spec_path: Path | None = None,
                env: Mapping[str, str] | None = None) -> Policy | None:  # fmt: skip
    """Every policy that applies, merged to the strictest: `SPOTBENCH_POLICY` (JSON or a
    file), the current folder's file, the file next to the spec, the spec's `policy:`."""
    env = os.environ if env is None else env
    found: list[Policy | None] = []
    raw = env.get(ENV)
    if raw and raw.lstrip().startswith("{"):
        found.append(parse_policy(json.loads(raw), ENV))
    elif raw:
        if not Path(raw).is_file():
            raise PolicyError(f"{ENV}={raw}: no such policy file")
        found.append(_read_file(Path(raw)))
    seen = {Path(raw).resolve()} if raw and not raw.lstrip().startswith("{") else set()
    candidates = [Path.cwd() / POLICY_FILE]
    if spec_path is not None:
        candidates.append(Path(spec_path).resolve().parent / POLICY_FILE)
    for path in candidates:
        if path.is_file() and path.resolve() not in seen:
            seen.add(path.resolve())
            found.append(_read_file(path))
    found.append(parse_policy(spec.policy, f"spec {spec.name}: policy") if spec.policy else None)
    return _merge(found)


def effective(spec: SweepSpec, spec_path: Path | None = None,
              env: Mapping[str, str] | None = None) -> tuple[SweepSpec, list[str]]:  # fmt: skip
    """(the spec carrying its effective policy as `policy:`, the violations).

    Deploys embed the policy in the spec, so the functions (SPOTBENCH_SPEC) check the
    same policy on every start, whatever the function's own environment says.
    """
    policy = load_policy(spec, spec_path, env)
    if policy is None:
        return spec, []
    carried = spec.model_copy(update={
        "policy": policy.model_dump(mode="json", exclude_defaults=True)})
    return carried, violations(spec, policy)


def member_types(group: RunGroup) -> list[str]:
    """Every member's machine type (a role's override, else the group's)."""
    return [m.machine_type or group.machine_type for m in group.members]


def member_gpus(group: RunGroup, cloud: str) -> list[tuple[str | None, int]]:
    """(GPU, count) per member: its type's built-in GPUs (a2/a3/g2, EC2 p*/g*), else the
    group's attached accelerator (GCE attaches it to every member)."""
    catalog = facts_of(cloud).catalog if cloud else None
    return [vm_gpus(catalog, t, group.accelerator, group.accelerator_count) for t in member_types(group)]


def group_gpus(group: RunGroup, cloud: str = "") -> int:
    """GPUs of the whole group; `UNKNOWN_COUNT` when a member's type carries GPUs in a
    number the catalog does not know."""
    counts = [n for _, n in member_gpus(group, cloud)]
    return UNKNOWN_COUNT if UNKNOWN_COUNT in counts else sum(counts)


def violations(spec: SweepSpec, policy: Policy | None) -> list[str]:
    """One line per violation: the spec field, its value, and what the policy allows."""
    if policy is None:
        return []
    sweep = _Checked(spec, policy, spec.plan())
    return [line for rule in RULES for line in rule(sweep)]


@dataclass
class _Checked:
    """A spec under a policy, with what the rules read of it."""

    spec: SweepSpec
    policy: Policy
    groups: list[RunGroup]

    def __post_init__(self) -> None:
        self.facts = facts_of(self.spec.cloud)
        self.gpus_of = {g.id: group_gpus(g, self.spec.cloud) for g in self.groups}


def _allowed(field: str, value: str | None, choices: list[str] | None, what: str) -> list[str]:
    if choices is not None and value is not None and value not in choices:
        return [f"{field} {value!r}: the policy allows {what} {', '.join(choices) or 'none'}"]
    return []


def _cloud(c: _Checked) -> list[str]:
    return _allowed("cloud", c.spec.cloud, c.policy.clouds, "clouds")


def _region(c: _Checked) -> list[str]:
    if not c.facts.location:  # the local cloud has no places
        return []
    spec = c.spec
    zones = spec.candidate_zones or [spec.zone]  # every candidate zone must be allowed
    regions = sorted({r for z in zones if (r := c.facts.sweep_region(spec.region, z))})
    return [line for region in regions
            for line in _allowed("region", region, c.policy.regions, "regions")]


def _machine_families(c: _Checked) -> list[str]:
    allowed = c.policy.machine_families
    if allowed is None:
        return []
    types = sorted({t for g in c.groups for t in [g.machine_type, *member_types(g)]})
    family = {mt: machine_family(c.facts.catalog, mt) for mt in types}
    return [f"machine type {mt!r} (family {family[mt]}): the policy allows machine "
            f"families {', '.join(allowed) or 'none'}" for mt in types if family[mt] not in allowed]


def _accelerators(c: _Checked) -> list[str]:
    gpus = sorted({gpu for g in c.groups for gpu, n in member_gpus(g, c.spec.cloud) if gpu and n})
    return [line for acc in gpus for line in _allowed("accelerator", acc, c.policy.accelerators,
                                                      "accelerators")]


def _uncounted_gpus(c: _Checked) -> list[str]:
    if c.policy.max_gpus_per_group is None and c.policy.max_gpus_per_sweep is None:
        return []
    unknown = sorted({t for g in c.groups for t in member_types(g)
                      if vm_gpus(c.facts.catalog, t, None, 0)[1] == UNKNOWN_COUNT})
    if not unknown:
        return []
    return [f"machine type {', '.join(unknown)}: carries GPUs in a number spotbench's "
            "catalog does not know, and the policy caps GPUs; use a listed size"]


def _spot_only(c: _Checked) -> list[str]:
    """Standard members only in the roles the policy allows (`spot_only`, `standard_roles`):
    one line for the spec's `provisioning`, one per `role_provisioning` entry."""
    allowed = c.policy.standard_allowed()
    if allowed is None:
        return []
    refused = sorted({m.role for g in c.groups for m in g.members
                      if not m.spot and m.role not in allowed})
    only = (f"standard VMs only for roles {', '.join(allowed)} (standard_roles)" if allowed
            else "spot VMs only")
    out = [f"role_provisioning.{r} {c.spec.role_provisioning[r]!r}: the policy allows {only}"
           for r in refused if r in c.spec.role_provisioning]
    if any(r not in c.spec.role_provisioning for r in refused):
        out.insert(0, f"provisioning {c.spec.provisioning!r}: the policy allows {only} "
                   "(provisioning: spot)")
    return out


def _group_caps(c: _Checked) -> list[str]:
    out = []
    vms_cap, gpus_cap = c.policy.max_vms_per_group, c.policy.max_gpus_per_group
    for g in c.groups:
        if vms_cap is not None and len(g.members) > vms_cap:
            out.append(f"group {g.id}: {len(g.members)} VMs; the policy allows {vms_cap} per group")
        if gpus_cap is not None and c.gpus_of[g.id] > gpus_cap:
            out.append(f"group {g.id}: {c.gpus_of[g.id]} GPUs; the policy allows {gpus_cap} per group")
    return out


def _sweep_vms(c: _Checked) -> list[str]:
    vms = concurrent_footprint(c.spec, c.groups, lambda g: len(g.members))
    cap = c.policy.max_vms_per_sweep
    if cap is None or vms <= cap:
        return []
    return [f"{vms} VMs at once (concurrency {c.spec.max_concurrency or 'all groups'}); the "
            f"policy allows {cap} per sweep: set `concurrency` lower"]


def _sweep_gpus(c: _Checked) -> list[str]:
    gpus = concurrent_footprint(c.spec, c.groups, lambda g: max(c.gpus_of[g.id], 0))
    cap = c.policy.max_gpus_per_sweep
    if cap is None or gpus <= cap:
        return []
    return [f"{gpus} GPUs at once; the policy allows {cap} per sweep: set `concurrency` lower"]


def _deadline(c: _Checked) -> list[str]:
    most = c.policy.max_deadline
    if most is None or c.spec.deadline <= most:
        return []
    return [f"deadline {c.spec.deadline}: the policy allows at most {most}"]


def _labels(c: _Checked) -> list[str]:
    missing = [k for k in c.policy.required_labels if not c.spec.labels.get(k)]
    if not missing:
        return []
    return [f"labels: missing {', '.join(missing)} (the policy requires "
            f"{', '.join(c.policy.required_labels)}; add them under `labels:`)"]


# every rule, in the order its lines are listed
RULES: tuple[Callable[[_Checked], list[str]], ...] = (
    _cloud, _region, _machine_families, _accelerators, _uncounted_gpus, _spot_only,
    _group_caps, _sweep_vms, _sweep_gpus, _deadline, _labels,
)
