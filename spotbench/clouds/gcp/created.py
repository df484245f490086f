"""The created lifecycle of the `gcp` driver (`lifecycle: created`): a group's VMs are made
at start from the instance templates Pulumi declared (one per group and role,
`spotbench.clouds.gcp.template_name`), in ONE zone with capacity, and deleted by stop,
done and teardown.

    start(labels, zones=[a, b, f]):
        delete what is left of the group (e.g. members GCE preempted: stopped, with disks)
        for each zone, in the order given:
            regionInstances.bulkInsert per role, count = minCount = the role's members
            (all or nothing), perInstanceProperties = the plan's member names,
            locationPolicy: targetShape ANY_SINGLE_ZONE, this zone ALLOW, the region's
            other zones DENY
            refused (capacity, quota, API): delete the roles made there; next zone
        every zone refused: the members as the last zone refused them

GCE's location policy has no order of preference (a zone is ALLOW or DENY), so the order
control asks for is kept by asking one zone per call, in that order, within the same start.
A bulkInsert is checked up front for capacity and quota: refused, the call itself answers
HTTP 503 `insufficientCapacity` / 403 `quotaExceeded`; it can also start and end with an
operation error (ZONE_RESOURCE_POOL_EXHAUSTED…, QUOTA_EXCEEDED). Both are typed (docs/
platform.md, "Created lifecycle"). Each zone refused on the way to the answer is kept in
`GcpCloud.last_refusals` (control notes it in the start ledger).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from google.api_core import exceptions as gexc
from google.cloud import compute_v1

from spotbench.catalog import GCP_CATALOG
from spotbench.clouds.base import ErrorKind, Instance, State
from spotbench.clouds.gcp import template_name
from spotbench.facts.gcp import FACTS
from spotbench.clouds.gcp._gce_errors import describe, exception_kind
from spotbench.clouds.gcp._gce_status import operation_error, operation_error_kind
from spotbench.labels import GROUP_LABEL, ROLE_LABEL

log = logging.getLogger(__name__)
Roster = Mapping[str, Mapping[str, Sequence[str]]]  # group → role → member names
_CALL_TIMEOUT_S = 60.0
_SERVER_WAIT_S = 120.0
_DONE = compute_v1.Operation.Status.DONE


def location_policy(zone: str) -> compute_v1.LocationPolicy:
    """One zone allowed (the region's other catalog zones denied), the group in one zone."""
    region = FACTS.region_of_zone(zone)
    letters = GCP_CATALOG.zones.get(region, "")
    others = [GCP_CATALOG.zone_name(region, x) for x in letters]
    locations = {f"zones/{z}": compute_v1.LocationPolicyLocation(
        preference="ALLOW" if z == zone else "DENY") for z in {*others, zone}}
    return compute_v1.LocationPolicy(target_shape="ANY_SINGLE_ZONE", locations=locations)


def bulk_request(project: str, zone: str, group: str, role: str,
                 names: Sequence[str]) -> compute_v1.BulkInsertInstanceResource:
    """The bulkInsert body making `names` (all or none) from the role's template in `zone`."""
    region = FACTS.region_of_zone(zone)
    return compute_v1.BulkInsertInstanceResource(
        count=len(names), min_count=len(names),
        source_instance_template=(f"projects/{project}/regions/{region}/instanceTemplates/"
                                  f"{template_name(group, role)}"),
        per_instance_properties={
            n: compute_v1.BulkInsertInstanceResourcePerInstanceProperties(name=n) for n in names},
        location_policy=location_policy(zone))


class Driver(Protocol):
    """What the created lifecycle uses of `GcpCloud` (gce.py)."""

    project: str
    zones: list[str] | None
    timeout_s: float
    poll_s: float
    last_refusals: list[list[Instance]]

    def delete(self, labels: Mapping[str, str]) -> list[Instance]: ...
    def query(self, labels: Mapping[str, str]) -> list[Instance]: ...
    def call(self, fn: Any, /, **kwargs: Any) -> Any: ...


class Creator:
    """The created lifecycle's start, over `cloud`'s clients and verbs."""

    def __init__(self, cloud: Driver, roster: Roster, client_kwargs: dict[str, Any]) -> None:
        self.cloud = cloud
        self.roster = roster
        self._bulk = compute_v1.RegionInstancesClient(**client_kwargs)
        self._ops = compute_v1.RegionOperationsClient(**client_kwargs)

    def start(self, labels: Mapping[str, str], zones: Sequence[str]) -> list[Instance]:
        cloud = self.cloud
        cloud.last_refusals = []
        roles = self.roster.get(labels.get(GROUP_LABEL, ""))
        if not roles:
            log.warning("no planned group for %s: nothing to create", dict(labels))
            return []
        left = [i for i in cloud.delete(labels) if i.state != State.TERMINATED]
        if left:  # a name still taken: bulkInsert would refuse it
            return left
        candidates = list(zones) or list(cloud.zones or [])
        if not candidates:
            return self._refused(labels, roles, None, ErrorKind.API,
                                 "no candidate zone: give `zone` or `zones` in the spec")
        refusals: list[list[Instance]] = []
        for zone in candidates:
            refused = self._create_in(zone, labels, roles)
            if refused is None:
                cloud.last_refusals = refusals
                return cloud.query(labels)
            log.warning("group %s: no room in %s (%s), next candidate", labels.get(GROUP_LABEL),
                        zone, refused[0].detail)
            refusals.append(refused)
        cloud.last_refusals = refusals[:-1]
        return refusals[-1]

    def _create_in(self, zone: str, labels: Mapping[str, str],
                   roles: Mapping[str, Sequence[str]]) -> list[Instance] | None:
        """Every role of the group in `zone`, or none of them: None, or what refused it."""
        group = labels[GROUP_LABEL]
        for role, names in roles.items():
            refusal = self._bulk_insert(zone, group, role, names)
            if refusal is not None:
                self.cloud.delete(labels)  # the roles already made there: all or nothing
                return self._refused(labels, roles, zone, *refusal)
        return None

    def _bulk_insert(self, zone: str, group: str, role: str,
                     names: Sequence[str]) -> tuple[ErrorKind, str] | None:
        project, region = self.cloud.project, FACTS.region_of_zone(zone)
        request = bulk_request(project, zone, group, role, names)
        try:  # not retried: a 503 here is GCE's up-front "no capacity" answer
            op = self._bulk.bulk_insert_unary(project=project, region=region,
                                              bulk_insert_instance_resource_resource=request,
                                              timeout=_CALL_TIMEOUT_S)
        except (gexc.GoogleAPICallError, gexc.RetryError) as exc:
            return exception_kind(exc), f"bulkInsert in {zone} refused: {describe(exc)}"
        op = self._wait(region, op)
        if op.status != _DONE:
            return ErrorKind.API, f"bulkInsert operation {op.name} not done in time"
        kind = operation_error_kind(op)
        return None if kind is None else (kind, f"bulkInsert in {zone}: {operation_error(op)}")

    def _wait(self, region: str, op: compute_v1.Operation) -> compute_v1.Operation:
        deadline = time.monotonic() + self.cloud.timeout_s
        while op.status != _DONE and time.monotonic() < deadline:
            remaining = deadline - time.monotonic()
            op = self.cloud.call(self._ops.wait, project=self.cloud.project, region=region,
                                  operation=op.name, timeout=min(remaining, _SERVER_WAIT_S) + 5)
            if op.status != _DONE:
                time.sleep(min(self.cloud.poll_s, max(0.0, deadline - time.monotonic())))
        return op

    @staticmethod
    def _refused(labels: Mapping[str, str], roles: Mapping[str, Sequence[str]], zone: str | None,
                 kind: ErrorKind, detail: str) -> list[Instance]:
        """The group's members as a refused create leaves them: not there, with the kind."""
        return [Instance(n, State.TERMINATED, {**labels, ROLE_LABEL: role}, zone=zone,
                         detail=detail, error=kind)
                for role, names in roles.items() for n in names]
