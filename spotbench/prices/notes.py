"""Which price table priced a figure, as of when, and whether that is too old: the lines
`estimate` and the report print under their figures.

Works on any rows with the catalog's fields (`spotbench.costs.PriceRow`), so it sits below
the catalog. Only machine and GPU prices are judged for age (they are what `spotbench prices`
refreshes and what moves); disks, schedulers and functions keep their shipped row's date.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from typing import Protocol

from spotbench.prices.table import STALE_AFTER, Table

MOVING = ("machine", "gpu")


class Row(Protocol):
    cloud: str
    region: str
    kind: str
    item: str
    provisioning: str
    usd: float
    date: str
    source: str
    zone: str


def _day(text: str) -> date | None:
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        return None


def _origin(row: Row, tables: Iterable[Table]) -> str:
    for table in tables:
        if table.cloud == row.cloud and table.date == row.date and row.source in table.sources:
            return f"refreshed by `spotbench prices` ({table.path})"
    if row.source.startswith("http"):
        return "shipped with spotbench"
    return "from a --prices file or an older refresh"


def used(rows: Iterable[Row | None], tables: Iterable[Table] = ()) -> list[str]:
    """One line per (date, source) of the rows that priced a figure: the kinds it priced."""
    tables = list(tables)
    seen: dict[tuple[str, str], set[str]] = {}
    origin: dict[tuple[str, str], str] = {}
    for row in rows:
        if row is None:
            continue
        key = (row.date or "undated", row.source or "no source")
        seen.setdefault(key, set()).add(row.kind)
        origin.setdefault(key, _origin(row, tables))
    order = {"machine": 0, "gpu": 1, "disk": 2, "scheduler": 3, "function": 4}
    return [f"{', '.join(sorted(kinds, key=lambda k: order.get(k, 9)))} prices of {day} from "
            f"{source}, {origin[(day, source)]}"
            for (day, source), kinds in sorted(seen.items(), key=lambda kv: kv[0], reverse=True)]


def stale(rows: Iterable[Row | None], cloud: str, region: str | None,
          now: datetime | None = None) -> str | None:
    """A warning when the oldest machine/GPU price used is older than a week; None else."""
    today = (now or datetime.now(UTC)).date()
    # a price of 0 (the local cloud's own processes) does not move: no warning for it (#39)
    days = [d for r in rows if r is not None and r.kind in MOVING and r.usd > 0 and (d := _day(r.date))]
    if not days:
        return None
    oldest = min(days)
    age = (today - oldest).days
    if age <= STALE_AFTER.days:
        return None
    where = f" --region {region}" if region and region != "*" else ""
    return (f"the machine/GPU prices used are {age} days old ({oldest.isoformat()}); spot prices "
            f"move: run `spotbench prices --cloud {cloud}{where}` to refresh them")


def by_zone(item: str, zone_rows: Mapping[str, Row], used: Row | None) -> str | None:
    """A line when a spot price differs by zone (EC2): each zone's price and the one used
    (the sweep's zone's own row, else the region's: its dearest zone)."""
    prices = {z: r.usd for z, r in sorted(zone_rows.items())}
    if len(set(prices.values())) < 2:
        return None
    listed = ", ".join(f"{z} {usd:g}" for z, usd in prices.items())
    first = next(iter(zone_rows.values()))
    if used is None:
        used_text = "no row priced it"
    elif used.zone:
        used_text = f"priced at the sweep's zone {used.zone}, {used.usd:g}"
    else:
        used_text = f"priced at the region's row, {used.usd:g} (its dearest zone: the cloud picks the zone)"
    return (f"{first.provisioning} {item} in {first.region} differs by zone: {listed} USD/h "
            f"(as of {first.date}); {used_text}")


_SOURCE = re.compile(r"^[\w .:/()\-,]{1,160}$")  # a URL or an API's name (records come from VMs)


def recorded(entries: Iterable[tuple[object, object, datetime]]) -> tuple[list[str], str | None]:
    """The report's lines for stored runs: each (price date, source) their costs were priced
    with (the record metadata `price_date`, `price_source` that `spotbench.costs.annotate`
    writes), and a warning naming the runs priced with prices more than a week older than
    the run. Values that are not a date or a plain source are left out."""
    seen: dict[tuple[str, str], int] = {}
    late = 0
    for day_text, source, started in entries:
        day = _day(day_text) if isinstance(day_text, str) else None
        if day is None or not isinstance(source, str) or not _SOURCE.match(source):
            continue
        seen[(day.isoformat(), source)] = seen.get((day.isoformat(), source), 0) + 1
        if started.date() - day > STALE_AFTER:
            late += 1
    lines = [f"{n} group run{'s' if n != 1 else ''} priced with the prices of {day} from {source}"
             for (day, source), n in sorted(seen.items(), reverse=True)]
    warning = (f"{late} group run{'s were' if late != 1 else ' was'} priced with prices more than "
               "a week older than the run: the command spotbench prices refreshes the table, and "
               "spotbench report --prices <the CSV it stored> re-prices with it" if late else None)
    return lines, warning
