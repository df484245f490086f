"""`spotbench prices`: refresh the price table from the clouds' own APIs."""

from __future__ import annotations

import importlib
import importlib.util
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import typer
from spotbench.cli import extras
from spotbench.cli._common import (
    EXIT_BAD_INPUT, Column, console, credentials_problem, err_console, fail, fit_table, warn,
)

if TYPE_CHECKING:
    from pathlib import Path

    from spotbench.costs import Catalog
    from spotbench.prices.table import Table

ITEM_KINDS = ("machine", "gpu")  # what a refresh asks each cloud for (disks come with GCP's)


def prices(
    cloud: str | None = typer.Option(
        None, "--cloud", metavar="gcp|aws",
        help="refresh only this cloud's table (default: every cloud with a price API)"),
    region: list[str] = typer.Option(
        [], "--region", metavar="R",
        help="price this region (repeatable; default: the regions of the shipped table)"),
    as_json: bool = typer.Option(False, "--json", help="print what was stored as JSON"),
    project: str | None = typer.Option(
        None, "--project", envvar="SPOTBENCH_GCP_PROJECT",
        help="GCP project whose machine types are listed (the catalog refresh)"),
) -> None:
    """Refresh the price table from the clouds' own APIs, so `estimate` prices with today's
    prices instead of the table shipped with spotbench.

    AWS: on-demand from the AWS Price List API (pricing:GetProducts), spot per Availability
    Zone from EC2's spot price history (ec2:DescribeSpotPriceHistory). GCP: the Cloud Billing
    Catalog API (Compute Engine SKUs; enable cloudbilling.googleapis.com). Each uses your
    usual credentials (`aws configure`, `gcloud auth application-default login`).

    The machine types and GPUs priced are the shipped table's. The table is stored with its
    date and source in $SPOTBENCH_PRICES_DIR, else ~/.cache/spotbench/prices (one CSV and
    one JSON per cloud); `estimate` reads it over the shipped table, says which table and date
    it used, and warns once the prices are older than a week. A refresh replaces that cloud's
    previous table (regions not named fall back to the shipped prices); delete the folder to
    go back to the shipped prices altogether.

    The machine types (CPU architecture, vCPUs, GPUs: maker, model, count; the zones
    offering them) are refreshed too, from EC2's DescribeInstanceTypes/Offerings and GCE's
    machineTypes aggregatedList (GCP: of --project), into $SPOTBENCH_CATALOG_DIR, else
    ~/.cache/spotbench/catalog; spec checks read them over the shipped catalog. E.g.

        spotbench prices --cloud aws --region us-east-1
    """
    from spotbench.costs import load_catalog
    from spotbench.prices.table import prices_dir

    clouds = _clouds(cloud)
    shipped = load_catalog(with_refreshed=False)
    directory = prices_dir()
    stored = []
    for name in clouds:
        regions, items = _to_price(name, region, shipped)
        table = _fetch(name, regions, items)
        if not table.quotes:
            warn(f"{name}: the APIs priced nothing in {', '.join(regions)}; the table is unchanged")
            continue
        stored.append((table, _save(table, directory), shipped))
        _refresh_catalog(name, regions, project)
    if as_json:
        typer.echo(json.dumps([_as_dict(t, p) for t, p, _ in stored], indent=2))
        return
    for table, path, old in stored:
        _show(table, path, old)


def _clouds(cloud: str | None) -> list[str]:
    """The clouds to refresh (`cloud`, else every cloud with a price API), each checked for
    its extra and credentials before any long call; a bad `--cloud` or a lack exits."""
    from spotbench.clouds import PROVIDERS, UnknownCloud, get_provider

    priced = [n for n in PROVIDERS if get_provider(n).prices_module]
    if cloud is not None and cloud not in priced:
        try:
            get_provider(cloud)
        except UnknownCloud as exc:
            fail(f"--cloud {cloud}: {exc}", EXIT_BAD_INPUT)
        fail(f"--cloud {cloud}: its prices are not fetched from an API (priced: "
             f"{', '.join(priced)})", EXIT_BAD_INPUT)
    clouds = [cloud] if cloud else priced
    for name in clouds:  # everything missing first, before any long call
        problem = _missing(name)
        if problem:
            fail(problem)
    return clouds


def _to_price(cloud: str, region: list[str],
              shipped: Catalog) -> tuple[list[str], dict[str, list[str]]]:
    """The regions (`region`, else the shipped table's) and the items per kind (the shipped
    table's) to ask `cloud` for."""
    rows = [r for r in shipped.rows.values() if r.cloud == cloud]
    regions = list(region) or sorted({r.region for r in rows if r.region != "*"})
    items = {k: sorted({r.item for r in rows if r.kind == k}) for k in ITEM_KINDS}
    return regions, items


