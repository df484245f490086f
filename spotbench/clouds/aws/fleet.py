"""`lifecycle: created` on EC2: a run group's instances made at start with an instant EC2
Fleet, in ONE of the candidate Availability Zones, from the launch templates the sweep's
stack declared (`infra/aws/templates.py`: one per member and candidate zone, tagged with
the member, zone, subnet and market).

EC2's own mechanism picks the zone (docs/platform.md, "EC2 Fleet of type instant"):
`CreateFleet` with `Type=instant` places one synchronous request; its launch-template
configs list each candidate zone's template with an override naming only that zone
(`AvailabilityZone`) and `Priority` in the candidates' order, `AllocationStrategy=capacity-optimized-prioritized` (on demand: `prioritized`),
`SingleAvailabilityZone` and `MinTargetCapacity` = the target (all or nothing). Instances
that could not be launched come back in the 200 answer's `Errors` (`InsufficientInstance
Capacity`, …), not as an HTTP error; an instant fleet cannot be modified and keeps nothing
to maintain, so the instances are what is left to clean up.

The overrides never name a `SubnetId`: the template's network interface does (the zone's
members' subnet, the member's fixed private IP, the group's security group), and EC2 Fleet
ignores a template's `NetworkInterfaces` block when an override names a subnet (reported by
AWS's Karpenter maintainers, who dropped the subnet override for that reason: docs/platform.md,
"EC2 Fleet overrides and the template's network interface"). One fixed IP per template also
means one instance per fleet: the target capacity is always 1.

A group's members differ (each its own name, user data and fixed address), so a fleet
launches one member: the first member's fleet chooses the zone among the candidates; every
other member gets a fleet in that zone. When one of them finds no capacity there, what was
made is terminated and the first member's fleet runs again without that zone (all or
nothing, never two zones), until no candidate is left or an account limit answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MEMBER_TAG = "spotbench-member"
ZONE_TAG = "spotbench-zone"
SUBNET_TAG = "spotbench-subnet"
MARKET_TAG = "spotbench-market"  # spot | on-demand: the fleet request sets the market

# CreateFleet `Errors` codes (the EC2 API's error codes, docs/platform.md): no capacity in
# that pool now (another zone, or the next tick, may have it) …
FLEET_CAPACITY_ERRORS = frozenset({
    "InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity",
    "UnfulfillableCapacity", "SpotMaxPriceTooLow", "InsufficientFreeAddressesInSubnet",
    "Unsupported",
})
# … or an account limit (no zone will do better until it is raised)
FLEET_QUOTA_ERRORS = frozenset({"MaxSpotInstanceCountExceeded", "VcpuLimitExceeded",
                                "InstanceLimitExceeded"})
# … or the account's Spot service-linked role is missing and the caller may not create it
# (the first Spot launch in an account creates AWSServiceRoleForEC2Spot): no zone does better
SPOT_ROLE_MISSING = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
SPOT_ROLE_FIX = ("the account has no Spot service-linked role AWSServiceRoleForEC2Spot; create "
                 "it once: `aws iam create-service-linked-role --aws-service-name "
                 "spot.amazonaws.com` (`spotbench preflight` checks it)")


@dataclass(frozen=True)
class Template:
    id: str
    member: str
    zone: str
    subnet: str
    market: str  # spot | on-demand


@dataclass(frozen=True)
class FleetError:
    zone: str
    code: str
    message: str

    @property
    def quota(self) -> bool:
        """An account-wide refusal: no other zone or region will do better now."""
        return self.code in FLEET_QUOTA_ERRORS or self.code.endswith(SPOT_ROLE_MISSING)


@dataclass
class Placed:
    """What `create_group` made: every member's instance in `zone`, or nothing (`ids` empty)
    with the errors EC2 answered per zone."""

    zone: str | None = None
    ids: list[str] = field(default_factory=list)
    errors: list[FleetError] = field(default_factory=list)


def templates(ec2: Any, labels: Mapping[str, str]) -> dict[str, dict[str, Template]]:
    """member name → zone → its launch template, from the templates tagged with `labels`."""
    filters = [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(labels.items())]
    out: dict[str, dict[str, Template]] = {}
    for page in ec2.get_paginator("describe_launch_templates").paginate(Filters=filters):
        for raw in page.get("LaunchTemplates", []):
            tags = {t["Key"]: t["Value"] for t in raw.get("Tags", [])}
            if not {MEMBER_TAG, ZONE_TAG, SUBNET_TAG} <= set(tags):
                continue
            t = Template(raw["LaunchTemplateId"], tags[MEMBER_TAG], tags[ZONE_TAG],
                         tags[SUBNET_TAG], tags.get(MARKET_TAG, "spot"))
            out.setdefault(t.member, {})[t.zone] = t
    return out


FLEET_CAPACITY = 1  # a template fixes its member's private IP: it can launch one instance


FLEET_TAGGED = ("fleet", "instance", "volume")  # what CreateFleet's TagSpecifications tag


def fleet_request(choices: Sequence[Template], labels: Mapping[str, str]) -> dict[str, Any]:
    """The CreateFleet parameters: one instance (`FLEET_CAPACITY`) from one of `choices`
    (first choice first: `Priority` 0, 1, …). Each override names the template's zone only:
    the subnet, fixed IP and security group come from the template's network interface."""
    market = choices[0].market
    configs = [{"LaunchTemplateSpecification": {"LaunchTemplateId": t.id, "Version": "$Default"},
                "Overrides": [{"AvailabilityZone": t.zone, "Priority": float(n)}]}
               for n, t in enumerate(choices)]
    request: dict[str, Any] = {
        "Type": "instant",
        "LaunchTemplateConfigs": configs,
        "TargetCapacitySpecification": {"TotalTargetCapacity": FLEET_CAPACITY,
                                        "DefaultTargetCapacityType": market},
        # the fleet, and what it launches: the launch's authorization sees the request's own
        # tags only — a template's TagSpecifications tag the instances, but do not reach the
        # request a fleet's launch is checked with (karpenter-provider-aws#3948), so the
        # role's `aws:RequestTag` conditions on instance and volume need them here
        "TagSpecifications": [{"ResourceType": kind, "Tags": [
            {"Key": k, "Value": v} for k, v in sorted(labels.items())]} for kind in FLEET_TAGGED],
    }
    if market == "spot":
        request["SpotOptions"] = {"AllocationStrategy": "capacity-optimized-prioritized",
                                  "InstanceInterruptionBehavior": "terminate",
                                  "SingleAvailabilityZone": True,
                                  "MinTargetCapacity": FLEET_CAPACITY}
    else:
        request["OnDemandOptions"] = {"AllocationStrategy": "prioritized",
                                      "SingleAvailabilityZone": True,
                                      "MinTargetCapacity": FLEET_CAPACITY}
    return request


