"""Prices as data and the billing rules that turn run time into dollars.

The catalog is the CSV files in `spotbench/prices/` (loaded with importlib.resources), one
row per price with its date and source; then the tables `spotbench prices` refreshed from the
clouds' APIs (`spotbench.prices.table`: the user's cache); then a user CSV (`--prices FILE`,
same columns). Each later row overrides the row with the same key or adds a new one. Columns:

    cloud,region,kind,item,provisioning,unit,usd,bundled_gpu,date,source,note[,zone]

A row with a `zone` is that zone's own price (EC2 spot prices differ by zone): kept apart
(`Catalog.zone_rows`), so the region's row still prices the region.

`kind` is machine | gpu | disk | scheduler | function | storage (the results bucket: artifacts); `region` `*` matches any region;
`provisioning` is on-demand | spot (empty: any). Billing rules (GCE and EC2 alike):

- instances: per second with a one-minute minimum per start (`billed_seconds`);
- GPUs: a separate hourly line where the cloud prices them apart (GCP N1 + accelerator);
  a machine row with `bundled_gpu` (a2, g2, g4dn, p3, …) already includes them;
- disks: per GB-month, prorated by time, and billed while the VM is stopped;
- scheduler jobs: per job per month (GCP) or per invocation (AWS EventBridge Scheduler);
- functions: per invocation plus per GB-second at the configured memory.

`annotate(results, prices)` fills `billed_s` and `cost_usd` of stored records (see there).
"""

from __future__ import annotations

import csv
import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from importlib import resources
from pathlib import Path

from spotbench.facts import facts_of
from spotbench.prices.table import COLUMNS, Table, prices_dir, refreshed
from spotbench.results import Result

__all__ = [
    "Catalog", "MissingPrice", "PriceRow", "annotate", "billed_seconds", "disk_cost",
    "group_costs", "instance_hourly", "load_catalog", "region_of", "HOURS_PER_MONTH",
]

HOURS_PER_MONTH = 730.0  # what both clouds use to turn monthly prices into hourly ones
MIN_BILLED_S = 60


class MissingPrice(LookupError):
    """No catalog row for something a sweep uses; the message names the row to add."""


@dataclass(frozen=True)
class PriceRow:
    cloud: str
    region: str
    kind: str
    item: str
    provisioning: str
    unit: str
    usd: float
    bundled_gpu: str = ""
    date: str = ""
    source: str = ""
    note: str = ""
    zone: str = ""

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.cloud, self.region, self.kind, self.item, self.provisioning)

    @property
    def approximate(self) -> bool:
        return "approximation" in self.note.lower()


class Catalog:
    def __init__(self, rows: Iterable[PriceRow], tables: Iterable[Table] = ()):
        self.rows: dict[tuple[str, str, str, str, str], PriceRow] = {}
        self.zone_rows: dict[tuple[str, str, str, str, str], dict[str, PriceRow]] = {}
        self.tables = list(tables)  # the refreshed tables read (`spotbench prices`)
        for row in rows:
            if row.zone:
                self.zone_rows.setdefault(row.key, {})[row.zone] = row
            else:
                self.rows[row.key] = row  # later rows (user overrides) win

    def by_zone(self, cloud: str, region: str | None, kind: str, item: str,
                spot: bool = False) -> dict[str, PriceRow]:
        """Zone → that zone's own row (empty when the region has one price)."""
        prov = "spot" if spot else "on-demand"
        return dict(self.zone_rows.get((cloud, region or "*", kind, item, prov), {}))

    def get(self, cloud: str, region: str | None, kind: str, item: str, spot: bool = False,
            zone: str | None = None) -> PriceRow:
        """The row for `item` in `region` (or `*`); `zone`'s own row first when it has one."""
        prov = "spot" if spot else "on-demand"
        if zone:
            own = self.zone_rows.get((cloud, region or "*", kind, item, prov), {}).get(zone)
            if own is not None:
                return own
        for r in (region or "*", "*"):
            for p in (prov, ""):
                row = self.rows.get((cloud, r, kind, item, p))
                if row is not None:
                    return row
        raise MissingPrice(
            f"no price for cloud={cloud} region={region or '*'} kind={kind} item={item} "
            f"provisioning={prov}: add a row to a --prices CSV with the columns "
            f"{','.join(COLUMNS)} (e.g. {cloud},{region or '*'},{kind},{item},{prov},"
            f"{_UNITS.get(kind, 'hour')},0.123,,2024-06-01,<source>,<note>)"
        )

    def find(self, cloud: str, region: str | None, kind: str, item: str, spot: bool = False,
             zone: str | None = None) -> PriceRow | None:
        try:
            return self.get(cloud, region, kind, item, spot, zone)
        except MissingPrice:
            return None


