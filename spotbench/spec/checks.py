"""Offline checks of a valid spec against what its cloud accepts (`spotbench.catalog`).

`check(spec)` returns the problems `pulumi up` (or the cloud's API behind it) would fail
on, and warnings for names the shipped catalog does not list but the cloud may know (a
newer zone or machine type). `load_spec` raises the errors as a `SpecError`; the CLI prints
the warnings. Each problem is (field path, value, message), like the schema's own.

Checked for gcp and aws: zone and region (known, of this cloud, consistent), machine types
of the matrix and of `role_machine_types` (with "did you mean"), accelerators and their
count on each member's machine type, placement vs machine family and provisioning, the
schedule (stop cron = start + deadline expressible, deadline shorter than the gap between
starts, EventBridge's cron rules on aws); a missing schedule is a warning (plan and
estimate work without one; `pulumi up` refuses it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from spotbench.search.spec import SearchSpec
from spotbench import catalog
from spotbench.spec.errors import _MISSING
from spotbench.cron import CronShiftError
from spotbench.facts import facts_of

Problem = tuple[str, Any, str]


class CheckedSchedule(Protocol):
    @property
    def cron(self) -> str: ...


class CheckedSpec(Protocol):
    """What the checks read of a valid spec (`spotbench.spec.SweepSpec` is one; spec.checks
    sits below spec, which calls it from `load_spec`)."""

    @property
    def cloud(self) -> str: ...
    @property
    def region(self) -> str | None: ...
    @property
    def zone(self) -> str | None: ...
    @property
    def candidate_zones(self) -> list[str]: ...
    @property
    def lifecycle(self) -> str: ...
    @property
    def placement(self) -> str: ...
    @property
    def spot(self) -> bool: ...
    @property
    def matrix(self) -> dict[str, list[Any]]: ...
    @property
    def search(self) -> SearchSpec | None: ...
    @property
    def role_machine_types(self) -> dict[str, str]: ...
    @property
    def role_provisioning(self) -> dict[str, str]: ...
    @property
    def deadline(self) -> timedelta: ...
    @property
    def schedule(self) -> CheckedSchedule | str | None: ...

    def points(self) -> list[dict[str, Any]]: ...


@dataclass
class Findings:
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    def add(self, path: str, value: Any, check: catalog.Check) -> None:
        if check.verdict == "bad":
            self.errors.append((path, value, check.message))
        elif check.verdict == "unlisted":
            self.warnings.append((path, value, check.message))


def check(spec: CheckedSpec) -> Findings:
    """Findings for a `SweepSpec` (local specs have none: the local cloud takes anything)."""
    found = Findings()
    cat = facts_of(spec.cloud).catalog
    if cat is None:
        return found
    _location(spec, cat, found)
    types = _machine_types(spec, cat, found)
    if types is None:
        return found
    bad_types = {v for p, v, _ in found.errors if p.startswith(("matrix.machine_type", "role_machine_types"))}
    seen: set[tuple[str, ...]] = set()
    spot = spec.spot or any(p != "standard" for p in spec.role_provisioning.values())  # a role's too
    for point in spec.points():
        group_type = str(point["machine_type"])
        accelerator = point.get("accelerator") or None
        count = int(point.get("accelerator_count", 1 if accelerator else 0))
        placement = str(point.get("placement", spec.placement))
        member_types = {group_type} | {spec.role_machine_types[r] for r in spec.role_machine_types}
        for mtype in sorted(member_types - bad_types):
            if accelerator and count and ("gpu", mtype, accelerator, str(count)) not in seen:
                seen.add(("gpu", mtype, accelerator, str(count)))
                found.add("matrix.accelerator", accelerator,
                          cat.check_accelerator(mtype, accelerator, count))
            if ("placement", mtype, placement) not in seen:
                seen.add(("placement", mtype, placement))
                path = "matrix.placement" if "placement" in point else "placement"
                found.add(path, placement, cat.check_placement(mtype, placement, spot))
    _schedule(spec, cat, found)
    return found


def _location(spec: CheckedSpec, cat: catalog.CloudCatalog, found: Findings) -> None:
    if spec.region:
        found.add("region", spec.region, cat.check_region(spec.region))
    if spec.zone:
        result = cat.check_zone(spec.zone)
        found.add("zone", spec.zone, result)
        if spec.region and result.verdict != "bad" and not cat.zone_in_region(spec.zone, spec.region):
            found.errors.append(("zone", spec.zone, f"is not in region {spec.region!r}"))
    if not spec.zone:
        _candidates(spec, cat, found)


def _candidates(spec: CheckedSpec, cat: catalog.CloudCatalog, found: Findings) -> None:
    """Each candidate zone known. Candidates may span regions in the created lifecycle (each
    region gets a subnet and templates); a fixed zone (`stopped`) must be in `region`."""
    zones = spec.candidate_zones
    for i, zone in enumerate(zones):
        result = cat.check_zone(zone)
        found.add(f"zones[{i}]", zone, result)
        if (spec.lifecycle == "stopped" and spec.region and result.verdict != "bad"
                and not cat.zone_in_region(zone, spec.region)):
            found.errors.append((f"zones[{i}]", zone, f"is not in region {spec.region!r}"))


def _machine_types(spec: CheckedSpec, cat: catalog.CloudCatalog, found: Findings) -> set[str] | None:
    values = spec.matrix.get("machine_type")
    if not values and spec.search is not None:  # a search's points' (or an adaptive one's fixed)
        points = spec.points() or [spec.search.fixed()]
        values = sorted({str(p["machine_type"]) for p in points if "machine_type" in p})
    if not values:
        example = cat.machine_example
        found.errors.append(("matrix.machine_type", _MISSING, f"required for cloud {spec.cloud}: "
                             f"the VMs' type, e.g. matrix: {{machine_type: [{example}]}}"))
        return None
    priced = set(catalog.priced_machine_types(spec.cloud))
    for i, value in enumerate(values):
        found.add(f"matrix.machine_type[{i}]", value, cat.check_machine_type(str(value), priced))
    for role, value in spec.role_machine_types.items():
        found.add(f"role_machine_types.{role}", value, cat.check_machine_type(value, priced))
    return {str(v) for v in values}


def _schedule(spec: CheckedSpec, cat: catalog.CloudCatalog, found: Findings) -> None:
    if spec.schedule is None:
        scheduler = cat.scheduler_name
        # plan and estimate work without one (one tick); only a deployment needs it
        found.warnings.append(("schedule", _MISSING, f"`pulumi up` needs one for cloud "
                               f"{spec.cloud}: the sweep is started by {scheduler}; e.g. "
                               "schedule: {cron: '0 3 * * *'}"))
        return
    if isinstance(spec.schedule, str):  # `once`: no cron, nothing scheduled (spec_fields)
        return
    cron = spec.schedule.cron
    try:
        cat.check_crons(cron, spec.deadline)
    except CronShiftError as exc:
        path = "deadline" if "not shorter than the gap" in str(exc) else "schedule.cron"
        value = f"{int(spec.deadline.total_seconds())}s" if path == "deadline" else cron
        found.errors.append((path, value, str(exc)))
