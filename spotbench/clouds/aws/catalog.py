"""EC2's instance types as EC2 lists them (`spotbench prices` stores them: spotbench.catalog.live).

`DescribeInstanceTypes` gives each type's architectures (`ProcessorInfo.SupportedArchitectures`),
vCPUs and GPUs (`GpuInfo.Gpus`: manufacturer, name, count); `DescribeInstanceTypeOfferings`
with `LocationType=availability-zone` the zones of each region that offer it. Both paginated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from spotbench.catalog.live import Gpu, LiveCatalog, MachineInfo, architecture

SOURCE = "EC2 DescribeInstanceTypes + DescribeInstanceTypeOfferings"


class CatalogFetchError(RuntimeError):
    pass


def machine_info(item: dict[str, Any], zones: Iterable[str] = ()) -> MachineInfo:
    """One `DescribeInstanceTypes` item as the catalog keeps it (x86_64 when it runs both)."""
    archs = [architecture(a) for a in item.get("ProcessorInfo", {}).get("SupportedArchitectures", [])]
    gpus = tuple(Gpu(maker=str(g.get("Manufacturer", "")).lower(), model=str(g.get("Name", "")),
                     count=int(g.get("Count", 0)))
                 for g in item.get("GpuInfo", {}).get("Gpus", []))
    return MachineInfo(name=item["InstanceType"],
                       architecture="x86_64" if "x86_64" in archs else (archs[0] if archs else ""),
                       vcpus=int(item.get("VCpuInfo", {}).get("DefaultVCpus", 0)), gpus=gpus,
                       zones=tuple(sorted(zones)))


def fetch(regions: Iterable[str], *, project: str | None = None,
          progress: Callable[[str], None] = lambda _: None, now: datetime | None = None) -> LiveCatalog:
    """Every instance type of `regions`, with the zones offering it."""
    now = now or datetime.now(UTC)
    items: dict[str, dict[str, Any]] = {}
    zones: dict[str, set[str]] = {}
    try:
        session = boto3.Session()
        for region in regions:
            ec2 = session.client("ec2", region_name=region)
            progress(f"{region}: instance types (EC2 DescribeInstanceTypes)")
            for page in ec2.get_paginator("describe_instance_types").paginate():
                for item in page.get("InstanceTypes", []):
                    items.setdefault(item["InstanceType"], item)
            progress(f"{region}: the zones offering them (DescribeInstanceTypeOfferings)")
            for page in ec2.get_paginator("describe_instance_type_offerings").paginate(
                    LocationType="availability-zone"):
                for offer in page.get("InstanceTypeOfferings", []):
                    zones.setdefault(offer["InstanceType"], set()).add(offer["Location"])
    except NoCredentialsError as exc:
        raise CatalogFetchError("no AWS credentials: run `aws configure` and try again") from exc
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise CatalogFetchError(f"AWS answered {error.get('Code', '')}: {error.get('Message', exc)} "
                                "(the caller needs ec2:DescribeInstanceTypes and "
                                "ec2:DescribeInstanceTypeOfferings)") from exc
    except BotoCoreError as exc:
        raise CatalogFetchError(f"EC2 could not be reached: {exc}") from exc
    machines = {name: machine_info(item, zones.get(name, ())) for name, item in items.items()}
    return LiveCatalog(cloud="aws", fetched_at=now, source=SOURCE, machines=machines)
