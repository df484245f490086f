"""The `gcp` cloud: operate the Compute Engine VMs Pulumi declared, selected by labels.

Instances are found with one aggregated list call (server-side label filter, then limited
to the configured zones or region). start/stop/terminate act on every match concurrently,
wait on each zone operation up to `timeout_s`, and report per instance: a failure (capacity
exhausted, an API error, an operation that did not finish in time) ends up in that
instance's `detail` with its state as it is afterwards; it never aborts the other instances.
Transient API errors (429, 5xx, dropped connections) are retried with exponential backoff.

A spot VM that Compute Engine preempted is just TERMINATED (stopped), like one stopped on
purpose. `query` tells them apart: for stopped instances that have run, it lists the zone's
`compute.instances.preempted` operations (one call per zone); an instance with one since
its last start comes back with `error=preempted`, so control retries its group like any
preemption and `status` names it. The lookup is best-effort: refused or failing, the
instances are reported as stopped, without a kind. In the created lifecycle GCE DELETEs a
preempted member (its template's termination action): `query` reports each planned member
that is absent as TERMINATED, PREEMPTED when its zone's operations say so (created.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import requests
import tenacity
from google.api_core import exceptions as gexc
from google.auth.credentials import AnonymousCredentials, Credentials
from google.cloud import compute_v1

from spotbench.clouds.gcp._gce_status import (
    PREEMPTED_OPERATION,
    SETTLING,
    START_NOOP,
    STATUS_MAP,
    STOP_NOOP,
    error_kind_of_codes,
    label_filter,
    operation_error,
    operation_error_kind,
    preempted_since_start,
    short_zone,
    zone_allowed,
)
from spotbench.auth.instance import InstanceClaim, LiveInstance
from spotbench.clouds.gcp._gce_errors import describe, exception_kind
from spotbench.clouds.gcp.created import Creator, Roster
from spotbench.clouds.base import ConsoleOutput, ErrorKind, Instance, State, matches
from spotbench.labels import GROUP_LABEL

log = logging.getLogger(__name__)
T = TypeVar("T")

_TRANSIENT = (
    gexc.TooManyRequests,
    gexc.InternalServerError,
    gexc.BadGateway,
    gexc.ServiceUnavailable,
    gexc.GatewayTimeout,
    requests.ConnectionError,
)
# Errors that concern one instance: reported in its detail, never raised from a verb.
_PER_INSTANCE = (gexc.GoogleAPIError, requests.RequestException)
_CALL_TIMEOUT_S = 60.0  # one HTTP request (the operation wait has its own bound)
_SERVER_WAIT_S = 120.0  # zoneOperations.wait returns after at most ~2 minutes
_DONE = compute_v1.Operation.Status.DONE


class GcpCloud:
    """Compute Engine driver.

    `zones` limits every verb to those zones; otherwise `region` limits it to the region's
    zones; with neither, the whole project is searched. `api_endpoint` points the client
    elsewhere (an `http://` endpoint is a local emulator and gets anonymous credentials);
    `credentials=None` means Application Default Credentials.
    """

    name = "gcp"

    def __init__(
        self,
        project: str,
        zones: list[str] | None = None,
        region: str | None = None,
        api_endpoint: str | None = None,
        credentials: Credentials | None = None,
        timeout_s: float = 300,
        *,
        max_workers: int = 8,
        retry_attempts: int = 5,
        retry_initial_s: float = 0.5,
        retry_max_s: float = 10.0,
        poll_s: float = 1.0,
        lifecycle: str = "stopped",
        roster: Roster | None = None,
        max_run_s: float | None = None,
    ) -> None:
        if not project:
            raise ValueError("GcpCloud needs a project id (spec field `project` or --project)")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.project = project
        self.zones = list(zones) if zones else None
        self.region = region
        self.timeout_s = float(timeout_s)
        self.max_workers = max(1, max_workers)
        self.poll_s = poll_s
        if api_endpoint and api_endpoint.startswith("http://") and credentials is None:
            credentials = AnonymousCredentials()  # never send real tokens over plain HTTP
        options = {"api_endpoint": api_endpoint} if api_endpoint else None
        kwargs: dict[str, Any] = {"transport": "rest", "client_options": options}
        self._instances = compute_v1.InstancesClient(credentials=credentials, **kwargs)
        self._operations = compute_v1.ZoneOperationsClient(credentials=credentials, **kwargs)
        self.lifecycle = lifecycle
        self.last_refusals: list[list[Instance]] = []  # created lifecycle: `Cloud.start`
        self._creator = (Creator(self, roster or {}, {"credentials": credentials, **kwargs},
                                 max_run_s=max_run_s)
                         if lifecycle == "created" else None)
        self._retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_TRANSIENT),
            wait=tenacity.wait_exponential_jitter(
                multiplier=retry_initial_s, max=retry_max_s, jitter=retry_initial_s
            ),
            stop=tenacity.stop_after_attempt(max(1, retry_attempts)),
            before_sleep=lambda rs: log.warning(
                "GCE call failed (%s), retry %d", rs.outcome.exception(), rs.attempt_number
            ),
            reraise=True,
        )

    # -- the Cloud verbs -------------------------------------------------------------------
    def query(self, labels: Mapping[str, str]) -> list[Instance]:
        found = self._find(labels)
        preempted = self._preempted(found)
        out = [_to_instance(raw, preempted[raw.name], error=ErrorKind.PREEMPTED)
               if raw.name in preempted else _to_instance(raw) for raw in found]
        if self._creator is not None:  # members GCE deleted (DELETE at a preemption)
            out += self._creator.absent(labels, found, self.zone_preemptions)
        return out

    def start(self, labels: Mapping[str, str], zones: Sequence[str] = ()) -> list[Instance]:
        """Stopped lifecycle: start the instances where they are (`zones` ignored). Created
        lifecycle: make them from their templates in the first of `zones` with room."""
        if self._creator is not None:
            return self._creator.start(labels, zones)
        return self._each(labels, "start", self._start_one)

    def stop(self, labels: Mapping[str, str]) -> list[Instance]:
        """Stopped lifecycle: stop them (disks kept). Created lifecycle: delete them."""
        if self._creator is not None:
            return self.delete(labels)
        return self._each(labels, "stop", self._stop_one)

    def terminate(self, labels: Mapping[str, str]) -> list[Instance]:
        return self.delete(labels)

    def delete(self, labels: Mapping[str, str]) -> list[Instance]:
        return self._each(labels, "delete", self._delete_one)

    def console_output(self, instance: Instance, start: int = 0) -> ConsoleOutput:
        """Serial port 1 from byte `start` (`instances.getSerialPortOutput`: the last 1 MB is
        kept; a `start` before it comes back as the oldest byte still there)."""
        if not instance.zone:
            raise ValueError(f"instance {instance.name} has no zone: cannot read its serial port")
        request = compute_v1.GetSerialPortOutputInstanceRequest(
            project=self.project, zone=short_zone(instance.zone), instance=instance.name, port=1, start=start)
        out = self._call(self._instances.get_serial_port_output, request=request, timeout=_CALL_TIMEOUT_S)
        return ConsoleOutput(out.contents, int(out.start), int(out.next_))

    def lookup(self, claim: InstanceClaim) -> LiveInstance | None:
        """The live instance a VM's identity token names (instances.get in its zone; None:
        no such instance, or a zone outside the sweep's): `spotbench.auth.instance.group_of`
        reads its id and its deployer-written group label."""
        if not zone_allowed(claim.location, self.zones, self.region):
            return None
        try:
            raw = self._call(self._instances.get, project=self.project, zone=claim.location,
                             instance=claim.instance_name, retry=None, timeout=_CALL_TIMEOUT_S)
        except gexc.NotFound:
            return None
        return LiveInstance(str(raw.id), raw.name, dict(raw.labels).get(GROUP_LABEL))

    # -- finding -----------------------------------------------------------------------------
    def _find(self, labels: Mapping[str, str]) -> list[compute_v1.Instance]:
        request = compute_v1.AggregatedListInstancesRequest(
            project=self.project, filter=label_filter(labels)
        )

        def listing() -> list[compute_v1.Instance]:
            pager = self._instances.aggregated_list(
                request=request, retry=None, timeout=_CALL_TIMEOUT_S
            )
            return [raw for _, scoped in pager for raw in scoped.instances]

        found = [
            raw
            for raw in self._call(listing)
            if zone_allowed(short_zone(raw.zone), self.zones, self.region)
            and matches(raw.labels, labels)  # the server filtered; never trust it blindly
        ]
        return sorted(found, key=lambda raw: (short_zone(raw.zone), raw.name))

    def _preempted(self, found: list[compute_v1.Instance]) -> dict[str, str]:
        """Instance name → when GCE preempted it, for the stopped instances it preempted
        since their last start (one zone-operations list per zone with such instances)."""
        stopped = [raw for raw in found if raw.status == "TERMINATED" and raw.last_start_timestamp]
        out: dict[str, str] = {}
        for zone in sorted({short_zone(raw.zone) for raw in stopped}):
            ops = self.zone_preemptions(zone)
            for raw in stopped if ops is not None else []:
                if short_zone(raw.zone) == zone:
                    when = preempted_since_start(raw, ops)
                    if when:
                        out[raw.name] = f"preempted by Compute Engine at {when}"
        return out

    def zone_preemptions(self, zone: str) -> list[compute_v1.Operation] | None:
        """The zone's `compute.instances.preempted` operations (None: the list failed, so
        preempted cannot be told from stopped or deleted there; best-effort)."""
        request = compute_v1.ListZoneOperationsRequest(
            project=self.project, zone=zone, filter=f'operationType = "{PREEMPTED_OPERATION}"')

        def listing() -> list[compute_v1.Operation]:
            return list(self._operations.list(request=request, retry=None, timeout=_CALL_TIMEOUT_S))

        try:
            return self._call(listing)
        except _PER_INSTANCE as exc:
            log.warning("cannot tell preempted from stopped in %s: %s", zone, describe(exc))
            return None

    # -- acting on each instance ---------------------------------------------------------
    def _each(
        self,
        labels: Mapping[str, str],
        verb: str,
        act: Callable[[compute_v1.Instance, float], Instance],
    ) -> list[Instance]:
        found = self._find(labels)
        if not found:
            return []
        deadline = time.monotonic() + self.timeout_s

        def guarded(raw: compute_v1.Instance) -> Instance:
            try:
                return act(raw, deadline)
            except _PER_INSTANCE as exc:
                log.warning("%s %s failed: %s", verb, raw.name, exc)
                return _to_instance(self._get_or(raw), f"{verb} failed: {describe(exc)}",
                                    error=exception_kind(exc))

        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(found))) as pool:
            return list(pool.map(guarded, found))

    def _start_one(self, raw: compute_v1.Instance, deadline: float) -> Instance:
        if raw.status in START_NOOP:
            return _to_instance(raw)
        zone = short_zone(raw.zone)
        if raw.status in SETTLING:  # GCE refuses to start a stopping instance: let it stop
            raw = self._settle(raw, deadline)
            if raw.status in SETTLING:
                return _to_instance(raw, f"still {raw.status} after {self.timeout_s:g}s",
                                    error=ErrorKind.API)
        call = (
            self._instances.resume_unary
            if raw.status == "SUSPENDED"
            else self._instances.start_unary
        )
        op = self._call(call, project=self.project, zone=zone, instance=raw.name)
        return self._finish(raw, op, deadline)

    def _stop_one(self, raw: compute_v1.Instance, deadline: float) -> Instance:
        if raw.status in STOP_NOOP:
            return _to_instance(raw)
        zone = short_zone(raw.zone)
        op = self._call(
            self._instances.stop_unary, project=self.project, zone=zone, instance=raw.name
        )
        return self._finish(raw, op, deadline)

    def _delete_one(self, raw: compute_v1.Instance, deadline: float) -> Instance:
        zone = short_zone(raw.zone)
        try:
            op = self._call(
                self._instances.delete_unary, project=self.project, zone=zone, instance=raw.name
            )
        except gexc.NotFound:  # deleted meanwhile: nothing to do
            return _to_instance(raw, state=State.TERMINATED)
        return self._finish(raw, op, deadline)

    def _finish(
        self, raw: compute_v1.Instance, op: compute_v1.Operation, deadline: float
    ) -> Instance:
        """Wait for `op`, then report the instance as it is now (with the op's error)."""
        detail, error = self._wait(short_zone(raw.zone), op, deadline)
        try:
            fresh = self._get(raw)
        except gexc.NotFound:
            return _to_instance(raw, detail, state=State.TERMINATED, error=error)
        return _to_instance(fresh, detail, error=error)

    def _wait(
        self, zone: str, op: compute_v1.Operation, deadline: float
    ) -> tuple[str, ErrorKind | None]:
        """Wait until `op` is DONE or the deadline passes; its error (or timeout) as text
        and kind."""
        while op.status != _DONE:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return (
                    f"operation {op.name} not done after {self.timeout_s:g}s; follow it with "
                    f"`gcloud compute operations describe {op.name} --zone {zone}`",
                    ErrorKind.API,
                )
            asked = time.monotonic()
            try:
                op = self._call(
                    self._operations.wait,
                    project=self.project,
                    zone=zone,
                    operation=op.name,
                    timeout=min(remaining, _SERVER_WAIT_S) + 5,
                )
            except requests.Timeout:
                continue
            if op.status != _DONE and time.monotonic() - asked < self.poll_s:
                time.sleep(min(self.poll_s, max(0.0, deadline - time.monotonic())))
        return operation_error(op), operation_error_kind(op)

    def _settle(self, raw: compute_v1.Instance, deadline: float) -> compute_v1.Instance:
        while raw.status in SETTLING and time.monotonic() < deadline:
            time.sleep(min(self.poll_s, max(0.0, deadline - time.monotonic())))
            raw = self._get(raw)
        return raw

    # -- plumbing ----------------------------------------------------------------------------
    def _get(self, raw: compute_v1.Instance) -> compute_v1.Instance:
        return self._call(
            self._instances.get,
            project=self.project,
            zone=short_zone(raw.zone),
            instance=raw.name,
            retry=None,
            timeout=_CALL_TIMEOUT_S,
        )

    def _get_or(self, raw: compute_v1.Instance) -> compute_v1.Instance:
        """The instance as it is now, or as last seen when even that fails."""
        try:
            return self._get(raw)
        except _PER_INSTANCE:
            return raw

    def _call(self, fn: Callable[..., T], /, **kwargs: Any) -> T:
        return self._retrying(fn, **kwargs)

    call = _call  # for the created lifecycle (created.py): transient errors retried


def _to_instance(
    raw: compute_v1.Instance,
    detail: str = "",
    state: State | None = None,
    error: ErrorKind | None = None,
) -> Instance:
    if state is None:
        state = STATUS_MAP.get(raw.status)
        if state is None:
            state = State.PENDING
            detail = "; ".join(filter(None, [detail, f"unknown GCE status {raw.status!r}"]))
    nics = list(raw.network_interfaces)
    return Instance(
        name=raw.name,
        state=state,
        labels=dict(raw.labels),
        zone=short_zone(raw.zone) if raw.zone else None,
        ip=(nics[0].network_i_p or None) if nics else None,
        detail=detail,
        id=str(raw.id) if raw.id else None,
        error=error,
    )
