"""The `aws` cloud: operate the EC2 instances a sweep's Pulumi stack declared (boto3).

Instances are selected by tags (`tag:KEY` filters; terminated instances are never
returned). `Instance.name` is the EC2 instance id, which is what the `done` function sees
as its caller (the instance role's session name); the `Name` tag stays in `labels`.

Every verb is idempotent: an instance already in the wanted state costs no API call.
Capacity errors (`InsufficientInstanceCapacity`, spot capacity, …) do not raise: the
instance comes back with a `detail` saying so, and the next scheduler tick retries.

A persistent spot instance has EC2's spot request state machine behind it: after a stop, the
request is `disabled` only a moment later, and `StartInstances` answers
`IncorrectSpotRequestState` until it is (the driver pauses `poll_s` and tries again, within
`wait_timeout_s`); an instance EC2 stopped by an interruption (`StateReason`
`Server.SpotInstance…`) only EC2 may start again, so it is not asked. Both come back as
`waiting` (EC2 holds it for now), never as a capacity failure.
Waits are bounded (`wait_timeout_s`); an instance still pending after that is reported as
it is, not as an error.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import boto3
from botocore.exceptions import ClientError, WaiterError

from spotbench.clouds.aws import fleet
from spotbench.clouds.base import ConsoleOutput, ErrorKind, Instance, State

EC2_STATES: dict[str, State] = {
    "pending": State.PENDING,
    "running": State.RUNNING,
    "stopping": State.STOPPING,
    "stopped": State.STOPPED,
    "shutting-down": State.TERMINATED,
    "terminated": State.TERMINATED,
}
LIVE_STATES = ("pending", "running", "stopping", "stopped")

# Errors that concern one instance and may clear by the next tick: reported, not raised.
CAPACITY_ERRORS = frozenset({
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "InsufficientCapacityOnOutpost",
    "SpotMaxPriceTooLow",
    "Unsupported",
})
# The instance's spot request is not startable yet (a stop still settling, or EC2 holds an
# interrupted instance): wait for EC2, never a capacity failure.
WAITING_ERRORS = frozenset({"IncorrectSpotRequestState"})
TRANSIENT_STATE_ERRORS = frozenset({"IncorrectInstanceState", "IncorrectState"})
# Account limits: reported per instance as quota (the next tick will not clear them).
QUOTA_ERRORS = frozenset({"InstanceLimitExceeded", "VcpuLimitExceeded", "MaxSpotInstanceCountExceeded"})
PER_INSTANCE_ERRORS = CAPACITY_ERRORS | QUOTA_ERRORS | TRANSIENT_STATE_ERRORS | WAITING_ERRORS
HELD_BY_EC2 = ("a spot interruption stopped it and only EC2 restarts it (when capacity returns; "
               "it then powers itself off outside a run): waiting for EC2, retried by the next "
               "start or done")


class AwsCloudError(RuntimeError):
    """An EC2 call failed for a reason retrying will not fix (permissions, region, …)."""


class AwsCloud:
    name = "aws"

    def __init__(
        self,
        region: str,
        endpoint_url: str | None = None,
        session: Any = None,
        *,
        wait_timeout_s: float = 60,
        poll_s: float = 5,
        lifecycle: str = "stopped",
    ) -> None:
        self.region = region
        self.lifecycle = lifecycle  # created: made at start (spotbench/clouds/aws/fleet.py)
        self.wait_timeout_s = wait_timeout_s
        self.poll_s = poll_s
        session = session or boto3.Session(region_name=region)
        self.ec2 = session.client("ec2", region_name=region, endpoint_url=endpoint_url)

    # ---- the four verbs ---------------------------------------------------------------
    def query(self, labels: Mapping[str, str]) -> list[Instance]:
        raws = self._describe(labels)
        if self.lifecycle == "created":
            raws += self._reclaimed_members(labels, raws)
        return [_to_instance(raw) for raw in raws]

    def start(self, labels: Mapping[str, str], zones: Sequence[str] = ()) -> list[Instance]:
        if self.lifecycle == "created":
            return self._create(labels, zones)
        raws = self._describe(labels)
        stopped = [r for r in raws if r["State"]["Name"] == "stopped"]
        held = {r["InstanceId"]: (HELD_BY_EC2, ErrorKind.WAITING)
                for r in stopped if _reclaimed(r) == ErrorKind.PREEMPTED}
        todo = [r["InstanceId"] for r in stopped if r["InstanceId"] not in held]
        details = self._start_settled(todo)
        started = [i for i in todo if i not in details]
        details.update(held)
        self._wait("instance_running", started)
        return self._refresh(raws, details)

    def stop(self, labels: Mapping[str, str]) -> list[Instance]:
        if self.lifecycle == "created":  # made at start: a stop leaves nothing
            return self.terminate(labels)
        raws = self._describe(labels)
        todo = [r["InstanceId"] for r in raws if r["State"]["Name"] in ("pending", "running")]
        details = self._act(self.ec2.stop_instances, todo)
        self._wait("instance_stopped", [i for i in todo if i not in details])
        return self._refresh(raws, details)

    def terminate(self, labels: Mapping[str, str]) -> list[Instance]:
        raws = self._describe(labels)
        if not raws:
            return []
        # A persistent spot request would launch a replacement: cancel it first.
        requests = sorted({r["SpotInstanceRequestId"] for r in raws if r.get("SpotInstanceRequestId")})
        if requests and self.lifecycle != "created":  # a fleet's one-time requests close
            self._call(self.ec2.cancel_spot_instance_requests, SpotInstanceRequestIds=requests)
        ids = [r["InstanceId"] for r in raws]
        details = self._act(self.ec2.terminate_instances, ids)
        self._wait("instance_terminated", [i for i in ids if i not in details])
        return self._refresh(raws, details)

    # ---- the created lifecycle ----------------------------------------------------------
    def _create(self, labels: Mapping[str, str], zones: Sequence[str]) -> list[Instance]:
        """The group's instances made now, all in one of `zones` (first choice first; none
        given: every zone its templates name), or none: each member then comes back
        terminated with EC2's words and the kind (capacity, quota)."""
        raws = self._describe(labels)
        by_member = self.templates(labels)
        if not by_member:
            raise AwsCloudError(
                f"no launch templates tagged {dict(labels)} in {self.region}: the sweep's "
                "stack declares them with `lifecycle: created`; run `pulumi up`")
        if self.complete(raws, by_member):
            return self._refresh(raws, {})  # already made and running: nothing to do
        if raws:  # what is left of an earlier launch (a member preempted, …): start afresh
            self.terminate(labels)
        order = list(zones) or sorted({z for per in by_member.values() for z in per})
        placed = self.place(labels, by_member, order)
        if not placed.ids:
            return unplaced(labels, by_member, order, placed.errors)
        return self.made(placed)

    def templates(self, labels: Mapping[str, str]) -> dict[str, dict[str, fleet.Template]]:
        """member → zone → launch template, of this region (`fleet.templates`)."""
        return self._call(fleet.templates, ec2=self.ec2, labels=labels)

    @staticmethod
    def complete(raws: list[dict], by_member: Mapping[str, Mapping[str, fleet.Template]]) -> bool:
        """`raws` are every member of the group, each once, pending or running."""
        names = {_name(r) for r in raws if r["State"]["Name"] in ("pending", "running")}
        return bool(raws) and names == set(by_member) and len(raws) == len(by_member)

    def place(self, labels: Mapping[str, str], by_member: Mapping[str, Mapping[str, fleet.Template]],
              zones: Sequence[str]) -> fleet.Placed:
        """Instant fleets in this region, in one of `zones` or nothing (`fleet.create_group`)."""
        return self._call(fleet.create_group, ec2=self.ec2, labels=labels,
                          by_member=by_member, zones=list(zones), terminate=self._terminate_ids)

    def made(self, placed: fleet.Placed) -> list[Instance]:
        """What `place` made, once running (bounded wait)."""
        self._wait("instance_running", placed.ids)
        return [_to_instance(r) for r in self._describe({}, placed.ids)]

    def _reclaimed_members(self, labels: Mapping[str, str], live: list[dict]) -> list[dict]:
        """Members EC2 terminated by a spot interruption (a fleet's spot instances are
        terminated, `StateReason` `Server.SpotInstanceTermination`; terminated instances stay
        visible about an hour) that have no live instance now, the latest per member: they
        come back TERMINATED with error preempted in their zone, so control stops the rest of
        the group, retries it and asks that zone later (spotbench/control/zones.py)."""
        have = {_name(r) for r in live}
        latest: dict[str, dict] = {}
        gone = self._describe(labels, states=("shutting-down", "terminated"))
        for raw in sorted(gone, key=lambda r: str(r.get("LaunchTime", ""))):
            if _name(raw) not in have and _reclaimed(raw) == ErrorKind.PREEMPTED:
                latest[_name(raw)] = raw
        return list(latest.values())

    def _terminate_ids(self, ids: list[str]) -> None:
        self._act(self.ec2.terminate_instances, ids)

    # ---- helpers ------------------------------------------------------------------------
    def _start_settled(self, ids: list[str]) -> dict[str, tuple[str, ErrorKind]]:
        """StartInstances; members whose spot request is still settling after a stop
        (`IncorrectSpotRequestState`) are asked again every `poll_s` within `wait_timeout_s`."""
        details = self._act(self.ec2.start_instances, ids)
        deadline = time.monotonic() + self.wait_timeout_s
        while True:
            settling = [i for i, (_, kind) in details.items() if kind == ErrorKind.WAITING]
            if not settling or time.monotonic() + self.poll_s > deadline:
                return details
            time.sleep(self.poll_s)
            again = self._act(self.ec2.start_instances, settling)
            for instance_id in settling:
                if instance_id in again:
                    details[instance_id] = again[instance_id]
                else:
                    del details[instance_id]

    def console_output(self, instance: Instance, start: int = 0) -> ConsoleOutput:
        """The instance's latest console output (`GetConsoleOutput`, `Latest`: the most
        recent 64 KB, Nitro instance types; botocore decodes the base64). EC2 keeps no
        offsets: a window, `start` unused."""
        out = self._call(self.ec2.get_console_output, InstanceId=instance.name, Latest=True)
        return ConsoleOutput(out.get("Output") or "", window=True)

    def find(self, instance_id: str) -> Instance | None:
        """The live instance with this id (DescribeInstances by id; None: no such instance,
        or terminated): how the functions map a caller's instance to its group (issue #29)."""
        try:
            raw = self._describe({}, [instance_id])
        except AwsCloudError as exc:
            if "InvalidInstanceID" in str(exc):
                return None
            raise
        live = [r for r in raw if r.get("State", {}).get("Name") in LIVE_STATES]
        return _to_instance(live[0]) if live else None

    def _describe(self, labels: Mapping[str, str], ids: list[str] | None = None,
                  states: Sequence[str] = LIVE_STATES) -> list[dict]:
        kwargs: dict[str, Any] = {}
        if ids is not None:
            kwargs["InstanceIds"] = ids
        else:
            filters = [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(labels.items())]
            filters.append({"Name": "instance-state-name", "Values": list(states)})
            kwargs["Filters"] = filters
        found: list[dict] = []
        pages = self._call(self.ec2.get_paginator("describe_instances").paginate, **kwargs)
        try:
            for page in pages:
                for reservation in page.get("Reservations", []):
                    found.extend(reservation.get("Instances", []))
        except ClientError as exc:
            raise _fatal(exc, "DescribeInstances") from exc
        return sorted(found, key=lambda r: r["InstanceId"])

    def _call(self, fn: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except ClientError as exc:
            raise _fatal(exc, getattr(fn, "__name__", "EC2 call")) from exc

    def _act(self, fn: Callable[..., Any], ids: list[str]) -> dict[str, tuple[str, ErrorKind]]:
        """Call `fn` for all ids at once; if EC2 refuses the batch, retry one by one so a
        capacity error on one instance does not hold back the others. Returns the ids that
        failed with a per-instance reason."""
        if not ids:
            return {}
        try:
            fn(InstanceIds=ids)
            return {}
        except ClientError as exc:
            if _code(exc) not in PER_INSTANCE_ERRORS:
                raise _fatal(exc, fn.__name__) from exc
            if len(ids) == 1:
                return {ids[0]: _failure(exc)}
        details: dict[str, tuple[str, ErrorKind]] = {}
        for instance_id in ids:
            try:
                fn(InstanceIds=[instance_id])
            except ClientError as exc:
                if _code(exc) not in PER_INSTANCE_ERRORS:
                    raise _fatal(exc, fn.__name__) from exc
                details[instance_id] = _failure(exc)
        return details

    def _wait(self, waiter_name: str, ids: list[str]) -> None:
        if not ids or self.wait_timeout_s <= 0:
            return
        delay = max(1, int(self.poll_s))
        attempts = max(1, math.ceil(self.wait_timeout_s / delay))
        try:
            self.ec2.get_waiter(waiter_name).wait(
                InstanceIds=ids, WaiterConfig={"Delay": delay, "MaxAttempts": attempts}
            )
        except WaiterError:
            pass  # bounded: report the instances as they are now; the next tick looks again

    def _refresh(self, before: list[dict],
                 details: Mapping[str, tuple[str, ErrorKind]]) -> list[Instance]:
        ids = [r["InstanceId"] for r in before]
        try:
            now = {r["InstanceId"]: r for r in self._describe({}, ids=ids)} if ids else {}
        except AwsCloudError:
            now = {}
        out = []
        for raw in before:
            current = now.get(raw["InstanceId"], raw)
            out.append(_to_instance(current, details.get(raw["InstanceId"])))
        return out


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _detail(exc: ClientError) -> str:
    message = exc.response.get("Error", {}).get("Message", "")
    if _code(exc) in CAPACITY_ERRORS:
        return f"{_code(exc)}: {message} (no capacity now; retried on the next tick)"
    if _code(exc) in QUOTA_ERRORS:
        return f"{_code(exc)}: {message} (an account limit: raise it in Service Quotas)"
    if _code(exc) in WAITING_ERRORS:
        return (f"{_code(exc)}: {message} (its spot request is not startable yet: waiting "
                "for EC2, retried by the next start or done)")
    return f"{_code(exc)}: {message} (retried on the next tick)"


def _failure(exc: ClientError) -> tuple[str, ErrorKind]:
    """A per-instance failure: the cloud's words and the typed kind."""
    code = _code(exc)
    if code in CAPACITY_ERRORS:
        kind = ErrorKind.CAPACITY
    elif code in QUOTA_ERRORS:
        kind = ErrorKind.QUOTA
    elif code in WAITING_ERRORS:
        kind = ErrorKind.WAITING
    else:
        kind = ErrorKind.API
    return _detail(exc), kind


def _fatal(exc: ClientError, what: str) -> AwsCloudError:
    code = _code(exc)
    hint = ""
    if code in ("UnauthorizedOperation", "AuthFailure", "AccessDenied", "AccessDeniedException"):
        hint = (" — the caller's role lacks EC2 permissions on these instances (the Lambda "
                "role allows Start/Stop only on instances tagged managed-by=spotbench)")
    elif code.startswith("InvalidInstanceID"):
        hint = " — the instance is gone; run `pulumi up` to recreate the sweep's instances"
    message = exc.response.get("Error", {}).get("Message", str(exc))
    return AwsCloudError(f"EC2 {what} failed: {code}: {message}{hint}")


def _to_instance(raw: Mapping[str, Any], failure: tuple[str, ErrorKind] | None = None) -> Instance:
    tags = {t["Key"]: t["Value"] for t in raw.get("Tags", []) or []}
    error = failure[1] if failure else _reclaimed(raw)
    said = str((raw.get("StateReason") or {}).get("Message", "")) if error == ErrorKind.PREEMPTED else ""
    return Instance(
        name=raw["InstanceId"],
        state=EC2_STATES.get(raw.get("State", {}).get("Name", ""), State.PENDING),
        labels=tags,
        zone=raw.get("Placement", {}).get("AvailabilityZone"),
        ip=raw.get("PrivateIpAddress"),
        detail=failure[0] if failure else said,
        error=error,
    )


def _reclaimed(raw: Mapping[str, Any]) -> ErrorKind | None:
    """Why a stopped or terminated instance ended, when EC2 reclaimed it: its `StateReason`
    code is `Server.SpotInstanceShutdown` (interruption behaviour stop),
    `Server.SpotInstanceTermination` (terminate: the created lifecycle's fleets) or
    `…Hibernate`; `Client.UserInitiatedShutdown` (a stop or terminate call, or the workload
    powering off) is no error. A running instance's last reason is history."""
    if raw.get("State", {}).get("Name") not in ("stopping", "stopped", "shutting-down", "terminated"):
        return None
    code = str((raw.get("StateReason") or {}).get("Code", ""))
    return ErrorKind.PREEMPTED if code.startswith("Server.SpotInstance") else None


def _name(raw: Mapping[str, Any]) -> str:
    return next((t["Value"] for t in raw.get("Tags", []) or [] if t["Key"] == "Name"), "")


def unplaced(labels: Mapping[str, str], by_member: Mapping[str, Mapping[str, fleet.Template]],
              zones: Sequence[str], errors: list[fleet.FleetError]) -> list[Instance]:
    """Every member, not made: what EC2 answered in each zone, typed."""
    quota = any(e.quota for e in errors)
    kind = ErrorKind.QUOTA if quota else ErrorKind.CAPACITY if errors else ErrorKind.API
    said = "; ".join(f"{e.zone}: {e.code}: {e.message}" for e in errors) or "no fleet launched"
    hint = (fleet.SPOT_ROLE_FIX if any(e.code.endswith(fleet.SPOT_ROLE_MISSING) for e in errors)
            else "an account limit: raise it in Service Quotas" if quota else
            "no candidate zone had capacity for the whole group now; retried on the next tick")
    return [Instance(name=m, state=State.TERMINATED, labels={**labels, "Name": m},
                     zone=zones[0] if zones else None, detail=f"{said} ({hint})", error=kind)
            for m in sorted(by_member)]
