"""A dated snapshot of the spot-market statistics (`market/<time>.json` at the store's root),
so control can order candidate zones by them without the history catalog (DuckDB).

    store.write_market_snapshot(rows)          # whoever built the catalog (report, market)
    snap = store.market_snapshot(now=now)      # control, once per tick: the newest, or None

Where: beside `control.lock`, outside `runs/`, so no member can write it (a member's grant
covers `runs/<run>/<group>.…` only: docs/identity.md, docs/security.md). One object per
snapshot, named by its time (an operator's `objectCreator` on GCS may create, not
overwrite); the reader lists `market/` once and reads the newest name only.

Every byte is read as hostile: at most `read_small`'s bound, a pydantic model with bounded
names, finite non-negative rates and at most `MAX_SNAPSHOT_ROWS` rows; a snapshot that
does not parse, is dated in the future or older than `MAX_SNAPSHOT_AGE` is ignored with a
warning naming it, never raised.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spotbench.results.model import MAX_NAME_LEN, MAX_ZONE_LEN, RUN_ID_FORMAT, utcnow
from spotbench.results.storage import Storage, _SMALL, log, read_small, store_errors

MAX_SNAPSHOT_ROWS = 256  # zones × machine types × accelerators of one sweep: well under
MAX_SNAPSHOT_AGE = timedelta(days=30)  # older: ignored (logged), the ordering goes without
FUTURE_SKEW = timedelta(minutes=5)  # a snapshot dated later than now + this is not believed
_NAME = re.compile(r"^(?P<at>[0-9]{8}T[0-9]{6}Z)\.json$")


class MarketRow(BaseModel):
    """What the capacity ordering reads of one `spotbench.history.market` row."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False, strict=True)

    zone: str = Field(min_length=1, max_length=MAX_ZONE_LEN)
    machine_type: str = Field(min_length=1, max_length=MAX_NAME_LEN)
    accelerator: str | None = Field(default=None, max_length=MAX_NAME_LEN)
    preemptions_per_vm_hour: float | None = Field(default=None, ge=0)
    vm_hours: float | None = Field(default=None, ge=0)


class MarketSnapshot(BaseModel):
    """The market rows as of `at` (when the catalog was read)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    at: datetime
    rows: list[MarketRow] = Field(max_length=MAX_SNAPSHOT_ROWS)


def snapshot_of(rows: Iterable[Mapping[str, Any]], at: datetime) -> MarketSnapshot:
    """The snapshot of `spotbench.history.market` rows: those with a zone and a rate, at
    most `MAX_SNAPSHOT_ROWS`: first the rows of the most start requests control recorded
    (its own start ledger: a member cannot add to it), then the most VM-hours (the records'
    word). So rows of zones no start ever went to, a group's records made up, with any
    VM-hours, never push a zone control started groups in out of the snapshot (issue 38)."""
    kept = []
    for r in rows:
        try:
            row = MarketRow.model_validate({k: r.get(k) for k in MarketRow.model_fields}, strict=False)
        except ValidationError:
            continue
        if row.preemptions_per_vm_hour is not None:
            kept.append((_starts(r.get("starts")), row))
    kept.sort(key=lambda sr: (-sr[0], -(sr[1].vm_hours or 0.0)))
    return MarketSnapshot(at=at, rows=[row for _, row in kept[:MAX_SNAPSHOT_ROWS]])


def _starts(value: object) -> int:
    """A row's count of start requests (control's ledger), 0 when it has none."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class MarketSnapshots(Storage):
    """`market/<time>.json` of one store."""

    @store_errors
    def write_market_snapshot(self, rows: Iterable[Mapping[str, Any]],
                              now: datetime | None = None) -> str:
        """Store the market rows as of `now`, as a new object; its path."""
        at = now or utcnow()
        body = snapshot_of(rows, at).model_dump_json().encode()
        path = self.path("market", f"{at.strftime(RUN_ID_FORMAT)}.json")
        self.write_whole(path, body)
        return path

    @store_errors
    def market_snapshot(self, now: datetime | None = None,
                        max_age: timedelta = MAX_SNAPSHOT_AGE) -> MarketSnapshot | None:
        """The newest snapshot, when there is one that parses and is no older than `max_age`
        (one listing, one read); None otherwise, logged."""
        at = now or utcnow()
        named = [p for p in self._glob(self.path("market", "*.json"))
                 if _NAME.match(p.rsplit("/", 1)[-1])]
        if not named:
            return None
        path = max(named, key=lambda p: p.rsplit("/", 1)[-1])
        raw = read_small(self.fs, path)
        try:
            if len(raw) > _SMALL:
                raise ValueError(f"more than {_SMALL} bytes")
            snap = MarketSnapshot.model_validate_json(raw)
        except ValueError as exc:  # ValidationError is one
            log.warning("market snapshot %s ignored: not a market snapshot (%s)", path,
                        str(exc).splitlines()[0][:200])
            return None
        if snap.at.tzinfo is None:
            log.warning("market snapshot %s ignored: its time %s has no time zone", path,
                        snap.at.isoformat())
            return None
        if snap.at > at + FUTURE_SKEW:
            log.warning("market snapshot %s ignored: dated %s, after now (%s)", path,
                        snap.at.isoformat(), at.isoformat())
            return None
        if snap.at < at - max_age:
            log.warning("market snapshot %s ignored: %s old, older than %s (run `spotbench "
                        "market SPEC` or `spotbench report` to refresh it)", path,
                        at - snap.at, max_age)
            return None
        return snap
