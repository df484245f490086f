"""Compute Engine prices as Google answers them today: the Cloud Billing Catalog API
(`services.skus.list` of the Compute Engine service, google-cloud-billing, REST), every page.

GCE prices predefined machine types per vCPU and per GiB of memory of their family ("N1
Predefined Instance Core running in Americas", "N2 Instance Ram running in …"), GPUs per GPU
("Nvidia Tesla T4 GPU running in …") and disks per GiB-month ("Balanced PD Capacity"); spot
SKUs are the family's `Preemptible` usage type ("Spot Preemptible …"). A machine type's price
is vCPUs × the core price + GiB × the RAM price, its shape read from its name (GIB_PER_VCPU).
SKUs are per region (`serviceRegions`): GCE prices do not differ by zone within a region.
`SPOTBENCH_GCP_API_ENDPOINT` (http://…) aims the client at a local double with anonymous
credentials, as the Compute driver does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from google.api_core import exceptions as gexc
from google.auth import exceptions as auth_exc
from google.auth.credentials import AnonymousCredentials
from google.cloud import billing_v1

from spotbench.prices.table import Quote, Table

COMPUTE_SERVICE = "services/6F81-5844-456A"  # Compute Engine in the Cloud Billing Catalog
SOURCE = "Cloud Billing Catalog services.skus.list"
USAGE = {"OnDemand": "on-demand", "Preemptible": "spot"}
# SKU description prefix (without "Spot Preemptible ") → machine family
FAMILIES = {"N1 Predefined Instance": "n1", "N2 Instance": "n2", "N2D AMD Instance": "n2d",
            "E2 Instance": "e2", "Compute optimized": "c2", "C2D AMD Instance": "c2d"}
# GiB of memory per vCPU of the predefined shapes (cloud.google.com/compute/docs/machine-resource)
GIB_PER_VCPU = {
    ("n1", "standard"): 3.75, ("n1", "highmem"): 6.5, ("n1", "highcpu"): 0.9,
    ("n2", "standard"): 4, ("n2", "highmem"): 8, ("n2", "highcpu"): 1,
    ("n2d", "standard"): 4, ("n2d", "highmem"): 8, ("n2d", "highcpu"): 1,
    ("e2", "standard"): 4, ("e2", "highmem"): 8, ("e2", "highcpu"): 1,
    ("c2", "standard"): 4, ("c2d", "standard"): 4, ("c2d", "highmem"): 8, ("c2d", "highcpu"): 2,
}
DISKS = {"Balanced PD Capacity": "pd-balanced", "Storage PD Capacity": "pd-standard",
         "SSD backed PD Capacity": "pd-ssd"}
_CORE_RAM = re.compile(r"^(?P<family>.+?) (?P<what>Core|Ram) running in ")
_GPU = re.compile(r"^(?P<name>Nvidia .+?) GPU running in ")
_SHAPE = re.compile(r"^(?P<family>[a-z0-9]+)-(?P<cls>standard|highmem|highcpu)-(?P<cpus>\d+)$")


class PriceFetchError(RuntimeError):
    """The prices could not be fetched; the message says what to do."""


def client(api_endpoint: str | None = None) -> billing_v1.CloudCatalogClient:
    credentials = AnonymousCredentials() if api_endpoint and api_endpoint.startswith("http://") else None
    options = {"api_endpoint": api_endpoint} if api_endpoint else None
    return billing_v1.CloudCatalogClient(credentials=credentials, transport="rest",
                                         client_options=options)


def fetch(regions: Iterable[str], items: Mapping[str, Iterable[str]],
          progress: Callable[[str], None] = lambda _: None, now: datetime | None = None,
          env: Mapping[str, str] | None = None) -> Table:
    """On-demand and spot prices of the machine types `items["machine"]`, the GPUs
    `items["gpu"]` and the persistent disks in `regions`."""
    import os

    env = os.environ if env is None else env
    now = now or datetime.now(UTC)
    regions = list(regions)
    try:
        pager = client(env.get("SPOTBENCH_GCP_API_ENDPOINT") or None).list_skus(
            request={"parent": COMPUTE_SERVICE, "page_size": 5000})
        skus: list[Any] = []
        for n, page in enumerate(pager.pages, 1):
            skus += list(page.skus)
            progress(f"Compute Engine SKUs: page {n}, {len(skus)} SKUs so far")
    except auth_exc.DefaultCredentialsError as exc:
        raise PriceFetchError("no Google credentials: run `gcloud auth application-default login` "
                              "and try again") from exc
    except (gexc.PermissionDenied, gexc.Forbidden) as exc:  # REST answers 403 as Forbidden
        raise PriceFetchError(f"the Cloud Billing API refused: {exc.message}; enable it with "
                              "`gcloud services enable cloudbilling.googleapis.com` in your "
                              "quota project") from exc
    except gexc.GoogleAPICallError as exc:
        raise PriceFetchError(f"the Cloud Billing Catalog API answered HTTP {exc.code}: "
                              f"{exc.message}; run `spotbench prices --cloud gcp` again") from exc
    quotes = [q for region in regions
              for q in prices_in(skus, region, items.get("machine", ()), items.get("gpu", ()))]
    return Table(cloud="gcp", fetched_at=now, quotes=tuple(quotes), regions=tuple(regions),
                 sources=(SOURCE,))


def unit_usd(sku: Any) -> tuple[str, float] | None:
    """(usage unit, USD) of a SKU's current price: its first paid tier."""
    infos = list(sku.pricing_info)
    if not infos:
        return None
    expr = infos[-1].pricing_expression
    rates = sorted(expr.tiered_rates, key=lambda r: r.start_usage_amount)
    if not rates:
        return None
    # past a free first tier (e.g. a monthly free allowance), the first tier that is paid
    price = next((r for r in rates if int(r.unit_price.units or 0) or r.unit_price.nanos), rates[0])
    if price.unit_price.currency_code not in ("", "USD"):
        return None
    return expr.usage_unit, int(price.unit_price.units or 0) + price.unit_price.nanos / 1e9


