"""The `gcp` cloud's facts: Compute Engine in a zone, its catalog, its spec section `gcp:`."""

from __future__ import annotations

from pydantic import Field, field_validator

from spotbench.catalog import GCP_CATALOG
from spotbench.facts.base import CloudFacts
from spotbench.facts.options import CloudOptions


class GcpOptions(CloudOptions):
    project: str | None = None
    image_family: str = "cos-stable"
    boot_disk_gb: int = Field(20, ge=10)
    network_cidr: str = "10.42.0.0/24"
    operators: list[str] = Field(
        default_factory=list,
        description="IAM members who operate the sweep (status, report, schedule, ssh via IAP),"
        " e.g. ['user:alice@example.com', 'group:bench@example.com']",
    )

    @field_validator("operators")
    @classmethod
    def _members(cls, v: list[str]) -> list[str]:
        for member in v:
            kind, _, who = member.partition(":")
            if kind not in ("user", "group", "serviceAccount", "domain") or not who:
                raise ValueError(
                    f"{member!r} is not an IAM member; write user:EMAIL, group:EMAIL, "
                    "serviceAccount:EMAIL or domain:DOMAIN"
                )
        return v


FACTS = CloudFacts(
    name="gcp",
    provider="spotbench.clouds.gcp.provider",
    location="zone",
    location_example="us-central1-a",
    stack_component="infra.gcp:GcpSweep",  # the Pulumi component infra/__main__.py declares
    scheduler_item="cloud-scheduler-job",
    catalog=GCP_CATALOG,
    region_of_zone=GCP_CATALOG.region_of,
    # cloud.google.com/scheduler/pricing (3 jobs per billing account); cloud.google.com/run/
    # pricing (Cloud Run functions, gen2: 2 M requests, 360,000 GiB-s, 180,000 vCPU-s);
    # cloud.google.com/free/docs/free-cloud-features (30 GB-months standard PD, 5 GB-months
    # Standard Storage in us-west1/us-central1/us-east1; 1 GB egress from North America)
    free_tier={"scheduler jobs": 3, "functions (invocations)": 2_000_000,
               "functions (GB-seconds)": 360_000, "functions (CPU)": 180_000,
               "disk:pd-standard": 30, "bucket storage": 5, "egress": 1},
    free_tier_regions={"disk:pd-standard": ("us-west1", "us-central1", "us-east1"),
                       "bucket storage": ("us-west1", "us-central1", "us-east1")},
    # cloud.google.com/functions/docs/configuring/memory: the vCPU each memory size gets
    function_vcpu={128: 0.083, 256: 0.167, 512: 0.333, 1024: 0.583, 2048: 1.0, 4096: 2.0,
                   8192: 2.0, 16384: 4.0, 32768: 8.0},
    nat="per-vm",  # infra/gcp/network.py: a Cloud NAT per region
    options=GcpOptions,
    disk_item="pd-balanced",
    disk_gb_option="boot_disk_gb",
    setup_extras="gcp,infra,ops",
    needs_modules={"gcp": ("google.cloud.compute_v1", "google.cloud.scheduler_v1", "gcsfs"),
                   "infra": ("pulumi", "pulumi_gcp", "pulumi_tls", "pulumi_random")},
    tools=(
        ("pulumi", "`pulumi up`", "https://www.pulumi.com/docs/install/"),
        ("gcloud", "`gcloud auth application-default login` and `gcloud services enable`",
         "https://cloud.google.com/sdk/docs/install"),
        ("docker", "`make images`", "https://docs.docker.com/engine/install/"),
    ),
    double_env="SPOTBENCH_GCP_API_ENDPOINT",
)
