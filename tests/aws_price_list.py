"""A local AWS Price List Query API (moto does not implement `pricing`): `GetProducts` only.

The request is what botocore sends for the `pricing` service (awsJson1_1: `POST /`,
`X-Amz-Target: AWSPriceListService.GetProducts`, a SigV4 `Authorization` header, a JSON body
with ServiceCode, Filters [{Type, Field, Value}], FormatVersion, MaxResults, NextToken); the
answer is the documented shape: `{"FormatVersion": "aws_v1", "PriceList": [<one JSON string per
product>], "NextToken": …}`, each product `{"product": {"productFamily", "attributes"},
"serviceCode", "terms": {"OnDemand": {"<sku>.<offer>": {"priceDimensions": {"<sku>.<offer>.<rate>":
{"unit": "Hrs", "pricePerUnit": {"USD": "0.0850000000"}, …}}}}}}` (docs/platform.md). TERM_MATCH
filters match attribute values exactly; anything else is refused with the error AWS names.
Pages hold `page_size` products (MaxResults when smaller). Every request is kept in `calls`.
"""

from __future__ import annotations

import http.server
import json
from dataclasses import dataclass, field
from typing import Any

from tests.local_http import LocalServer, read_body, reply

TARGET = "AWSPriceListService.GetProducts"


def ec2_product(instance_type: str, region: str, usd: float, **attributes: str) -> dict[str, Any]:
    """One EC2 Linux on-demand product as the Price List writes it."""
    sku = f"SKU{abs(hash((instance_type, region, tuple(sorted(attributes.items()))))) % 10**8:08d}"
    attrs = {"instanceType": instance_type, "regionCode": region, "operatingSystem": "Linux",
             "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
             "licenseModel": "No License required", "servicecode": "AmazonEC2",
             "location": region, "usagetype": f"BoxUsage:{instance_type}", **attributes}
    offer = f"{sku}.JRTCKXETXF"
    return {"product": {"productFamily": "Compute Instance", "attributes": attrs, "sku": sku},
            "serviceCode": "AmazonEC2", "version": "20241120000000",
            "publicationDate": "2024-11-20T00:00:00Z",
            "terms": {"OnDemand": {offer: {
                "offerTermCode": "JRTCKXETXF", "sku": sku, "effectiveDate": "2024-11-01T00:00:00Z",
                "termAttributes": {},
                "priceDimensions": {f"{offer}.6YS6EN2CT7": {
                    "unit": "Hrs", "endRange": "Inf", "beginRange": "0", "appliesTo": [],
                    "rateCode": f"{offer}.6YS6EN2CT7",
                    "description": f"${usd} per On Demand Linux {instance_type} Instance Hour",
                    "pricePerUnit": {"USD": f"{usd:.10f}"}}}}}}}


@dataclass
class PriceList:
    products: list[dict[str, Any]] = field(default_factory=list)
    page_size: int = 1
    calls: list[dict[str, Any]] = field(default_factory=list)  # each request's headers + body

    def __enter__(self) -> str:
        self._server = LocalServer(self._handle)
        return self._server.url

    def __exit__(self, *exc: object) -> None:
        self._server.close()

    def _handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        body = read_body(h)
        target = h.headers.get("X-Amz-Target", "")
        self.calls.append({"method": h.command, "path": h.path, "target": target,
                           "content_type": h.headers.get("Content-Type", ""),
                           "authorization": h.headers.get("Authorization", ""),
                           "body": json.loads(body or b"{}")})
        if h.command != "POST" or h.path != "/" or target != TARGET:
            return self._error(h, "UnknownOperationException", f"{h.command} {h.path} {target}")
        request = self.calls[-1]["body"]
        if request.get("ServiceCode") != "AmazonEC2":
            return self._error(h, "NotFoundException", "Requested Service Code not found")
        wanted = {}
        for f in request.get("Filters", []):
            if f.get("Type") != "TERM_MATCH":
                return self._error(h, "InvalidParameterException", f"unsupported filter {f}")
            wanted[f["Field"]] = f["Value"]
        found = [p for p in self.products
                 if all(p["product"]["attributes"].get(k) == v for k, v in wanted.items())]
        start = int(request.get("NextToken") or 0)
        size = min(self.page_size, int(request.get("MaxResults") or 100))
        out: dict[str, Any] = {"FormatVersion": "aws_v1",
                               "PriceList": [json.dumps(p) for p in found[start:start + size]]}
        if start + size < len(found):
            out["NextToken"] = str(start + size)
        reply(h, 200, {"Content-Type": "application/x-amz-json-1.1"}, json.dumps(out).encode())

    @staticmethod
    def _error(h: http.server.BaseHTTPRequestHandler, code: str, message: str) -> None:
        reply(h, 400, {"Content-Type": "application/x-amz-json-1.1"},
              json.dumps({"__type": code, "Message": message}).encode())
