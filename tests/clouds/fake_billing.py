"""The Cloud Billing Catalog API's `services.skus.list` (`GET /v1/services/{service}/skus`),
served by tests.clouds.google_endpoint.GoogleEndpoint: SKUs in the documented shape
(`skuId`, `description`, `category.usageType` OnDemand | Preemptible, `serviceRegions`,
`pricingInfo[].pricingExpression.tieredRates[].unitPrice` {currencyCode, units (an int64 as
a string), nanos}), `page_size` per page (the `pageSize` asked, when smaller) and a
`nextPageToken` until the last page (docs/platform.md). Each request's query is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def sku(description: str, usd: float, regions: list[str], usage: str = "OnDemand",
        unit: str = "h", group: str = "CPU", free_first: bool = False) -> dict[str, Any]:
    units, nanos = int(usd), round((usd - int(usd)) * 1e9)
    rates = [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": 0}}] \
        if free_first else []
    rates.append({"startUsageAmount": 1 if free_first else 0,
                  "unitPrice": {"currencyCode": "USD", "units": str(units), "nanos": nanos}})
    sku_id = f"{abs(hash((description, tuple(regions)))) % 0xFFFFFFFFFFFF:012X}"
    sku_id = f"{sku_id[:4]}-{sku_id[4:8]}-{sku_id[8:]}"
    return {"name": f"services/6F81-5844-456A/skus/{sku_id}", "skuId": sku_id,
            "description": description,
            "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute",
                         "resourceGroup": group, "usageType": usage},
            "serviceRegions": regions,
            "pricingInfo": [{"summary": "", "effectiveTime": "2026-11-20T08:00:00Z",
                             "currencyConversionRate": 1,
                             "pricingExpression": {"usageUnit": unit, "displayQuantity": 1,
                                                   "usageUnitDescription": unit,
                                                   "baseUnit": "s", "baseUnitDescription": "second",
                                                   "baseUnitConversionFactor": 3600,
                                                   "tieredRates": rates},
                             "aggregationInfo": {"aggregationLevel": "ACCOUNT",
                                                 "aggregationInterval": "DAILY",
                                                 "aggregationCount": 1}}],
            "serviceProviderName": "Google", "geoTaxonomy": {"type": "REGIONAL", "regions": regions}}


@dataclass
class FakeBillingCatalog:
    skus: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # service id → SKUs
    page_size: int = 3
    requests: list[dict[str, list[str]]] = field(default_factory=list)

    def handle(self, method: str, path: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        self.requests.append(query)
        service = path.removeprefix("/v1/services/").removesuffix("/skus")
        if method != "GET" or not path.endswith("/skus") or "/" in service:
            return 404, {"error": {"code": 404, "message": f"no such method {method} {path}",
                                   "status": "NOT_FOUND"}}
        if service not in self.skus:
            return 404, {"error": {"code": 404, "message": f"Service {service} not found",
                                   "status": "NOT_FOUND"}}
        start = int(query.get("pageToken", ["0"])[0] or 0)
        size = min(self.page_size, int(query.get("pageSize", ["5000"])[0]))
        items = self.skus[service]
        out: dict[str, Any] = {"skus": items[start:start + size]}
        out["nextPageToken"] = str(start + size) if start + size < len(items) else ""
        return 200, out
