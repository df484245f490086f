"""GCP orphan sweep: instances and static addresses labelled `managed-by=spotbench`, in
every zone and region of the project (aggregated lists), with google-cloud-compute directly.

The `gcp` Cloud driver operates instances of the sweep's region; teardown must also find
static addresses and look in every zone, whether or not a stack still knows them.
"""

from __future__ import annotations

import os
import time
from typing import Any

from spotbench.clouds.base import Resource
from spotbench.labels import MANAGED_BY, SWEEP_LABEL

OPERATION_TIMEOUT_S = 300


class GcpSweeper:
    cloud = "gcp"

    def __init__(self, project: str, api_endpoint: str | None = None, credentials: Any = None):
        self.project = project
        endpoint = api_endpoint or os.environ.get("SPOTBENCH_GCP_API_ENDPOINT") or None
        if endpoint and endpoint.startswith("http://") and credentials is None:
            from google.auth.credentials import AnonymousCredentials

            credentials = AnonymousCredentials()  # a local emulator: never send real tokens over http
        self._kwargs: dict[str, Any] = {"credentials": credentials}
        if endpoint:
            self._kwargs |= {"transport": "rest", "client_options": {"api_endpoint": endpoint}}

    def _client(self, name: str) -> Any:
        from google.cloud import compute_v1

        return getattr(compute_v1, name)(**self._kwargs)

    @staticmethod
    def _filter(sweep: str | None) -> str:
        (key, value), = MANAGED_BY.items()
        parts = [f'labels.{key} = "{value}"']
        if sweep:
            parts.append(f'labels.{SWEEP_LABEL} = "{sweep}"')
        return " AND ".join(parts)

    @staticmethod
    def _ours(labels: Any, sweep: str | None) -> bool:
        labels = dict(labels or {})
        if any(labels.get(k) != v for k, v in MANAGED_BY.items()):
            return False
        return sweep is None or labels.get(SWEEP_LABEL) == sweep

    def find(self, sweep: str | None) -> list[Resource]:
        out: list[Resource] = []
        request = {"project": self.project, "filter": self._filter(sweep)}
        for scope, listing in self._client("InstancesClient").aggregated_list(request=request):
            for inst in listing.instances:
                if self._ours(inst.labels, sweep):  # re-checked: filters are easy to get wrong
                    zone = scope.rsplit("/", 1)[-1]
                    out.append(
                        Resource("gcp", "instance", inst.name, zone, inst.labels.get(SWEEP_LABEL), inst.status)
                    )
        for scope, listing in self._client("AddressesClient").aggregated_list(request=request):
            for addr in listing.addresses:
                if self._ours(addr.labels, sweep):
                    region = scope.rsplit("/", 1)[-1]
                    out.append(
                        Resource("gcp", "address", addr.name, region, addr.labels.get(SWEEP_LABEL), addr.status)
                    )
        return out

    def delete(self, resource: Resource) -> None:
        """Delete one object and wait (bounded) for its operation to finish."""
        if resource.kind == "instance":
            op = self._client("InstancesClient").delete_unary(
                project=self.project, zone=resource.where, instance=resource.id
            )
            ops, where = self._client("ZoneOperationsClient"), {"zone": resource.where}
        elif resource.kind == "address":
            op = self._client("AddressesClient").delete_unary(
                project=self.project, region=resource.where, address=resource.id
            )
            ops, where = self._client("RegionOperationsClient"), {"region": resource.where}
        else:
            raise ValueError(f"gcp sweeper cannot delete a {resource.kind}")
        deadline = time.monotonic() + OPERATION_TIMEOUT_S
        while op.status != op.Status.DONE:
            if time.monotonic() > deadline:
                raise TimeoutError(f"operation {op.name} not done after {OPERATION_TIMEOUT_S} s")
            op = ops.wait(project=self.project, operation=op.name, **where)  # returns within ~2 min
        if op.error and op.error.errors:
            raise RuntimeError("; ".join(f"{e.code}: {e.message}" for e in op.error.errors))
