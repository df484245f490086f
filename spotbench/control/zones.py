"""Where to ask first: the candidate zones of a group in the created lifecycle, ordered by
the capacity and preemption history per zone (`spotbench.capacity`).

    zones = ZoneOrder(sweep, now)                   # one per tick (`launch_pending`)
    order = zones.order(group, insts)               # [] / the one zone: nothing read
    cloud.start(group.labels, zones=order)
    zones.note(store.record_start(...))             # later groups of the tick see it

History, read at most once per tick — one control call: the scheduler's start tick, a
member's `done`, a group `stop` — at its first start that has two candidates or more, and
shared by every group that starts in that call, however many:
- the store's start ledger within `WINDOW` (`ResultStore.start_records(since=…)`: one
  listing; only runs that may hold a request in the window are read, each record once per
  store object, so a warm function's next tick reads only the new ones): each start
  request with its zone and the kinds of its refused members (a zone refused for capacity
  counts a capacity failure there), and `preempted_zone`: the zone a group's previous
  attempt was preempted in, noted by control at the start that retried it — so a
  preemption counts for every later start of the same machine type × accelerator, across
  runs and groups, until it leaves the window;
- the market statistics' newest snapshot (`ResultStore.market_snapshot`, `market/<time>.json`,
  written when `spotbench report` or `spotbench market` read the history catalog): each
  zone's preemptions per VM-hour over the whole history; one older than
  `MAX_SNAPSHOT_AGE`, or malformed, is ignored with a warning.
Within the tick, each start request control records (`note`) joins the ledger read, so a
zone refused to one group is asked later for the next. The members of the retried group
the cloud reports preempted count at once (and go to its start record).

Whose word: the ledger and `preempted_zone` are control's own notes (`runs/<run>/starts/`)
and the snapshot sits at the store's root; a member may write only `runs/<run>/<group>.…`
(docs/identity.md, docs/security.md), so none of these objects is a member's. The
snapshot's rates are computed from the attempts' records, whose zone and times are the
members' word: they only break ties after the two counts control saw itself.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from spotbench.capacity import WINDOW, ZoneCounts, order_zones, why
from spotbench.clouds.base import ErrorKind, Instance
from spotbench.control.sweep import Sweep
from spotbench.plan import RunGroup
from spotbench.results import StartRecord, StoreError, utcnow

log = logging.getLogger("spotbench.control")

TICK_SLACK = timedelta(hours=1)  # a tick's own start records are at most this later than it


class ZoneOrder:
    """The candidate-zone ordering of one tick: the history is read once, when first asked,
    and counted once per machine type × accelerator (`ZoneCounts`), then kept up to date."""

    def __init__(self, sweep: Sweep, now: datetime | None) -> None:
        self.sweep = sweep
        self.now = now  # None: the clock at each ordering (what the records of the tick carry)
        self._starts: list[Any] | None = None  # StartRecord, read once
        self._market: list[dict[str, Any]] = []
        self._counts: dict[tuple[str, str | None], ZoneCounts] = {}
        self._at = now or utcnow()

    def _load(self) -> list[Any]:
        if self._starts is not None:
            return self._starts
        store, at = self.sweep.store, self._at
        try:
            self._starts = list(store.start_records(since=at - WINDOW))
        except (StoreError, OSError, ValueError) as exc:
            log.warning("zone history not read (%s): candidates in the spec's order", exc)
            self._starts = []
        try:
            snap = store.market_snapshot(now=at)
        except (StoreError, OSError, ValueError) as exc:
            log.warning("market snapshot not read (%s): zones ordered without it", exc)
            snap = None
        self._market = [r.model_dump() for r in snap.rows] if snap is not None else []
        return self._starts

    def _counts_of(self, group: RunGroup) -> ZoneCounts:
        shape = (group.machine_type, group.accelerator)
        if shape not in self._counts:
            starts = self._load()  # and the market snapshot
            # the tick's own records come seconds after it began: `until` leaves them room
            counts = ZoneCounts(*shape, since=self._at - WINDOW, until=self._at + TICK_SLACK,
                                market=self._market)
            counts.add(starts)
            self._counts[shape] = counts
        return self._counts[shape]

    def note(self, record: StartRecord | None) -> None:
        """A start request recorded in this tick: it counts for the groups started after it."""
        if record is None or self._starts is None:
            return
        self._starts.append(record)
        for counts in self._counts.values():
            counts.add([record])

    def order(self, group: RunGroup, insts: Sequence[Instance]) -> list[str]:
        """The spec's candidate zones for `group`, first to ask first (`lifecycle: created`).
        `insts`: the group's members as they are now (preempted ones count at once)."""
        candidates = self.sweep.spec.candidate_zones
        if len(candidates) < 2:
            return list(candidates)
        counts = self._counts_of(group)
        seen = counts.history([(z, self._at) for z in preempted_zones(insts)])
        order = order_zones(candidates, seen)
        if order != list(candidates) and log.isEnabledFor(logging.INFO):
            log.info("group %s: zones asked in the order %s (%s)", group.id, order,
                     "; ".join(why(z, seen) for z in order))
        return order


def preempted_zones(insts: Sequence[Instance]) -> list[str]:
    """The zones the cloud reports members of a group preempted in (one, for a group)."""
    return sorted({i.zone for i in insts if i.error == ErrorKind.PREEMPTED and i.zone})