def _fetch(cloud: str, regions: list[str], items: dict[str, list[str]]) -> Table:
    """`cloud`'s prices from its price APIs, with a status line; a failed fetch exits."""
    from spotbench.clouds import get_provider

    fetcher = importlib.import_module(get_provider(cloud).prices_module or "")
    err_console.print(f"{cloud}: fetching prices for {', '.join(regions)} "
                      f"({len(items['machine'])} machine types, {len(items['gpu'])} GPUs)",
                      highlight=False, markup=False)
    with err_console.status(f"{cloud}: asking the price APIs") as status:
        def progress(text: str) -> None:
            status.update(f"{cloud}: {text}")
        try:
            table = fetcher.fetch(regions, items, progress=progress, now=datetime.now(UTC))
        except fetcher.PriceFetchError as exc:
            fail(f"{cloud}: {exc}")
    return table


def _refresh_catalog(cloud: str, regions: list[str], project: str | None) -> None:
    """Store `cloud`'s machine types as its APIs list them (spotbench.catalog.live); a
    failure is said and leaves the previous catalog (the prices are stored either way)."""
    from spotbench.catalog.live import save
    from spotbench.clouds import get_provider

    name = get_provider(cloud).catalog_module
    if not name:
        return
    fetcher = importlib.import_module(name)
    with err_console.status(f"{cloud}: listing machine types") as status:
        try:
            live = fetcher.fetch(regions, project=project, progress=lambda t: status.update(f"{cloud}: {t}"),
                                 now=datetime.now(UTC))
        except fetcher.CatalogFetchError as exc:
            warn(f"{cloud}: machine types not refreshed: {exc}")
            return
    try:
        path = save(live)
    except OSError as exc:
        warn(f"{cloud}: machine types not stored: {exc}")
        return
    err_console.print(f"{cloud}: {len(live.machines)} machine types from {live.source} → {path}",
                      highlight=False, markup=False)


def _save(table: Table, directory: Path) -> Path:
    """Store `table` in `directory` (replacing that cloud's previous one); its CSV's path.
    A file that cannot be written exits."""
    from spotbench.prices.table import TableError, save

    try:
        path = save(table, directory)
    except TableError as exc:
        fail(str(exc))
    return path


def _missing(cloud: str) -> str | None:
    """The extra or credentials this cloud's refresh lacks, as one line with the fix."""
    from spotbench.clouds import get_provider

    absent = [m for m in get_provider(cloud).prices_needs if not extras._installed(m)]
    if absent:
        return (f"`spotbench prices --cloud {cloud}` needs the `{cloud}` extra ({', '.join(absent)} "
                f"not installed): install it with {extras.install_hint(cloud, cloud)}")
    return credentials_problem(cloud)


def _as_dict(table, path) -> dict:
    return {"cloud": table.cloud, "fetched_at": table.fetched_at.isoformat(), "path": str(path),
            "regions": list(table.regions), "sources": list(table.sources),
            "rows": [{"region": q.region, "zone": q.zone, "kind": q.kind, "item": q.item,
                      "provisioning": q.provisioning, "unit": q.unit, "usd": q.usd,
                      "source": q.source, "note": q.note} for q in table.quotes]}


def _show(table, path, old) -> None:
    from spotbench.report.numbers import num  # here: the report package imports pandas, scipy

    zoned = sum(1 for q in table.quotes if q.zone)
    console.print(f"{table.cloud}: {len(table.quotes)} prices of {table.date} stored in {path} "
                  f"(from {', '.join(table.sources)})"
                  + (f"; {zoned} of them are single zones' spot prices, each region's row below "
                     "is its dearest zone" if zoned else ""),
                  highlight=False, markup=False, soft_wrap=True)
    columns = [Column("region", key=True), Column("kind", drop=3), Column("item", key=True),
               Column("provisioning"), Column("USD", "right"),
               Column("was (shipped)", "right", drop=1), Column("unit", drop=4), Column("note", drop=2)]
    rows = []
    for q in table.quotes:
        if q.zone:
            continue
        was = old.find(table.cloud, q.region, q.kind, q.item, q.provisioning == "spot")
        shown_was = f"{num(was.usd, 4)} ({was.date})" if was is not None and was.region == q.region else ""
        rows.append([q.region, q.kind, q.item, q.provisioning or "-", num(q.usd, 4),
                     shown_was, q.unit, q.note])
    table_, _ = fit_table(f"{table.cloud} prices refreshed {table.date}", columns, rows)
    console.print(table_)


def register(app: typer.Typer) -> None:
    app.command()(prices)
