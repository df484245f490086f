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

A member's template DELETEs it at a preemption and at `max_run_duration` (infra/gcp/vms.py
`scheduling`): nothing stays billed, but a deleted member is no longer listed. `absent`
gives control what it saw before: a planned member missing from a group that still has
members, or one a `compute.instances.preempted` operation names since the group's last
start (within `max_run_s`: a member lives no longer), is TERMINATED, with error PREEMPTED
when the operation names it — so `control.groups.broken` stops the rest, the group is
retried, and the zone goes to the start record as `preempted_zone`. A group with nothing
there and no such operation is reported as before: no members (never started, or done).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, Protocol

from google.api_core import exceptions as gexc
from google.cloud import compute_v1

from spotbench.catalog import GCP_CATALOG
from spotbench.clouds.base import ErrorKind, Instance, State
from spotbench.clouds.gcp import template_name
from spotbench.facts.gcp import FACTS
from spotbench.clouds.gcp._gce_errors import describe, exception_kind
from spotbench.clouds.gcp._gce_status import (
    operation_error,
    operation_error_kind,
    preempted_since_start,
    short_zone,
)
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

    def __init__(self, cloud: Driver, roster: Roster, client_kwargs: dict[str, Any],
                 max_run_s: float | None = None) -> None:
        self.cloud = cloud
        self.roster = roster
        self.max_run_s = max_run_s
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

    def absent(self, labels: Mapping[str, str], found: Sequence[compute_v1.Instance],
               preemptions: Callable[[str], Sequence[Any] | None]) -> list[Instance]:
        """The planned members of the groups `labels` selects that `found` lacks, as GCE's
        DELETE left them (module docstring). `preemptions(zone)`: that zone's preempted
        operations (None: unknown). Zones asked: the group's own, else the candidates."""
        groups = [labels[GROUP_LABEL]] if GROUP_LABEL in labels else list(self.roster)
        ops_of: dict[str, Sequence[Any]] = {}
        out: list[Instance] = []
        for group in groups:
            here = [raw for raw in found if dict(raw.labels).get(GROUP_LABEL) == group]
            out += self._absent_of(group, {**labels, GROUP_LABEL: group}, here, ops_of,
                                   preemptions)
        return out

    def _absent_of(self, group: str, labels: Mapping[str, str],
                   here: Sequence[compute_v1.Instance], ops_of: dict[str, Sequence[Any]],
                   preemptions: Callable[[str], Sequence[Any] | None]) -> list[Instance]:
        """`absent` for one group, `here` its members found (`ops_of`: the zones' preempted
        operations listed so far in this query, each zone once)."""
        names = {raw.name for raw in here}
        missing = [(role, n) for role, ns in self.roster.get(group, {}).items()
                   for n in ns if n not in names]
        if not missing:
            return []
        zones = sorted({short_zone(raw.zone) for raw in here}) or list(self.cloud.zones or [])
        since = max((raw.last_start_timestamp for raw in here if raw.last_start_timestamp),
                    default=self._window_start())
        for zone in zones:
            if zone not in ops_of:
                ops_of[zone] = preemptions(zone) or []
        gone = (self._gone(labels, role, n, zones, ops_of, since, bool(here)) for role, n in missing)
        return [i for i in gone if i is not None]

    def _window_start(self) -> str:
        if self.max_run_s is None:
            return ""
        return (datetime.now(UTC) - timedelta(seconds=self.max_run_s)).isoformat()

    @staticmethod
    def _gone(labels: Mapping[str, str], role: str, name: str, zones: Sequence[str],
              ops_of: Mapping[str, Sequence[Any]], since: str, others: bool) -> Instance | None:
        """One absent member: PREEMPTED in the zone whose operations name it since `since`;
        else TERMINATED without a kind when the rest of its group is there; else None."""
        probe = SimpleNamespace(name=name, id="", last_start_timestamp=since)
        for zone in zones:
            when = preempted_since_start(probe, ops_of.get(zone, []))
            if when:
                return Instance(name, State.TERMINATED, {**labels, ROLE_LABEL: role}, zone=zone,
                                detail=f"preempted by Compute Engine at {when} and deleted "
                                       "(its template's termination action: DELETE)",
                                error=ErrorKind.PREEMPTED)
        if not others:
            return None
        return Instance(name, State.TERMINATED, {**labels, ROLE_LABEL: role},
                        detail="not there (deleted) while the rest of its group is")

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
