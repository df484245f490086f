"""What the clouds offer, as shipped with spotbench: zones, machine families, GPUs.

Used by spec validation (`spotbench.spec.checks`) so that `plan` refuses what the cloud
would refuse, offline. Each cloud's provider holds its catalog (`Provider.catalog`:
`GcpCatalog`, `AwsCatalog`; the local cloud has none and takes anything). Machine types known by name are the price catalog's rows
(`spotbench/prices/*.csv`); the families below say which other names are well formed.

A name can be:
- known: in the catalog → accepted;
- well formed but not in the catalog (a newer zone, a bigger size, a new family) → accepted
  with a warning naming it: the catalog may simply be older than the cloud;
- malformed, or of another cloud → an error, with "did you mean" from the catalog.

Sources (2024-06): cloud.google.com/compute/docs/regions-zones,
cloud.google.com/compute/docs/gpus, cloud.google.com/compute/docs/instances/placement-policies-overview,
docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-regions-availability-zones.html,
docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-groups.html.

The package: `base` (the verdicts and the rules every catalog follows), `gcp`, `aws` (each
cloud's tables and rules; each catalog made once, so each recognises the other's names).
"""

from __future__ import annotations

from spotbench.catalog.aws import (
    AWS_CATALOG,
    AWS_FAMILIES,
    AWS_GPU_COUNTS,
    AWS_GPU_FAMILIES,
    AWS_GRAVITON,
    AWS_NO_CLUSTER,
    AWS_REGION,
    AWS_SIZE,
    AWS_TYPE,
    AWS_ZONE,
    AWS_ZONES,
    AwsCatalog,
)
from spotbench.catalog.base import (
    CATALOG_DATE,
    GPU_VENDOR,
    IMAGE_ARCHITECTURE,
    KNOWN,
    UNKNOWN_COUNT,
    Check,
    CloudCatalog,
    Verdict,
    did_you_mean,
    machine_family,
    priced_machine_types,
    vm_gpus,
)
from spotbench.catalog.gcp import (
    GCP_A_GPU,
    GCP_ARM_SERIES,
    GCP_BUNDLED_GPUS,
    GCP_CATALOG,
    GCP_COMPACT_SERIES,
    GCP_G2_GPUS,
    GCP_GPUS,
    GCP_N1_GPUS,
    GCP_REGION,
    GCP_SERIES,
    GCP_TYPE,
    GCP_ZONE,
    GCP_ZONES,
    GcpCatalog,
)

__all__ = [
    "AWS_CATALOG", "AWS_FAMILIES", "AWS_GPU_COUNTS", "AWS_GPU_FAMILIES", "AWS_GRAVITON",
    "AWS_NO_CLUSTER", "AWS_REGION", "AWS_SIZE", "AWS_TYPE", "AWS_ZONE", "AWS_ZONES", "AwsCatalog",
    "CATALOG_DATE", "GPU_VENDOR", "IMAGE_ARCHITECTURE", "KNOWN", "UNKNOWN_COUNT", "Check",
    "CloudCatalog", "Verdict", "did_you_mean", "machine_family", "priced_machine_types", "vm_gpus",
    "GCP_A_GPU", "GCP_ARM_SERIES", "GCP_BUNDLED_GPUS", "GCP_CATALOG", "GCP_COMPACT_SERIES",
    "GCP_G2_GPUS", "GCP_GPUS", "GCP_N1_GPUS", "GCP_REGION", "GCP_SERIES", "GCP_TYPE", "GCP_ZONE",
    "GCP_ZONES", "GcpCatalog",
]
