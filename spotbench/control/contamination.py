"""Stored attempts that ran while more groups ran than `max_concurrency` allows are
flagged contaminated; when each ran is control's own ledger (launch → end), never the
records' own times."""

from __future__ import annotations

import logging
from datetime import datetime

from spotbench.control.sweep import Sweep
from spotbench.ledger import Launch, attributed, launches_of
from spotbench.results import utcnow

log = logging.getLogger("spotbench.control")


def flag_contaminated(sweep: Sweep, run: str, now: datetime | None = None) -> list[str]:
    """Flag stored attempts that ran while more groups ran than the concurrency limit. When
    each ran comes from control's ledger (launch → end), not from the records' own times:
    a group cannot make others look contaminated by writing times."""
    limit = sweep.spec.max_concurrency
    if limit is None:
        return []
    now = now or utcnow()
    flagged = []
    launches = launches_of(sweep.store, run)
    attempts = sweep.store.launched_attempts(run, sweep.store.launch_counts(run))
    flags = sweep.store.flags(run)
    owners = attributed(launches, attempts)
    for a in attempts:
        mine = owners.get(a.key)
        if a.preempted or a.key in flags or mine is None:
            continue
        start, end = mine.at, mine.end(now)
        overlapping = [b for b in launches if b.group != a.group
                       and b.at < end and start < b.end(now)]
        peak = 1 + _peak(overlapping, start, end, now)
        if peak > limit:
            reason = (f"{peak} groups ran at once (max_concurrency {limit}): "
                      + ", ".join(sorted({b.group for b in overlapping})))
            log.warning("run %s: %s attempt %d contaminated: %s", run, a.group, a.attempt, reason)
            sweep.store.flag(run, a.group, a.attempt, reason)
            flagged.append(a.key)
    return flagged


def _peak(launches: list[Launch], start: datetime, end: datetime, now: datetime) -> int:
    """Most of `launches` running at one instant inside [start, end]."""
    events = sorted([(max(b.at, start), 1) for b in launches]
                    + [(min(b.end(now), end), -1) for b in launches],
                    key=lambda e: (e[0], e[1]))
    peak = current = 0
    for _, step in events:
        current += step
        peak = max(peak, current)
    return peak
