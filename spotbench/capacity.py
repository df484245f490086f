"""Which candidate zone to ask first: capacity and preemption history per zone (pure).

    seen = zone_history(starts, market, machine_type="n1-standard-4",
                        accelerator="nvidia-tesla-t4", now=now)
    order_zones(["us-central1-a", "us-central1-b", "us-central1-f"], seen)

`starts` is the store's start ledger (`runs/<run>/starts/`, `spotbench.results.StartRecord`:
one record per start request, each refused member with the kind the cloud typed, and the
zone the group's previous attempt was preempted in when control saw it at that start,
`preempted_zone`); `market` is the spot-market statistics (`spotbench.history.market.market`
rows, or the store's dated snapshot of them: per zone × machine type × accelerator,
`preemptions_per_vm_hour`). Ordering, for one machine type and accelerator: fewest capacity
failures within `window` first; then fewest preempted attempts in the window (the ledger's
`preempted_zone`, across runs and groups, and `preemptions` seen now: zone and time); then
the lower preemption rate of the whole history; then the zone whose last capacity failure
is oldest; then the candidates' own order (a zone never tried ranks as one without
failures: it is worth a try).

`ZoneCounts` keeps these counts for one shape as records arrive, so a caller ordering many
groups passes over the ledger once. The created lifecycle orders every start of a tick
with one (`spotbench.control.zones.ZoneOrder`: the ledger and the market snapshot read once
per tick) and hands the order to the cloud: GCE is asked one zone at a time in this order,
EC2 Fleet gets it as each override's `Priority`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

WINDOW = timedelta(days=14)
CAPACITY = "capacity"


class StartLike(Protocol):
    at: datetime
    zone: str | None
    machine_type: str
    accelerator: str | None
    errors: dict[str, str]
    preempted_zone: str | None


@dataclass(frozen=True)
class ZoneHistory:
    zone: str
    starts: int = 0  # start requests within the window
    capacity_failures: int = 0  # of them, refused for capacity (any member)
    last_failure: datetime | None = None
    preemptions: int = 0  # preempted attempts within the window
    preemptions_per_vm_hour: float | None = None  # the whole history (market statistics)

    def key(self) -> tuple[int, int, float, float]:
        rate = self.preemptions_per_vm_hour or 0.0
        last = self.last_failure.timestamp() if self.last_failure else float("-inf")
        return (self.capacity_failures, self.preemptions, rate, last)


def zone_history(starts: Iterable[StartLike], market: Iterable[Mapping[str, Any]] = (), *,
                 machine_type: str, accelerator: str | None = None, now: datetime,
                 preemptions: Iterable[tuple[str, datetime]] = (),
                 window: timedelta = WINDOW) -> dict[str, ZoneHistory]:
    """Per zone, what happened to starts of `machine_type` × `accelerator` since `now − window`."""
    counts = ZoneCounts(machine_type, accelerator, since=now - window, until=now, market=market)
    counts.add(starts)
    return counts.history(preemptions)


class ZoneCounts:
    """`zone_history`'s counters for one machine type × accelerator, kept up to date as
    start records arrive (`add`: one step per record), so a tick that orders many groups
    passes over the ledger once per shape, not once per group."""

    def __init__(self, machine_type: str, accelerator: str | None, *, since: datetime,
                 until: datetime, market: Iterable[Mapping[str, Any]] = ()) -> None:
        self.machine_type, self.accelerator = machine_type, accelerator
        self.since, self.until = since, until
        self.counts: dict[str, dict[str, Any]] = {}
        _add_market_rates(self.counts, market, machine_type, accelerator)

    def add(self, starts: Iterable[StartLike]) -> None:
        """Count start requests of this shape in the window (records of other shapes, out of
        the window or without a zone are passed over)."""
        _count_starts(self.counts, starts, self.machine_type, self.accelerator,
                      self.since, self.until)

    def history(self, preemptions: Iterable[tuple[str, datetime]] = ()) -> dict[str, ZoneHistory]:
        """Per zone, the counts so far, with `preemptions` (zone, when) seen now added."""
        counts = {zone: dict(e) for zone, e in self.counts.items()}
        _count_preemptions(counts, preemptions, self.since, self.until)
        return {zone: ZoneHistory(zone=zone, **e) for zone, e in counts.items()}


def _entry(counts: dict[str, dict[str, Any]], zone: str) -> dict[str, Any]:
    """`zone`'s counters in `counts`, added (all zero) the first time the zone is seen."""
    return counts.setdefault(zone, {"starts": 0, "capacity_failures": 0, "last_failure": None,
                                    "preemptions": 0, "preemptions_per_vm_hour": None})


def _same_kind(row_machine_type: str | None, row_accelerator: str | None,
               machine_type: str, accelerator: str | None) -> bool:
    """A start or market row of `machine_type` × `accelerator` (no accelerator: "" or None)."""
    return row_machine_type == machine_type and (row_accelerator or None) == (accelerator or None)


def _count_starts(counts: dict[str, dict[str, Any]], starts: Iterable[StartLike],
                  machine_type: str, accelerator: str | None,
                  since: datetime, now: datetime) -> None:
    """Start requests in the window per zone, those refused for capacity and the last of them;
    and the preempted attempts control noted at a start (`preempted_zone`)."""
    for s in starts:
        if not s.zone or not _same_kind(s.machine_type, s.accelerator, machine_type, accelerator):
            continue
        if not since <= s.at <= now:
            continue
        if s.preempted_zone:  # the attempt before this start was preempted there
            _entry(counts, s.preempted_zone)["preemptions"] += 1
        e = _entry(counts, s.zone)
        e["starts"] += 1
        if CAPACITY in s.errors.values():
            e["capacity_failures"] += 1
            if e["last_failure"] is None or s.at > e["last_failure"]:
                e["last_failure"] = s.at


def _count_preemptions(counts: dict[str, dict[str, Any]],
                       preemptions: Iterable[tuple[str, datetime]],
                       since: datetime, now: datetime) -> None:
    """Preempted attempts in the window per zone."""
    for zone, at in preemptions:
        if zone and since <= at <= now:
            _entry(counts, zone)["preemptions"] += 1


def _add_market_rates(counts: dict[str, dict[str, Any]], market: Iterable[Mapping[str, Any]],
                      machine_type: str, accelerator: str | None) -> None:
    """Each zone's preemption rate over the whole history, from the market statistics."""
    for row in market:
        if row.get("zone") and _same_kind(row.get("machine_type"), row.get("accelerator"),
                                          machine_type, accelerator):
            rate = row.get("preemptions_per_vm_hour")
            _entry(counts, row["zone"])["preemptions_per_vm_hour"] = rate


def order_zones(candidates: Sequence[str], history: Mapping[str, ZoneHistory]) -> list[str]:
    """`candidates` in the order to ask them (a stable sort: ties keep the given order)."""
    return sorted(candidates, key=lambda z: history.get(z, ZoneHistory(z)).key())


def why(zone: str, history: Mapping[str, ZoneHistory]) -> str:
    """One line for people: what the history says about `zone`."""
    h = history.get(zone)
    if h is None or not (h.starts or h.preemptions or h.preemptions_per_vm_hour):
        return f"{zone}: no recent history"
    parts = [f"{h.capacity_failures} of {h.starts} recent starts refused for capacity"]
    if h.preemptions:
        parts.append(f"{h.preemptions} recent preemptions")
    if h.preemptions_per_vm_hour is not None:
        parts.append(f"{h.preemptions_per_vm_hour:.3g} preemptions per VM-hour overall")
    return f"{zone}: " + ", ".join(parts)