_UNITS = {"machine": "hour", "gpu": "hour", "disk": "gb-month", "scheduler": "job-month",
          "function": "invocation", "storage": "gb-month"}


def _read_rows(text: str, origin: str) -> list[PriceRow]:
    reader = csv.DictReader(line for line in text.splitlines() if line.strip())
    missing = {"cloud", "region", "kind", "item", "unit", "usd"} - set(reader.fieldnames or [])
    if missing:
        raise ValueError(f"{origin}: price CSV lacks columns {sorted(missing)}; expected {','.join(COLUMNS)}")
    rows = []
    for n, rec in enumerate(reader, start=2):
        try:
            usd = float(rec["usd"])
        except (TypeError, ValueError):
            raise ValueError(f"{origin}:{n}: usd {rec.get('usd')!r} is not a number") from None
        rows.append(PriceRow(**{
            **{c: (rec.get(c) or "").strip() for c in COLUMNS if c != "usd"},
            "region": (rec.get("region") or "*").strip() or "*",
            "usd": usd,
        }))
    return rows


@functools.cache
def _builtin_rows() -> tuple[PriceRow, ...]:
    rows: list[PriceRow] = []
    for entry in sorted(resources.files("spotbench.prices").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".csv"):
            rows += _read_rows(entry.read_text(), f"spotbench/prices/{entry.name}")
    return tuple(rows)


def load_catalog(extra: Path | str | None = None, refreshed_dir: Path | None = None, *,
                 with_refreshed: bool = True) -> Catalog:
    """The built-in catalog, then the refreshed tables (`refreshed_dir`, default
    `spotbench.prices.table.prices_dir()`; none when not `with_refreshed`), then the rows of
    `extra` (a CSV path)."""
    rows = list(_builtin_rows())
    directory = refreshed_dir or prices_dir()
    clouds = sorted({r.cloud for r in rows}) if with_refreshed else []
    tables = refreshed(clouds, directory)
    for table in tables:
        assert table.path is not None
        try:
            text = table.path.read_text()
        except OSError as exc:
            raise ValueError(f"{table.path}: unreadable ({exc}); run `spotbench prices --cloud "
                             f"{table.cloud}` again, or delete it to use the shipped prices") from exc
        rows += _read_rows(text, str(table.path))
    if extra is not None:
        path = Path(extra)
        if not path.is_file():
            raise ValueError(f"--prices {path}: file not found")
        rows += _read_rows(path.read_text(), str(path))
    return Catalog(rows, tables)


# ---- billing rules ------------------------------------------------------------------


def billed_seconds(run_s: float) -> int:
    """Per-second billing with a one-minute minimum per start (whole seconds, rounded up)."""
    return max(MIN_BILLED_S, math.ceil(max(0.0, run_s) - 1e-9))


def region_of(cloud: str, zone: str | None, region: str | None = None) -> str | None:
    """The price region of a record's place by cloud name (`CloudFacts.price_region`)."""
    return facts_of(cloud).price_region(region, zone)


def instance_hourly(
    catalog: Catalog, cloud: str, region: str | None, machine_type: str, spot: bool,
    accelerator: str | None = None, accelerator_count: int = 0, zone: str | None = None,
) -> tuple[float, float]:
    """(machine USD/h, separate GPU USD/h) of one instance (in `zone`, where its price is the
    zone's own: EC2 spot)."""
    machine = catalog.get(cloud, region, "machine", machine_type, spot, zone)
    gpu = 0.0
    separate = facts_of(cloud).gpu_priced_separately
    if accelerator and accelerator_count and not machine.bundled_gpu and separate:
        gpu = catalog.get(cloud, region, "gpu", accelerator, spot).usd * accelerator_count
    return machine.usd, gpu