# (family or item, core|ram|gpu|disk, provisioning) → USD per unit
RateKey = tuple[str, str, str]
PROVISIONINGS = ("on-demand", "spot")


def prices_in(skus: Iterable[Any], region: str, machine_types: Iterable[str],
              gpus: Iterable[str]) -> list[Quote]:
    """`region`'s quotes: the machine types and GPUs asked for, and every disk priced."""
    per = _rates_in(skus, region)
    return (_machine_quotes(per, region, machine_types) + _gpu_quotes(per, region, gpus)
            + _disk_quotes(per, region))


def _rates_in(skus: Iterable[Any], region: str) -> dict[RateKey, float]:
    """The core, RAM, GPU and disk rates that `region`'s SKUs price (a later SKU wins)."""
    per: dict[RateKey, float] = {}
    for sku in skus:
        prov = USAGE.get(sku.category.usage_type)
        if prov is None or region not in sku.service_regions:
            continue
        priced = unit_usd(sku)
        if priced is None:
            continue
        unit, usd = priced
        key = _rate_key(sku.description, unit, prov)
        if key is not None:
            per[key] = usd
    return per


def _rate_key(description: str, unit: str, prov: str) -> RateKey | None:
    """What a SKU prices, from its description and usage unit; None: nothing we price."""
    desc = description.removeprefix("Spot Preemptible ").removeprefix("Preemptible ")
    if (m := _CORE_RAM.match(desc)) and m["family"] in FAMILIES and unit in ("h", "GiBy.h"):
        return (FAMILIES[m["family"]], m["what"].lower(), prov)
    if (m := _GPU.match(desc)) and unit == "h":
        return (m["name"].lower().replace(" ", "-"), "gpu", prov)
    if prov == "on-demand" and unit == "GiBy.mo":
        disk = next((d for p, d in DISKS.items() if desc.startswith(p)), None)
        if disk:
            return (disk, "disk", "")
    return None


def _machine_quotes(per: Mapping[RateKey, float], region: str,
                    machine_types: Iterable[str]) -> list[Quote]:
    """Predefined machine types: vCPUs × the family's core rate + GiB × its RAM rate."""
    quotes = []
    for mtype in sorted(set(machine_types)):
        shape = _SHAPE.match(mtype)
        if not shape or (shape["family"], shape["cls"]) not in GIB_PER_VCPU:
            continue
        cpus = int(shape["cpus"])
        gib = cpus * GIB_PER_VCPU[(shape["family"], shape["cls"])]
        for prov in PROVISIONINGS:
            core, ram = per.get((shape["family"], "core", prov)), per.get((shape["family"], "ram", prov))
            if core is None or ram is None:
                continue
            quotes.append(Quote(region=region, kind="machine", item=mtype, provisioning=prov,
                                unit="hour", usd=round(cpus * core + gib * ram, 6), source=SOURCE,
                                note=f"{cpus} vCPU × {core:g} + {gib:g} GiB × {ram:g} USD/h"))
    return quotes


def _gpu_quotes(per: Mapping[RateKey, float], region: str, gpus: Iterable[str]) -> list[Quote]:
    """GPUs, per GPU-hour."""
    quotes = []
    for gpu in sorted(set(gpus)):
        for prov in PROVISIONINGS:
            if (gpu_usd := per.get((gpu, "gpu", prov))) is not None:
                quotes.append(Quote(region=region, kind="gpu", item=gpu, provisioning=prov,
                                    unit="hour", usd=gpu_usd, source=SOURCE, note="per GPU"))
    return quotes


def _disk_quotes(per: Mapping[RateKey, float], region: str) -> list[Quote]:
    """Every persistent disk priced, per GiB-month (on-demand only)."""
    return [Quote(region=region, kind="disk", item=item, provisioning="",
                  unit="gb-month", usd=disk_usd, source=SOURCE, note="per GiB-month")
            for (item, kind, _), disk_usd in sorted(per.items()) if kind == "disk"]
