"""Which run group an instance is, from the sweep's own records; what a group may be granted.

Cloud-neutral (issue #29, docs/identity.md). A member proves *which instance* it is with what
its cloud signs (GCE: the instance identity token's `google.compute_engine` claims; EC2: the
instance profile's session, whose role session name is the instance id). That proof becomes
an `InstanceClaim`. The claim never says which group the instance is: `group_of` decides it
from the sweep's own records —

1. the claim's project/account must be the sweep's;
2. the claimed instance name must be one of the plan's member names (`Roster`);
3. the live instance of that name, as the cloud's API reports it (`Lookup`: GCE
   `instances.get`, EC2 `DescribeInstances` by id), must exist, have the claimed id and
   carry the deployer-written group label/tag (`spotbench-group`) of that member's group.

Anything else is an `InstanceRefused` (a `Forbidden`: HTTP 403) with a typed `reason`.

The functions then mint a `Grant` for that group only: which key prefixes of the sweep's
results root it may write (`runs/<run>/<group>.` for records, `checkpoints/<group>/` when the
workload keeps checkpoints), until the group's deadline. Each cloud turns the grant into its
own credential (GCS signed POST policy / downscoped token; S3 presigned POST / STS session
policy); `Grant.allows` is the rule those credentials must encode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from spotbench.auth import Forbidden


@dataclass(frozen=True)
class InstanceClaim:
    """What the cloud signed about the calling instance (never what the instance says)."""

    instance_id: str  # GCE: the numeric id; EC2: i-…
    instance_name: str  # GCE: the instance name; EC2: the Name tag the plan gave it
    location: str  # GCE: zone; EC2: region
    account: str  # GCP project id; AWS account id


@dataclass(frozen=True)
class LiveInstance:
    """The instance of a name (or id) as the cloud's API reports it now."""

    instance_id: str
    name: str
    group: str | None  # the deployer-written `spotbench-group` label/tag; None: absent


# The cloud's lookup of the live instance a claim names (GCE instances.get by zone + name;
# EC2 DescribeInstances by id). None: no such instance. May raise `Unavailable` (503).
Lookup = Callable[[InstanceClaim], "LiveInstance | None"]

RefusalReason = Literal[
    "other-account",  # the instance is in another project/account than the sweep's
    "not-a-member",  # its name is none of the plan's member names (another sweep, a stranger)
    "no-such-instance",  # the cloud has no live instance of that name/id
    "id-mismatch",  # the live instance of that name has another id (a recreated/forged name)
    "group-mismatch",  # its group label is not the plan's group of that name
]


class InstanceRefused(Forbidden):
    """The caller is not an instance of this sweep's plan (HTTP 403)."""

    def __init__(self, reason: RefusalReason, message: str) -> None:
        super().__init__(message)
        self.reason: RefusalReason = reason


class _PlannedGroup(Protocol):  # spotbench.plan.RunGroup, without importing the layer above
    @property
    def id(self) -> str: ...
    @property
    def members(self) -> Iterable[Any]: ...  # each with `.name`


@dataclass(frozen=True)
class Roster:
    """The sweep's own record of its instances: member name → run group id, and the
    project/account the instances live in."""

    sweep: str
    account: str
    members: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of_plan(cls, sweep: str, account: str, groups: Iterable[_PlannedGroup]) -> Roster:
        return cls(sweep, account, {m.name: g.id for g in groups for m in g.members})


def group_of(claim: InstanceClaim, roster: Roster, lookup: Lookup) -> str:
    """The run group of the instance `claim` names, from the sweep's records; `InstanceRefused`
    when it is not an instance of this sweep's plan, live, with the claimed id."""
    name = claim.instance_name
    if claim.account != roster.account:
        raise InstanceRefused(
            "other-account", f"instance {name!r} belongs to {claim.account!r}, not to "
            f"{roster.account!r} where sweep {roster.sweep} runs")
    planned = roster.members.get(name)
    if planned is None:
        raise InstanceRefused(
            "not-a-member", f"instance {name!r} is not a member of sweep {roster.sweep}")
    live = lookup(claim)
    if live is None:
        raise InstanceRefused(
            "no-such-instance", f"instance {name!r} ({claim.instance_id}) does not exist in "
            f"{claim.location}; only a live member of sweep {roster.sweep} may call")
    if live.name != name or live.instance_id != claim.instance_id:
        raise InstanceRefused(
            "id-mismatch", f"the instance named {name!r} has id {live.instance_id}, not the "
            f"claimed {claim.instance_id}")
    if live.group != planned:
        raise InstanceRefused(
            "group-mismatch", f"instance {name!r} is labelled group {live.group!r}, but the "
            f"plan of sweep {roster.sweep} puts it in {planned!r}")
    return planned


