"""Where a group's VMs may run: the spec's candidate zones and its instance lifecycle.

`zone` is one fixed zone; `zones` lists candidates, first choice first, or says `any` (every
zone of `region` the cloud's catalog lists). An entry of `zones` is a zone or a region (every
zone of that region, in the catalog's order), so candidates may span several regions:

    zones: [us-central1-a, us-central1-b]     # two zones of one region
    zones: [us-central1, us-east1-c]          # any zone of us-central1, then us-east1-c
    zones: any                                # any zone of `region`

Several candidates need `lifecycle: created`: the VMs are made at start where there is
capacity, since a VM made beforehand (`stopped`) lives in one zone. The sweep's own home
(bucket, functions, scheduler) is one region, `CloudFacts.sweep_region` (the spec's `region`,
else its first candidate's); each other candidate region gets only what its VMs need
(`candidate_regions`: subnet, templates).
"""

from __future__ import annotations

from typing import Literal

from spotbench.facts import facts_of

Zones = list[str] | Literal["any"] | None


def check_zones(cloud: str, zone: str | None, zones: Zones, region: str | None,
                lifecycle: str) -> None:
    """Raise `ValueError` naming the field when the candidates cannot be used."""
    if zones is None:
        return
    if facts_of(cloud).catalog is None:
        raise ValueError(f"zones: cloud '{cloud}' has no zones; leave `zones` out")
    if zone is not None:
        raise ValueError("give `zone` (one fixed zone) or `zones` (candidates), not both")
    if zones == "any" and not region:
        raise ValueError("zones: `any` means every zone of `region`: set `region` too")
    if isinstance(zones, list):
        if not zones:
            raise ValueError("zones is empty: give at least one zone, or `any`")
        if len(set(zones)) != len(zones):
            raise ValueError(f"zones repeats a zone: {zones}")
    several = zones == "any" or len(zones) > 1 or any(_is_region(cloud, z) for z in zones)
    if several and lifecycle == "stopped":
        raise ValueError(
            "zones: several candidate zones need `lifecycle: created` (the VMs are made at "
            "start where there is capacity); with `lifecycle: stopped` give one `zone`")


def _is_region(cloud: str, entry: str) -> bool:
    """`entry` of `zones` names a region of the cloud's catalog (every zone of it)."""
    cat = facts_of(cloud).catalog
    return cat is not None and entry in cat.zones


def candidate_zones(cloud: str, zone: str | None, zones: Zones, region: str | None) -> list[str]:
    """The zones a group may run in, first choice first: `zones` (a region entry, or `any`
    for `region`: every zone of it the cloud's catalog lists), else `[zone]`, else [] (the
    cloud's default). A zone named twice (once alone, once by its region) counts once."""
    if zones is None:
        return [zone] if zone else []
    entries = [region or ""] if zones == "any" else zones
    cat = facts_of(cloud).catalog
    out: list[str] = []
    for entry in entries:
        if cat is not None and entry in cat.zones:
            out += [cat.zone_name(entry, letter) for letter in cat.zones[entry]]
        elif entry and zones != "any":
            out.append(entry)
    return list(dict.fromkeys(out))


def candidate_regions(cloud: str, zones: list[str]) -> list[str]:
    """The regions of `zones`, in the order of their first candidate: where a created-
    lifecycle sweep needs a subnet and templates, and whose quotas preflight reads. Each is
    `CloudFacts.sweep_region` of that zone alone (the one home of "the region of a spec's
    location")."""
    facts = facts_of(cloud)
    return [r for r in dict.fromkeys(facts.sweep_region(None, z) for z in zones) if r]
