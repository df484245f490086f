"""The records a store keeps: `Result` (one value), `RunInfo` (a run's ledger entry),
`Attempt` (one stored group run), `StartRecord` (one start request), their bounds, run ids,
and the store's errors."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

# Bounds on one attempt file (what a group may store per attempt; `WorkloadRun` stops
# recording at MAX_RECORDS, a reader skips a file past either bound, with a warning).
MAX_RECORDS = 10_000
MAX_ATTEMPT_BYTES = 16 << 20
# attempt files control reads beyond a group's launches in a run (issue #38): a launch stores
# one (control's marker numbers a silent launch's), and may store a second after its end was
# noted (a late `done`: `write_group` numbers it next)
SPARE_ATTEMPTS = 2
MAX_NAME_LEN = 128  # a metric name (it names files and columns of the report)
MAX_UNIT_LEN = 32
MAX_ZONE_LEN = 64  # a zone name in control's own notes (GCE's and EC2's are under 30)
# Bounds on the numbers of one record, so no reader's aggregate leaves the floats: a sum of
# 10^250 values, their squares, a ratio of two of them, stay finite (issue 38).
MAX_VALUE = 1e18  # |value| at most this…
MIN_VALUE = 1e-18  # …and, unless 0, at least this
MAX_COST_USD = 1e9  # one record's cost
MAX_BILLED_S = 1e9  # one record's billed time (31 years)
MAX_TRIAL = 10**6


class StoreError(RuntimeError):
    """The results store could not be read or written (read-only, full, unreachable)."""


class CorruptLedger(StoreError):
    """A run ledger file (`runs/<run>/run.json`) is not what spotbench wrote."""


def utcnow() -> datetime:
    return datetime.now(UTC)


RUN_ID_FORMAT = "%Y%m%dT%H%M%SZ"
RUN_ID_SUFFIX = 4  # hex digits added to a run opened in the same second as a closed one


def new_run_id(now: datetime | None = None) -> str:
    return (now or utcnow()).strftime(RUN_ID_FORMAT)


def run_id_lengths() -> tuple[int, int]:
    """The lengths a run id has: `new_run_id()`, and with `open_run`'s `-<hex>` suffix.

    IAM resource patterns cannot match one path segment (`*` spans `/`), so the AWS member
    policy matches a run segment by its length (`?` per character; infra/aws/identity.py).
    """
    n = len(new_run_id(datetime(2000, 1, 1, tzinfo=UTC)))
    return n, n + 1 + RUN_ID_SUFFIX


def value_problem(value: object) -> str | None:
    """Why `value` cannot be a record's value (not a finite number within the bounds), or
    None: the one check of the producers (workloads.common, the container's parser) and the
    model."""
    try:
        number = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        number = False
    if not number:
        return f"must be a finite number, got {str(value)[:40]!r}"
    size = abs(float(value))  # type: ignore[arg-type]
    if size > MAX_VALUE or 0 < size < MIN_VALUE:
        return f"must be 0 or ±{MIN_VALUE:g} to ±{MAX_VALUE:g}, got {str(value)[:40]}"
    return None


def _bounded_value(value: float) -> float:
    why = value_problem(value)
    if why:
        raise ValueError(f"value {why}")
    return value


def _utc(value: datetime) -> datetime:
    """A record's time in UTC (a time without offset is UTC), its year 1 to 9999."""
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise ValueError(f"{value.isoformat()} is outside years 1 to 9999 in UTC") from None


UtcTime = Annotated[datetime, AfterValidator(_utc)]
Value = Annotated[float, AfterValidator(_bounded_value)]


class Result(BaseModel):
    """One value. Numbers are finite (JSON has no inf/NaN: they would come back as null and
    refuse to load) and bounded (`MAX_VALUE`, `MIN_VALUE`, `MAX_COST_USD`, `MAX_BILLED_S`:
    no sum or mean of them overflows); costs and billed time are never negative; times are
    UTC (years 1 to 9999 once their offset is applied); names are bounded."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    sweep: str
    run: str
    group: str
    trial: int = Field(ge=0, le=MAX_TRIAL)
    params: dict[str, Any] = Field(default_factory=dict)
    workload: str
    metric: str = Field(min_length=1, max_length=MAX_NAME_LEN)
    value: Value
    unit: str = Field(max_length=MAX_UNIT_LEN)
    cloud: str
    machine_type: str
    accelerator: str | None = None
    zone: str | None = None
    spot: bool = False
    preempted: bool = False
    started_at: UtcTime
    ended_at: UtcTime
    billed_s: float | None = Field(default=None, ge=0, le=MAX_BILLED_S)
    cost_usd: float | None = Field(default=None, ge=0, le=MAX_COST_USD)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("metadata")
    @classmethod
    def _known_metadata(cls, meta: dict[str, Any]) -> dict[str, Any]:
        """The metadata keys readers compute with (report, costs) have their type."""
        for key, kind in _METADATA_TYPES.items():
            value = meta.get(key)
            if value is None:
                continue
            if kind == "count" and not (isinstance(value, int) and not isinstance(value, bool)
                                        and 0 <= value <= 1 << 53):
                raise ValueError(f"metadata {key} must be a whole number ≥ 0")
            if kind == "text" and not (isinstance(value, str) and len(value) <= MAX_NAME_LEN):
                raise ValueError(f"metadata {key} must be a string of at most {MAX_NAME_LEN} characters")
            if kind == "names" and not (isinstance(value, list) and len(value) <= 1024 and all(
                    isinstance(v, str) and len(v) <= MAX_NAME_LEN for v in value)):
                raise ValueError(f"metadata {key} must be a list of names")
        return meta


_METADATA_TYPES = {"members": "count", "size_bytes": "count", "cpu_count": "count",
                   "host_cores": "count", "accelerator_count": "count", "placement": "text",
                   "member_types": "names", "artifacts_bytes": "count"}


class RunInfo(BaseModel):
    run: str
    opened_at: UtcTime
    closed_at: UtcTime | None = None
    reason: str | None = None
    ticks: list[str] = Field(default_factory=list)  # scheduler tick times this run served
    # an adaptive search's trial parameters per group, asked by control when it started it
    assigned: dict[str, dict[str, Any]] = Field(default_factory=dict)


@dataclass(frozen=True)
class Attempt:
    """One stored group run (file): whether its records say preempted. When it ran is not
    here: the records' own times are the member's word (`spotbench.ledger` has control's)."""

    group: str
    attempt: int
    preempted: bool
    contaminated: str | None = None  # why the member found its own numbers untrustworthy (a stall)

    @property
    def key(self) -> str:
        return f"{self.group}.{self.attempt}"


class StartRecord(BaseModel):
    """One start request of a group: the cloud's answer, member by member."""

    run: str
    group: str
    at: UtcTime
    machine_type: str
    accelerator: str | None = None
    zone: str | None = None
    members: int
    failed: dict[str, str] = Field(default_factory=dict)  # member → the cloud's words
    errors: dict[str, str] = Field(default_factory=dict)  # member → error kind, when the cloud typed it
    # the zone the group's previous attempt was preempted in, as control saw it at this start
    # (the cloud's word about its members: the capacity ordering counts it, spotbench.capacity)
    preempted_zone: str | None = Field(default=None, min_length=1, max_length=MAX_ZONE_LEN)


class SpentSummary(BaseModel):
    """The budget's spend through a closed run (`spent.json` at the store's root, written by
    the budget check under the control lock): so a start or done prices the open run's
    launches, not every launch of the history (issue #38)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    through: str = Field(min_length=1, max_length=64)  # every run up to this id is counted
    usd: float = Field(ge=0)
    unknown: int = Field(ge=0)  # launches of groups the spec no longer prices
    runs: int = Field(ge=0)