def disk_cost(catalog: Catalog, cloud: str, region: str | None, disk: str, gb: float, seconds: float) -> float:
    """Disk cost for `seconds` of existence (running or stopped), prorated per month."""
    row = catalog.get(cloud, region, "disk", disk)
    return row.usd * gb * seconds / (HOURS_PER_MONTH * 3600)


def storage_month(catalog: Catalog, cloud: str, region: str | None, nbytes: int) -> float | None:
    """USD per month of keeping `nbytes` in the results bucket (an attempt's artifacts: the
    `storage` `bucket` price row, GB = 10⁹ bytes as the clouds bill), None without a price."""
    row = catalog.find(cloud, region, "storage", "bucket")
    return None if row is None else row.usd * nbytes / 1e9


def run_seconds(started_at, ended_at) -> float:
    delta: timedelta = ended_at - started_at
    return max(0.0, delta.total_seconds())


# ---- records ------------------------------------------------------------------------


def annotate(results: list[Result], prices: Catalog | Path | str | None = None,
             members: int | None = None, member_types: list[str] | None = None) -> list[Result]:
    """Fill `billed_s` and `cost_usd` for the instance time of each record's group run.

    Instance time of a run = (ended_at − started_at), billed with the one-minute minimum,
    per member. Each member is priced at its own machine type: `member_types` (one per
    member, e.g. a TF chief on a bigger type via `role_machine_types`), else metadata
    `member_types`, else `members` (or metadata `members`, else 1) × the record's
    machine_type. Every record of the run carries the run's total (`billed_s` =
    instance-seconds over all members): sum it once per run, e.g. with `group_costs`. Boot
    time before the workload starts is not seen here (the estimate adds it). A missing
    price → cost None and a `cost_note`.
    """
    catalog = prices if isinstance(prices, Catalog) else load_catalog(prices)
    out = []
    for r in results:
        types = list(member_types or r.metadata.get("member_types") or [])
        if not types:
            types = [r.machine_type] * int(members or r.metadata.get("members") or 1)
        n = len(types)
        per_member = billed_seconds(run_seconds(r.started_at, r.ended_at))
        region = facts_of(r.cloud).price_region(None, r.zone)
        meta = dict(r.metadata)
        if members or member_types:
            meta["members"] = n
        if member_types and set(member_types) != {r.machine_type}:
            meta["member_types"] = list(member_types)  # so a re-pricing (report --prices) sees them
        if meta.get("artifacts_bytes"):  # the attempt's stored files, billed per month kept
            meta["storage_usd_month"] = storage_month(catalog, r.cloud, region, int(meta["artifacts_bytes"]))
        try:
            count = int(r.metadata.get("accelerator_count") or (1 if r.accelerator else 0))
            hourly = 0.0
            for mtype in types:
                machine, gpu = instance_hourly(catalog, r.cloud, region, mtype, r.spot,
                                               r.accelerator, count, r.zone)
                hourly += machine + gpu
        except MissingPrice as exc:
            meta["cost_note"] = str(exc)
            out.append(r.model_copy(update={"billed_s": float(per_member * n), "cost_usd": None,
                                            "metadata": meta}))
            continue
        row = catalog.find(r.cloud, region, "machine", types[0], r.spot, r.zone)
        if row is not None:  # which table priced it (the report names it, spotbench.prices.notes)
            meta["price_date"], meta["price_source"] = row.date, row.source
        out.append(r.model_copy(update={"billed_s": float(per_member * n),
                                        "cost_usd": hourly * per_member / 3600, "metadata": meta}))
    return out


def group_costs(results: Iterable[Result]) -> dict[tuple[str, str, str], float | None]:
    """Cost of each stored group run once: key (run, group, started/ended) → cost_usd."""
    costs: dict[tuple[str, str, str], float | None] = {}
    for r in results:
        key = (r.run, r.group, f"{r.started_at.isoformat()}/{r.ended_at.isoformat()}")
        costs.setdefault(key, r.cost_usd)
    return costs
