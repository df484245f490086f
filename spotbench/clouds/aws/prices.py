"""EC2 prices as AWS answers them today (boto3): spot from `DescribeSpotPriceHistory` (per
Availability Zone), on-demand from the AWS Price List API (`pricing.get_products`; the Price
List does not carry spot prices).

Endpoints as boto3 resolves them (`AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_EC2`,
`AWS_ENDPOINT_URL_PRICING`: the tests' moto_server and Price List double). The Price List API
answers only in a few regions (us-east-1, eu-central-1, ap-south-1): it is asked in us-east-1
whatever the priced region. Each spot zone's newest price is its own row (a spec or a stored
run in that zone is priced with it); the region's row is the highest of its zones (where a
group lands is EC2's choice, so the region is priced at its dearest zone), its note naming
the spread.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from spotbench.prices.table import Quote, Table

SPOT_SOURCE = "EC2 DescribeSpotPriceHistory"
ON_DEMAND_SOURCE = "AWS Price List GetProducts"
PRICING_REGION = "us-east-1"
# The Price List attributes of a plain Linux instance billed per hour (no licence, shared
# tenancy, no pre-installed software, the instance itself rather than a reservation).
LINUX_FILTERS = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
                 "capacitystatus": "Used", "licenseModel": "No License required"}


class PriceFetchError(RuntimeError):
    """The prices could not be fetched; the message says what to do."""


def fetch(regions: Iterable[str], items: Mapping[str, Iterable[str]],
          progress: Callable[[str], None] = lambda _: None,
          now: datetime | None = None) -> Table:
    """On-demand and spot prices of the instance types `items["machine"]` in each of
    `regions` (EC2 prices GPUs with their instance type: no other kind is asked)."""
    now = now or datetime.now(UTC)
    types = sorted(set(items.get("machine", ())))
    regions = list(regions)
    quotes: list[Quote] = []
    try:
        session = boto3.Session()  # credentials as they are now (boto3's default session caches)
        pricing = session.client("pricing", region_name=PRICING_REGION)
        for region in regions:
            for n, itype in enumerate(types, 1):
                progress(f"{region}: on-demand {itype} ({n}/{len(types)}, AWS Price List API)")
                quotes += on_demand(pricing, region, itype)
            progress(f"{region}: spot prices of {len(types)} instance types per zone "
                     "(EC2 spot price history)")
            quotes += spot(session.client("ec2", region_name=region), region, types, now)
    except NoCredentialsError as exc:
        raise PriceFetchError("no AWS credentials: run `aws configure` (or `aws sso login`, or set "
                              "AWS_PROFILE) and try again") from exc
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        message = exc.response.get("Error", {}).get("Message", str(exc))
        hint = ""
        if code in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation"):
            hint = (" — the caller needs ec2:DescribeSpotPriceHistory and pricing:GetProducts "
                    "(neither has resource-level permissions: Resource \"*\")")
        raise PriceFetchError(f"AWS answered {code}: {message}{hint}") from exc
    except BotoCoreError as exc:
        raise PriceFetchError(f"AWS could not be reached: {exc}; check the network and the "
                              "region, then run `spotbench prices --cloud aws` again") from exc
    return Table(cloud="aws", fetched_at=now, quotes=tuple(quotes), regions=tuple(regions),
                 sources=(ON_DEMAND_SOURCE, SPOT_SOURCE))


def on_demand(pricing: Any, region: str, instance_type: str) -> list[Quote]:
    """The Linux on-demand hourly price of one instance type in `region` (none when the
    Price List has no such product there)."""
    filters = [{"Type": "TERM_MATCH", "Field": "instanceType", "Value": instance_type},
               {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region}]
    filters += [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in LINUX_FILTERS.items()]
    prices: list[float] = []
    for page in pricing.get_paginator("get_products").paginate(
            ServiceCode="AmazonEC2", Filters=filters, FormatVersion="aws_v1"):
        for text in page.get("PriceList", []):
            prices += hourly_usd(json.loads(text) if isinstance(text, str) else text)
    if not prices:
        return []
    return [Quote(region=region, kind="machine", item=instance_type, provisioning="on-demand",
                  unit="hour", usd=min(prices), source=ON_DEMAND_SOURCE,
                  note="Linux, shared tenancy" + (f"; lowest of {len(prices)} list prices"
                                                 if len(set(prices)) > 1 else ""))]


def hourly_usd(product: dict[str, Any]) -> list[float]:
    """The per-hour USD prices in one Price List product's OnDemand terms."""
    out = []
    for term in (product.get("terms", {}).get("OnDemand") or {}).values():
        for dim in (term.get("priceDimensions") or {}).values():
            usd = (dim.get("pricePerUnit") or {}).get("USD")
            if dim.get("unit") in ("Hrs", "Hours") and usd is not None and float(usd) > 0:
                out.append(float(usd))
    return out


def spot(ec2: Any, region: str, instance_types: list[str], now: datetime) -> list[Quote]:
    """The newest Linux spot price per zone of each type, and the region's (highest) row."""
    newest: dict[tuple[str, str], tuple[datetime, float]] = {}
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=instance_types, ProductDescriptions=["Linux/UNIX"], StartTime=now)
    for page in pages:
        for item in page.get("SpotPriceHistory", []):
            if not str(item.get("ProductDescription", "")).startswith("Linux/UNIX"):
                continue
            key = (item["InstanceType"], item["AvailabilityZone"])
            stamp = item.get("Timestamp") or now
            if key not in newest or stamp > newest[key][0]:
                newest[key] = (stamp, float(item["SpotPrice"]))
    quotes = []
    for itype in instance_types:
        zones = {z: p for (t, z), (_, p) in sorted(newest.items()) if t == itype}
        if not zones:
            continue
        quotes += [Quote(region=region, zone=z, kind="machine", item=itype, provisioning="spot",
                         unit="hour", usd=p, source=SPOT_SOURCE, note="Linux/UNIX, this zone")
                   for z, p in zones.items()]
        spread = (f"same in its {len(zones)} zones" if len(set(zones.values())) == 1 else
                  f"highest of {len(zones)} zones ({min(zones.values()):g}–{max(zones.values()):g})")
        quotes.append(Quote(region=region, kind="machine", item=itype, provisioning="spot",
                            unit="hour", usd=max(zones.values()), source=SPOT_SOURCE,
                            note=f"Linux/UNIX; {spread}"))
    return quotes
