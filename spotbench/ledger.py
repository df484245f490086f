"""When each group ran, from control's own ledger, never from what its members wrote.

Control writes `runs/<run>/launches/<group>.<n>` when it starts a group and
`runs/<run>/ends/<group>.<n>.json` when it stops it (done, a broken or complete group, a
stop) or first sees it stopped (its members ended on their own), with the attempt files
the group had stored by then. A group's identity may write only `runs/<run>/<group>.…`
(bucket IAM), so none of this is the member's word, unlike the `started_at`/`ended_at` and
`cost_usd` inside its records.

    launches = runs_of(store, run)           # every launch of the run, with its interval
    attributed(launches, store.attempts(run)) # attempt file → the launch that stored it

A launch with no end yet runs until `now` (or its group's next launch). Attempt files are
given to the earliest launch whose end lists them; a file no end lists yet belongs to its
group's latest launch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from spotbench.results import Attempt, ResultStore, StoreError, utcnow

log = logging.getLogger("spotbench.ledger")

__all__ = ["MAX_LAUNCHES_PER_RUN", "Launch", "attributed", "launches_of", "note_ends"]

MAX_LAUNCHES_PER_RUN = 3  # a group that keeps failing is not restarted forever


@dataclass(frozen=True)
class Launch:
    run: str
    group: str
    n: int
    at: datetime
    ended: datetime | None  # control stopped it or saw it stopped; None: not yet
    stored: frozenset[int] | None  # attempt numbers stored by its end (None: no end yet)
    next_at: datetime | None = None  # the group's next launch in the run

    @property
    def key(self) -> str:
        return f"{self.group}.{self.n}"

    def end(self, now: datetime) -> datetime:
        """When it stopped running, as far as control knows: its end, else the group's next
        launch, else still running (`now`)."""
        if self.ended is not None:
            return max(self.ended, self.at)
        return self.next_at if self.next_at is not None else max(now, self.at)


def launches_of(store: ResultStore, run: str | None = None) -> list[Launch]:
    """Every launch of `run` (None: of every run), in (run, group, n) order."""
    out = []
    for (run_id, group), entry in sorted(store.launch_ledger(run).items()):
        times = entry["launches"]
        numbers = sorted(times)
        for i, n in enumerate(numbers):
            end = entry["ends"].get(n)
            out.append(Launch(
                run=run_id, group=group, n=n, at=times[n],
                ended=end["at"] if end else None,
                stored=frozenset(end["stored"]) if end else None,
                next_at=times[numbers[i + 1]] if i + 1 < len(numbers) else None))
    return out


def attributed(launches: list[Launch], attempts: list[Attempt]) -> dict[str, Launch]:
    """Attempt key (`<group>.<n>`) → the launch that stored it (attempts of groups with no
    launch in the ledger are left out: control never ran them)."""
    by_group: dict[str, list[Launch]] = {}
    for launch in launches:
        by_group.setdefault(launch.group, []).append(launch)
    out = {}
    for a in attempts:
        mine = sorted(by_group.get(a.group, []), key=lambda x: x.n)
        if not mine:
            continue
        owner = next((x for x in mine if x.stored is not None and a.attempt in x.stored), mine[-1])
        out[a.key] = owner
    return out


def note_ends(store: ResultStore, run: str, groups: set[str] | list[str],
              now: datetime | None = None, launches: list[Launch] | None = None) -> None:
    """Record the end of the latest launch of each of `groups` in `run` that has none yet.
    Best effort: a store that cannot be written (read-only, full) must not keep control from
    stopping groups or closing the run; a launch without an end counts until the group's
    next launch, or now (at most its deadline for the budget), which is never less."""
    try:
        _note_ends(store, run, groups, now, launches)
    except StoreError as exc:
        log.warning("end of %s in run %s not recorded: %s", ", ".join(sorted(groups)), run, exc)


def _note_ends(store: ResultStore, run: str, groups: set[str] | list[str],
               now: datetime | None, launches: list[Launch] | None) -> None:
    launches = launches_of(store, run) if launches is None else launches
    latest: dict[str, Launch] = {}
    for launch in launches:
        if launch.run == run and launch.group in groups:
            if launch.group not in latest or launch.n > latest[launch.group].n:
                latest[launch.group] = launch
    for group, launch in sorted(latest.items()):
        if launch.ended is None:
            store.record_end(run, group, launch.n, now or utcnow())
