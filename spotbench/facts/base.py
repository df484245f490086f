"""`CloudFacts`: what a cloud *is* to spotbench, as plain data (no operations, no SDK).

spec, plan, member, spec checks, costs and estimates read these; what a cloud *does*
(drivers, schedulers, preflight, orphan finders, caller checks) is its provider's, in
`spotbench.clouds`, a layer above. One `CloudFacts` value per cloud, in
`spotbench/facts/<cloud>.py`, listed in `spotbench.facts.CLOUDS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel

if TYPE_CHECKING:
    from spotbench.catalog import CloudCatalog


def same_zone(zone: str) -> str:
    """A cloud without regions: a zone is its own region."""
    return zone


@dataclass(frozen=True)
class CloudFacts:
    name: str
    provider: str  # the module holding this cloud's `PROVIDER` (its operations)
    # the location field a spec on this cloud must give ("zone" | "region"), with an example
    location: str | None = None
    location_example: str = ""
    default_machine_type: str | None = None  # None: the spec's matrix must name one
    default_zone: str | None = None  # the zone records carry when the spec names none
    default_concurrency: int | None = None  # groups at once unless the spec says (None: all)
    shares_host: bool = False  # a group's members run on this one machine (the local cloud)
    stack_component: str | None = None  # "module:Class" infra/__main__.py declares
    boot_s: float = 60.0  # start → workload running (assumed in estimates)
    scheduler_item: str = ""  # the price catalog item of one scheduler job
    gpu_priced_separately: bool = True  # GPUs are price rows of their own (unless bundled)
    spot_label: bool = True  # the report marks spot runs ("spot" in a config's label)
    # zones, machine types, GPUs and placement rules spec validation checks (None: anything goes)
    catalog: CloudCatalog | None = None
    # monthly free tier per estimate line item (quantity in the line's unit), deducted by
    # `estimate --assume free_tier=on`
    free_tier: Mapping[str, float] = field(default_factory=dict)
    # a free tier given only in some regions (GCP's always-free disk and bucket: three US
    # regions); a key `item:qualifier` (`disk:pd-standard`) is the item of that disk type only
    free_tier_regions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # the functions' billed CPU per memory size (MB → vCPU; GCP's Cloud Run functions bill
    # vCPU-seconds beside GiB-seconds); empty: CPU is in the memory price (Lambda)
    function_vcpu: Mapping[int, float] = field(default_factory=dict)
    # the stack's NAT for VMs without external IPs: "per-vm" (billed per VM using it, while
    # it runs: Cloud NAT), "gateway" (a gateway and its IP billed every hour it exists: AWS)
    nat: str = ""
    region_of_zone: Callable[[str], str] = same_zone  # us-central1-a → us-central1
    any_price_region: bool = False  # one price for every place (the local cloud: "*")
    # the spec's own section for this cloud (`gcp:`, `aws:`), a strict pydantic model
    options: type[BaseModel] | None = None
    disk_item: str = "local"  # the price item of a member's boot disk
    disk_gb_option: str | None = None  # the `options` field giving its size in GB
    # what its operator commands need on this machine (spotbench/cli/extras.py says how)
    setup_extras: str = ""  # `make setup CLOUD=<name>` installs '.[<setup_extras>]'
    needs_modules: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tools: tuple[tuple[str, str, str], ...] = ()  # (command, the step that runs it, install URL)
    double_env: str | None = None  # env var aiming commands at a local double

    @property
    def deployed_by_stack(self) -> bool:
        """`pulumi up` of infra/ creates this cloud's resources (else `spotbench run`)."""
        return self.stack_component is not None

    # the region helpers, one argument order: (region, zone), the region winning when given
    def price_region(self, region: str | None, zone: str | None = None) -> str | None:
        """The region prices are looked up in: the given region, else the zone's ("*" for
        a cloud with one price everywhere)."""
        if self.any_price_region:
            return "*"
        return self.sweep_region(region, zone)

    def sweep_region(self, region: str | None, zone: str | None) -> str | None:
        """The spec's region — the one home of the rule: its `region` when given, else its
        `zone`'s (`region_of_zone`); None when it gives neither. Policy, preflight, the GCP
        settings and the price lookup all ask this."""
        if region:
            return region
        return self.region_of_zone(zone) if zone else None
