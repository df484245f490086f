"""What one member or group costs per hour and per run, each member at its own machine type
(`role_machine_types`) and provisioning (`role_provisioning`: a standard role at on-demand
prices, the spot roles at spot prices); `budget` prices groups with these too.

Where: the spec's zone (or region). In the created lifecycle a group lands in whichever
candidate zone has capacity, possibly in another region at another price, so a group is
priced in its dearest candidate (`price_locations`): an estimate and a budget guard that
hold wherever the group runs. A candidate without a price row is left out (named when none
has one)."""

from __future__ import annotations

from typing import Any

from spotbench.facts import facts_of
from spotbench.costs import Catalog, MissingPrice, billed_seconds, instance_hourly
from spotbench.plan import Member, RunGroup
from spotbench.prices import notes as price_notes
from spotbench.spec import SweepSpec


def spec_region(spec: SweepSpec) -> str | None:
    """The price region of the spec's own location: its `region`, else its (first) zone's."""
    return facts_of(spec.cloud).price_region(spec.region, spec.first_zone)


def price_locations(spec: SweepSpec) -> list[tuple[str | None, str | None]]:
    """(price region, zone) pairs a group may be billed in: every candidate zone in the
    created lifecycle (each in its own region's prices), else the spec's one location."""
    zones = spec.candidate_zones
    if spec.lifecycle == "created" and len(zones) > 1:
        return [(facts_of(spec.cloud).price_region(None, z), z) for z in zones]
    return [(spec_region(spec), spec.first_zone)]


def _dearest(rates: list[tuple[float, float]], missing: MissingPrice | None) -> tuple[float, float]:
    if not rates:
        assert missing is not None
        raise missing
    return max(rates, key=sum)


def member_type(group: RunGroup, member: Member) -> str:
    return member.machine_type or group.machine_type


def _at(spec: SweepSpec, group: RunGroup, member: Member, catalog: Catalog,
        where: tuple[str | None, str | None]) -> tuple[float, float]:
    region, zone = where
    return instance_hourly(catalog, spec.cloud, region, member_type(group, member), member.spot,
                           group.accelerator, group.accelerator_count, zone)


def member_hourly(spec: SweepSpec, group: RunGroup, member: Member, catalog: Catalog) -> tuple[float, float]:
    """(machine, GPU) USD per hour of one member: its own role's type (`role_machine_types`),
    in its dearest candidate location (`price_locations`)."""
    rates, missing = [], None
    for where in price_locations(spec):
        try:
            rates.append(_at(spec, group, member, catalog, where))
        except MissingPrice as exc:
            missing = exc
    return _dearest(rates, missing)


def group_hourly(spec: SweepSpec, group: RunGroup, catalog: Catalog) -> tuple[float, float]:
    """(machine, GPU) USD per hour of the whole group, each member priced at its own type, in
    the dearest candidate location (the whole group lands in one zone; raises MissingPrice
    naming the row to add when no candidate has a price)."""
    totals, missing = [], None
    for where in price_locations(spec):
        try:
            rates = [_at(spec, group, m, catalog, where) for m in group.members]
        except MissingPrice as exc:
            missing = exc
            continue
        totals.append((sum(r[0] for r in rates), sum(r[1] for r in rates)))
    return _dearest(totals, missing)


def group_cost_usd(spec: SweepSpec, group: RunGroup, catalog: Catalog, run_s: float) -> float:
    """Compute + GPU of one group run of `run_s` seconds (boot added, minimum minute)."""
    machine, gpu = group_hourly(spec, group, catalog)
    return (machine + gpu) * billed_seconds(run_s + facts_of(spec.cloud).boot_s) / 3600


def member_cost_usd(spec: SweepSpec, group: RunGroup, member: Member, catalog: Catalog,
                    run_s: float) -> float:
    """Compute + GPU of one member for a run of `run_s` seconds (boot added, minimum minute)."""
    machine, gpu = member_hourly(spec, group, member, catalog)
    return (machine + gpu) * billed_seconds(run_s + facts_of(spec.cloud).boot_s) / 3600


def provisioning_label(spec: SweepSpec, group: RunGroup) -> str:
    """`spot`, or `spot (chief: standard, ps: standard)` where a role's provisioning differs
    (`role_provisioning`): how each member is priced (standard: on-demand)."""
    other = sorted({(m.role, m.provisioning) for m in group.members
                    if m.provisioning != spec.provisioning})
    return spec.provisioning + (f" ({', '.join(f'{r}: {p}' for r, p in other)})" if other else "")


def types_label(group: RunGroup) -> str:
    """`n1-standard-2`, or `n1-standard-2 (chief: n1-standard-4)` with role overrides."""
    other = sorted({(m.role, m.machine_type) for m in group.members
                    if m.machine_type and m.machine_type != group.machine_type})
    return group.machine_type + (f" ({', '.join(f'{r}: {t}' for r, t in other)})" if other else "")



def price_rows(spec: SweepSpec, catalog: Catalog, others: list[Any]) -> tuple[list[Any], list[str]]:
    """The rows that priced the estimate (machine and GPU of every group, plus `others`) and
    the lines naming their tables and dates, per zone where a price differs by zone."""
    rows, zones = list(others), []
    locations = price_locations(spec)
    unpriced: set[str] = set()
    for g in spec.plan():
        for region, zone in dict.fromkeys(locations):
            for mtype, spot in sorted({(member_type(g, m), m.spot) for m in g.members}):
                row = catalog.find(spec.cloud, region, "machine", mtype, spot, zone)
                rows.append(row)
                if row is None and region:
                    unpriced.add(region)
                zones.append(price_notes.by_zone(
                    mtype, catalog.by_zone(spec.cloud, region, "machine", mtype, spot), row))
            for spot in sorted({m.spot for m in g.members} if g.accelerator and g.accelerator_count else ()):
                rows.append(catalog.find(spec.cloud, region, "gpu", g.accelerator, spot))
    used = price_notes.used(rows, getattr(catalog, "tables", []))
    return rows, (used + sorted({z for z in zones if z})
                  + _candidates_lines(spec, locations, sorted(unpriced)))


def _candidates_lines(spec: SweepSpec, locations: list[tuple[str | None, str | None]],
                      unpriced: list[str]) -> list[str]:
    if len(locations) < 2:
        return []
    regions = sorted({r for r, _ in locations if r})
    out = [f"{len(locations)} candidate zones in {', '.join(regions)} (`lifecycle: created`): "
           "each group is priced in its dearest candidate, wherever it lands"]
    for region in unpriced:
        out.append(f"no price table for candidate region {region}: its zones are left out of "
                   f"the figures; `spotbench prices --cloud {spec.cloud} --region {region}` "
                   "adds them")
    return out