def _zone_of(spec: Mapping[str, Any], choices: Sequence[Template]) -> str | None:
    """The candidate zone a `LaunchTemplateAndOverrides` answer names: its override's
    `AvailabilityZone`, else its template's zone."""
    zones = {t.zone for t in choices}
    named = spec.get("Overrides", {}).get("AvailabilityZone", "")
    if named in zones:
        return named
    template = spec.get("LaunchTemplateSpecification", {}).get("LaunchTemplateId", "")
    return next((t.zone for t in choices if t.id == template), None)


def _launch(ec2: Any, choices: Sequence[Template],
            labels: Mapping[str, str]) -> tuple[list[str], str | None, list[FleetError]]:
    """One instant fleet: (instance ids, their zone, the errors EC2 answered)."""
    answer = ec2.create_fleet(**fleet_request(choices, labels))
    errors = [FleetError(_zone_of(e.get("LaunchTemplateAndOverrides", {}), choices) or "?",
                         e.get("ErrorCode", ""), e.get("ErrorMessage", ""))
              for e in answer.get("Errors", [])]
    ids, zone = [], None
    for item in answer.get("Instances", []):
        ids += item.get("InstanceIds", [])
        zone = zone or _zone_of(item.get("LaunchTemplateAndOverrides", {}), choices)
    return ids, zone, errors


def create_group(ec2: Any, labels: Mapping[str, str], by_member: Mapping[str, Mapping[str, Template]],
                 zones: Sequence[str], terminate: Callable[[list[str]], None]) -> Placed:
    """Every member of the group in one zone of `zones` (first choice first), or nothing."""
    members = sorted(by_member)
    left = [z for z in zones if all(z in by_member[m] for m in members)]
    placed = Placed()
    while left and members:
        ids, zone, errors = _launch(ec2, [by_member[members[0]][z] for z in left], labels)
        placed.errors += errors
        if not ids or zone is None:
            return placed  # no candidate has capacity for even one member now
        made = list(ids)
        try:
            for member in members[1:]:
                more, _, errors = _launch(ec2, [by_member[member][zone]], labels)
                placed.errors += errors
                if not more:
                    break
                made += more
            else:
                return Placed(zone, made, placed.errors)
        except Exception:
            terminate(made)  # a refused call (permissions, …) leaves nothing behind either
            raise
        terminate(made)  # all or nothing: never part of a group, never two zones
        if any(e.quota for e in placed.errors):
            return placed
        failed = {e.zone for e in placed.errors} | {zone}
        left = [z for z in left if z not in failed]
    return placed
