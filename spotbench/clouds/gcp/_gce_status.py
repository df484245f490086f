"""Pure helpers for the gcp driver: GCE status map, label filters, zone names, op errors.

Kept free of google.cloud imports so they are cheap to test and reuse.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime

from spotbench.catalog import GCP_CATALOG
from spotbench.clouds.base import ErrorKind, State

# GCE instance lifecycle → the common states. GCE's TERMINATED means *stopped* (it can be
# started again); an instance that no longer exists is reported as State.TERMINATED.
STATUS_MAP: Mapping[str, State] = {
    "PROVISIONING": State.PENDING,
    "STAGING": State.PENDING,
    "REPAIRING": State.PENDING,  # host failure being repaired; comes back RUNNING
    "RUNNING": State.RUNNING,
    "STOPPING": State.STOPPING,
    "SUSPENDING": State.STOPPING,
    "SUSPENDED": State.STOPPED,  # resumed (not started) by GcpCloud.start
    "TERMINATED": State.STOPPED,
}

# Statuses in which start/stop has nothing to do (already there, or already on the way).
START_NOOP = frozenset({"RUNNING", "PROVISIONING", "STAGING", "REPAIRING"})
STOP_NOOP = frozenset({"TERMINATED", "SUSPENDED", "STOPPING", "SUSPENDING"})
# Statuses an instance must leave before it can be started again.
SETTLING = frozenset({"STOPPING", "SUSPENDING"})

# GCE error codes of a failed start: no capacity now (spot stockout) vs a quota.
CAPACITY_CODES = frozenset({
    "ZONE_RESOURCE_POOL_EXHAUSTED",
    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
    "RESOURCE_POOL_EXHAUSTED",
    "STOCKOUT",
    "INSUFFICIENTCAPACITY",  # bulkInsert's up-front answer: HTTP 503, reason insufficientCapacity
})

# The zone operation GCE records when it preempts a spot/preemptible VM.
PREEMPTED_OPERATION = "compute.instances.preempted"

_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


def label_filter(labels: Mapping[str, str]) -> str:
    """A Compute API list filter matching instances carrying every label in `labels`.

    `{"a": "x", "b": "y"}` → `(labels.a = "x") AND (labels.b = "y")`. Keys and values must
    follow GCE label rules, which also guarantees the expression cannot be broken out of.
    """
    terms = []
    for key, value in sorted(labels.items()):
        if not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(value):
            raise ValueError(
                f"label {key}={value!r} is not a valid GCE label (lowercase letters, digits, "
                "'-' and '_', keys start with a letter, at most 63 characters)"
            )
        terms.append(f'(labels.{key} = "{value}")')
    return " AND ".join(terms)


def _time(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def preempted_since_start(instance: object, operations: Iterable[object]) -> str | None:
    """When a `compute.instances.preempted` operation among `operations` hit `instance`
    after its last start (its time as GCE wrote it), else None. Matches the instance by id,
    or by name in the operation's target link."""
    started = _time(getattr(instance, "last_start_timestamp", ""))
    name, ident = getattr(instance, "name", ""), str(getattr(instance, "id", "") or "")
    for op in operations:
        if getattr(op, "operation_type", "") != PREEMPTED_OPERATION:
            continue
        target = str(getattr(op, "target_id", "") or "")
        link = getattr(op, "target_link", "") or ""
        if not ((ident and target == ident) or link.rstrip("/").endswith(f"/instances/{name}")):
            continue
        raw_when = getattr(op, "end_time", "") or getattr(op, "insert_time", "")
        when = _time(raw_when)
        if started is None or (when is not None and when >= started):
            return raw_when
    return None


def short_zone(zone: str) -> str:
    """`https://…/zones/us-central1-a` or `zones/us-central1-a` → `us-central1-a`."""
    return zone.rstrip("/").rsplit("/", 1)[-1]


def zone_allowed(zone: str, zones: Iterable[str] | None, region: str | None) -> bool:
    """Whether `zone` (short name) lies in the given zones, or the given region."""
    if zones:
        return zone in set(zones)
    if region:
        return GCP_CATALOG.zone_in_region(zone, region)
    return True


def operation_error(op: object) -> str:
    """A one-line description of a finished operation's error, or "" when it succeeded.

    Works on compute_v1 Operation objects (error.errors[].code/message, http_error_*).
    """
    error = getattr(op, "error", None)
    errors = list(getattr(error, "errors", None) or [])
    if not errors:
        return ""
    parts = [f"{e.code}: {e.message}" if e.message else str(e.code) for e in errors]
    status = getattr(op, "http_error_status_code", 0)
    suffix = f" (HTTP {status})" if status else ""
    return "; ".join(parts) + suffix


def operation_error_kind(op: object) -> ErrorKind | None:
    """The typed kind of a finished operation's error (None when it succeeded)."""
    error = getattr(op, "error", None)
    codes = [str(getattr(e, "code", "")) for e in (getattr(error, "errors", None) or [])]
    if not codes:
        return None
    return error_kind_of_codes(codes)


def error_kind_of_codes(codes: Iterable[str]) -> ErrorKind:
    codes = [c.upper() for c in codes]
    if any(c in CAPACITY_CODES for c in codes):
        return ErrorKind.CAPACITY
    if any("QUOTA" in c for c in codes):
        return ErrorKind.QUOTA
    return ErrorKind.API
