"""What one member or group costs per hour and per run, each member at its own machine type
(`role_machine_types`); `budget` prices groups with these too."""

from __future__ import annotations

from typing import Any

from spotbench.facts import facts_of
from spotbench.costs import Catalog, billed_seconds, instance_hourly, region_of
from spotbench.plan import Member, RunGroup
from spotbench.prices import notes as price_notes
from spotbench.spec import SweepSpec


def spec_region(spec: SweepSpec) -> str | None:
    return region_of(spec.cloud, spec.zone, spec.region)


def member_type(group: RunGroup, member: Member) -> str:
    return member.machine_type or group.machine_type


def member_hourly(spec: SweepSpec, group: RunGroup, member: Member, catalog: Catalog) -> tuple[float, float]:
    """(machine, GPU) USD per hour of one member: its own role's type (`role_machine_types`)."""
    return instance_hourly(catalog, spec.cloud, spec_region(spec), member_type(group, member), spec.spot,
                           group.accelerator, group.accelerator_count, spec.zone)


def group_hourly(spec: SweepSpec, group: RunGroup, catalog: Catalog) -> tuple[float, float]:
    """(machine, GPU) USD per hour of the whole group, each member priced at its own type
    (raises MissingPrice naming the row to add)."""
    rates = [member_hourly(spec, group, m, catalog) for m in group.members]
    return sum(r[0] for r in rates), sum(r[1] for r in rates)


def group_cost_usd(spec: SweepSpec, group: RunGroup, catalog: Catalog, run_s: float) -> float:
    """Compute + GPU of one group run of `run_s` seconds (boot added, minimum minute)."""
    machine, gpu = group_hourly(spec, group, catalog)
    return (machine + gpu) * billed_seconds(run_s + facts_of(spec.cloud).boot_s) / 3600


def member_cost_usd(spec: SweepSpec, group: RunGroup, member: Member, catalog: Catalog,
                    run_s: float) -> float:
    """Compute + GPU of one member for a run of `run_s` seconds (boot added, minimum minute)."""
    machine, gpu = member_hourly(spec, group, member, catalog)
    return (machine + gpu) * billed_seconds(run_s + facts_of(spec.cloud).boot_s) / 3600


def types_label(group: RunGroup) -> str:
    """`n1-standard-2`, or `n1-standard-2 (chief: n1-standard-4)` with role overrides."""
    other = sorted({(m.role, m.machine_type) for m in group.members
                    if m.machine_type and m.machine_type != group.machine_type})
    return group.machine_type + (f" ({', '.join(f'{r}: {t}' for r, t in other)})" if other else "")



def price_rows(spec: SweepSpec, catalog: Catalog, others: list[Any]) -> tuple[list[Any], list[str]]:
    """The rows that priced the estimate (machine and GPU of every group, plus `others`) and
    the lines naming their tables and dates, per zone where a price differs by zone."""
    region = spec_region(spec)
    rows, zones = list(others), []
    for g in spec.plan():
        for mtype in sorted({member_type(g, m) for m in g.members}):
            row = catalog.find(spec.cloud, region, "machine", mtype, spec.spot, spec.zone)
            rows.append(row)
            zones.append(price_notes.by_zone(
                mtype, catalog.by_zone(spec.cloud, region, "machine", mtype, spec.spot), row))
        if g.accelerator and g.accelerator_count:
            rows.append(catalog.find(spec.cloud, region, "gpu", g.accelerator, spec.spot))
    used = price_notes.used(rows, getattr(catalog, "tables", []))
    return rows, used + sorted({z for z in zones if z})
