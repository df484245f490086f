"""Where a group's VMs may run: the spec's candidate zones and its instance lifecycle.

`zone` is one fixed zone; `zones` lists candidates, first choice first, or says `any` (every
zone of `region` the cloud's catalog lists). Several candidates need `lifecycle: created`:
the VMs are made at start where there is capacity, since a VM made beforehand (`stopped`)
lives in one zone.
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
    several = zones == "any" or len(zones) > 1
    if several and lifecycle == "stopped":
        raise ValueError(
            "zones: several candidate zones need `lifecycle: created` (the VMs are made at "
            "start where there is capacity); with `lifecycle: stopped` give one `zone`")


def candidate_zones(cloud: str, zone: str | None, zones: Zones, region: str | None) -> list[str]:
    """The zones a group may run in, first choice first: `zones` (`any`: every zone of
    `region` the cloud's catalog lists), else `[zone]`, else [] (the cloud's default)."""
    if zones is None:
        return [zone] if zone else []
    if isinstance(zones, list):
        return list(zones)
    cat = facts_of(cloud).catalog
    if cat is None or region not in cat.zones:
        return []
    return [cat.zone_name(region, letter) for letter in cat.zones[region]]