# --- grants -------------------------------------------------------------------------------


def record_prefix(run: str, group: str) -> str:
    """The records (and raw outputs) of `group` in `run`: `runs/<run>/<group>.<n>.jsonl`,
    `runs/<run>/<group>.<n>/<file>` — relative to the sweep's results root."""
    _segment(run, "run")
    _segment(group, "group")
    return f"runs/{run}/{group}."


def checkpoint_prefix(group: str) -> str:
    """The checkpoints of `group`, every run: `checkpoints/<group>/<run>/…`."""
    _segment(group, "group")
    return f"checkpoints/{group}/"


def _segment(value: str, what: str) -> None:
    if not value or "/" in value or "." in value or value in (".", ".."):
        raise ValueError(f"{what} id {value!r} cannot name a key prefix (no '/', '.', empty)")


def deadline_of(launched: datetime, run_time: timedelta) -> datetime:
    """A group's deadline: its last launch + the spec's `deadline` (the longest it runs)."""
    if launched.tzinfo is None:
        raise ValueError("launch time must be timezone-aware")
    return (launched + run_time).astimezone(UTC)


MAX_OBJECT_BYTES = 64 << 20  # one object a group uploads: records (readers read 16 MiB), raw output


class GrantRefused(Forbidden):
    """The group has no grant now (not launched in the open run, or past its deadline)."""


def past_deadline(grant: Grant, run: str) -> GrantRefused:
    """The one refusal of a grant asked for after its group's deadline (every cloud)."""
    return GrantRefused(f"group {grant.group} is past its deadline: its deadline "
                        f"({grant.expires.isoformat()}) in run {run} has passed; its launch is "
                        "over, no grant (the stop tick stops it)")


@dataclass(frozen=True)
class Grant:
    """What a group may write, until when: the neutral shape each cloud's credential encodes.

    `prefixes` are relative to the sweep's results root (`<bucket>/<sweep>/`); `expires` is
    the group's deadline (timezone-aware, UTC); `max_bytes` the most one object may hold
    (each cloud's POST policy says it as `content-length-range`)."""

    group: str
    run: str
    prefixes: tuple[str, ...]
    expires: datetime
    max_bytes: int = MAX_OBJECT_BYTES

    def __post_init__(self) -> None:
        if self.expires.tzinfo is None:
            raise ValueError("a grant's expiry must be timezone-aware")
        if not self.prefixes:
            raise ValueError("a grant names at least one key prefix")

    @classmethod
    def for_group(cls, group: str, run: str, expires: datetime, *,
                  checkpoints: bool = False) -> Grant:  # fmt: skip
        prefixes = (record_prefix(run, group),)
        if checkpoints:
            prefixes += (checkpoint_prefix(group),)
        return cls(group, run, prefixes, expires.astimezone(UTC))

    @property
    def records(self) -> str:
        return self.prefixes[0]

    @property
    def checkpoints(self) -> str | None:
        return next((p for p in self.prefixes[1:] if p.startswith("checkpoints/")), None)

    def expired(self, now: datetime | None = None) -> bool:
        return (now or datetime.now(UTC)) >= self.expires

    def allows(self, key: str, now: datetime | None = None) -> bool:
        """Whether this grant covers writing `key` (relative to the results root) at `now`."""
        if self.expired(now) or ".." in key.split("/") or key.startswith("/"):
            return False
        return any(key.startswith(p) and len(key) > len(p) for p in self.prefixes)

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group, "run": self.run, "prefixes": list(self.prefixes),
                "expires": self.expires.isoformat(), "max_bytes": self.max_bytes}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Grant:
        try:
            expires = datetime.fromisoformat(str(data["expires"]))
            return cls(str(data["group"]), str(data["run"]),
                       tuple(str(p) for p in data["prefixes"]), expires,
                       int(data.get("max_bytes", MAX_OBJECT_BYTES)))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a grant: {exc}") from None
