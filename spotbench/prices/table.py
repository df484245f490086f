"""A refreshed price table: what `spotbench prices` fetched from a cloud's own APIs, where it
is kept, and how old it is.

The package ships one CSV per cloud (`spotbench/prices/<cloud>.csv`, each row with its own
date and source): the fallback. `spotbench prices` writes a refreshed table per cloud to the
user's cache, `$SPOTBENCH_PRICES_DIR` or else `$XDG_CACHE_HOME/spotbench/prices` (default
`~/.cache/spotbench/prices`): prices are the same for every sweep and project of a user, so
they live beside the other per-user cache (the OSU harness build), not in a sweep's state
folder. Two files per cloud:

    <cloud>.csv    the rows, in the catalog's columns (COLUMNS), each dated and sourced
    <cloud>.json   {"cloud", "fetched_at" (UTC ISO), "sources", "regions"}

`spotbench.costs.load_catalog` reads the shipped rows, then these (a refreshed row replaces
the shipped row with the same key; rows the refresh does not cover keep their own date),
then a `--prices` file. Spot prices that differ by zone (EC2) are rows with a `zone`.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

COLUMNS = ["cloud", "region", "kind", "item", "provisioning", "unit", "usd", "bundled_gpu",
           "date", "source", "note", "zone"]
DIR_ENV = "SPOTBENCH_PRICES_DIR"
STALE_AFTER = timedelta(days=7)


class TableError(ValueError):
    """A refreshed table that cannot be read or written; the message names the file and fix."""


@dataclass(frozen=True)
class Quote:
    """One price a cloud's API answered: USD per `unit` of `item` in `region` (and `zone`,
    where the price is the zone's own)."""

    region: str
    kind: str  # machine | gpu | disk
    item: str
    provisioning: str  # on-demand | spot
    unit: str  # hour | gb-month
    usd: float
    source: str  # the API that answered, e.g. "EC2 DescribeSpotPriceHistory"
    zone: str = ""
    bundled_gpu: str = ""
    note: str = ""


@dataclass(frozen=True)
class Table:
    cloud: str
    fetched_at: datetime  # UTC
    quotes: tuple[Quote, ...]
    regions: tuple[str, ...] = ()
    path: Path | None = None  # where it was read from / written to
    sources: tuple[str, ...] = field(default=())

    @property
    def date(self) -> str:
        return self.fetched_at.date().isoformat()

    def age(self, now: datetime | None = None) -> timedelta:
        return (now or datetime.now(UTC)) - self.fetched_at

    def stale(self, now: datetime | None = None) -> bool:
        return self.age(now) > STALE_AFTER


def prices_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where refreshed tables live (see the module docstring)."""
    env = os.environ if env is None else env
    if env.get(DIR_ENV):
        return Path(env[DIR_ENV])
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "spotbench" / "prices"
    try:
        return Path.home() / ".cache" / "spotbench" / "prices"
    except (RuntimeError, KeyError):  # no home (a function's sandbox user): nothing refreshed there
        return Path(tempfile.gettempdir()) / "spotbench-prices"


def to_csv(table: Table) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for q in table.quotes:
        writer.writerow({"cloud": table.cloud, "region": q.region, "kind": q.kind, "item": q.item,
                         "provisioning": q.provisioning, "unit": q.unit, "usd": repr(q.usd),
                         "bundled_gpu": q.bundled_gpu, "date": table.date, "source": q.source,
                         "note": q.note, "zone": q.zone})
    return out.getvalue()


def save(table: Table, directory: Path | None = None) -> Path:
    """Write `<cloud>.csv` and `<cloud>.json` (each replaced whole); the CSV's path."""
    directory = directory or prices_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{table.cloud}.csv"
        meta = {"cloud": table.cloud, "fetched_at": table.fetched_at.astimezone(UTC).isoformat(),
                "sources": sorted({q.source for q in table.quotes}),
                "regions": list(table.regions)}
        for target, text in ((path, to_csv(table)), (path.with_suffix(".json"), json.dumps(meta, indent=1))):
            tmp = target.with_name(f".{target.name}.{os.getpid()}")
            tmp.write_text(text)
            os.replace(tmp, target)
    except OSError as exc:
        raise TableError(f"cannot write the price table in {directory}: {exc.strerror or exc}; "
                         f"set {DIR_ENV} to a writable folder") from exc
    return path


def load_meta(cloud: str, directory: Path | None = None) -> Table | None:
    """The refreshed table's date, sources and regions (quotes left empty: the catalog reads
    the rows); None when there is none."""
    directory = directory or prices_dir()
    meta_path = (directory / f"{cloud}.json")
    if not meta_path.is_file() or not (directory / f"{cloud}.csv").is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text())
        fetched = datetime.fromisoformat(meta["fetched_at"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TableError(f"{meta_path}: unreadable ({exc}); run `spotbench prices --cloud {cloud}` "
                         "to write it again, or delete it to use the shipped prices") from exc
    if fetched.tzinfo is None:
        fetched = fetched.replace(tzinfo=UTC)
    return Table(cloud=cloud, fetched_at=fetched, quotes=(), regions=tuple(meta.get("regions") or ()),
                 path=directory / f"{cloud}.csv", sources=tuple(meta.get("sources") or ()))


def refreshed(clouds: Iterable[str], directory: Path | None = None) -> list[Table]:
    """The refreshed tables present for `clouds` (metadata only)."""
    return [t for c in clouds if (t := load_meta(c, directory)) is not None]
