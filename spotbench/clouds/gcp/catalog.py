"""Compute Engine's machine types as GCE lists them (`spotbench prices` stores them:
spotbench.catalog.live).

`machineTypes` aggregatedList gives each type per zone with its vCPUs (`guestCpus`), its
architecture (`architecture`: X86_64, ARM64) and the GPUs built into it (`accelerators`:
`guestAcceleratorType`, `guestAcceleratorCount`, e.g. G2's L4s); every type offered in a
zone is listed there, so its zones come with it. Paginated (`nextPageToken`). GPU types
attached to N1 (`acceleratorTypes`) are NVIDIA's: the makers of built-in GPUs are read from
their type name (`nvidia-l4`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from spotbench.catalog import GCP_CATALOG
from spotbench.catalog.live import Gpu, LiveCatalog, MachineInfo, architecture
from spotbench.clouds.gcp.preflight import COMPUTE, Api

SOURCE = "Compute Engine machineTypes.aggregatedList"


class CatalogFetchError(RuntimeError):
    pass


def machine_info(item: dict[str, Any], zones: set[str]) -> MachineInfo:
    arch = str(item.get("architecture") or "")
    known = architecture(arch) if arch and arch != "ARCHITECTURE_UNSPECIFIED" else (
        GCP_CATALOG.architecture(item["name"]))
    gpus = tuple(Gpu(maker=str(a.get("guestAcceleratorType", "")).split("-", 1)[0],
                     model=str(a.get("guestAcceleratorType", "")),
                     count=int(a.get("guestAcceleratorCount", 0)))
                 for a in item.get("accelerators", []))
    return MachineInfo(name=item["name"], architecture=known, vcpus=int(item.get("guestCpus", 0)),
                       gpus=gpus, zones=tuple(sorted(zones)))


def fetch(regions: Iterable[str] = (), *, project: str | None = None,
          progress: Callable[[str], None] = lambda _: None, now: datetime | None = None,
          api_endpoint: str | None = None) -> LiveCatalog:
    """Every machine type of `project`'s zones (all regions: one aggregated list), with the
    zones offering it. `api_endpoint` (else `SPOTBENCH_GCP_API_ENDPOINT`) points the calls at
    a local endpoint (tests)."""
    now = now or datetime.now(UTC)
    if not project:
        raise CatalogFetchError("the machine types are listed per project: give --project (or set "
                                "SPOTBENCH_GCP_PROJECT)")
    api_endpoint = api_endpoint or os.environ.get("SPOTBENCH_GCP_API_ENDPOINT") or None
    try:
        api = Api(api_endpoint)
    except Exception as exc:  # noqa: BLE001 - google.auth's DefaultCredentialsError and kin
        raise CatalogFetchError(f"no Google credentials ({type(exc).__name__}): run "
                                "`gcloud auth application-default login`") from exc
    items: dict[str, dict[str, Any]] = {}
    zones: dict[str, set[str]] = {}
    token = ""
    while True:
        progress(f"machine types of {project} (machineTypes.aggregatedList)")
        status, body = api.get(COMPUTE, f"/compute/v1/projects/{project}/aggregated/machineTypes",
                               maxResults=500, **({"pageToken": token} if token else {}))
        if status != 200:
            message = str((body.get("error") or {}).get("message") or body)[:200]
            raise CatalogFetchError(f"Compute Engine answered HTTP {status}: {message} (the caller "
                                    f"needs compute.machineTypes.list on {project})")
        for scope, listed in (body.get("items") or {}).items():
            for item in listed.get("machineTypes", []):
                items.setdefault(item["name"], item)
                zones.setdefault(item["name"], set()).add(scope.removeprefix("zones/"))
        token = body.get("nextPageToken", "")
        if not token:
            break
    machines = {name: machine_info(item, zones[name]) for name, item in items.items()}
    return LiveCatalog(cloud="gcp", fetched_at=now, source=SOURCE, machines=machines)
