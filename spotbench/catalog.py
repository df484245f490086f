"""What the clouds offer, as shipped with spotbench: zones, machine families, GPUs.

Used by spec validation (`spotbench.spec_checks`) so that `plan` refuses what the cloud
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
"""

from __future__ import annotations

import csv
import difflib
import functools
import re
from dataclasses import dataclass
from datetime import timedelta
from importlib import resources
from typing import Literal

from spotbench.cron import aws_cron, shift_cron

CATALOG_DATE = "2024-06"

# ---- zones ------------------------------------------------------------------------------
GCP_ZONE = re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]$")
GCP_REGION = re.compile(r"^[a-z]+-[a-z]+\d+$")
AWS_ZONE = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d+[a-z]$")
AWS_REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d+$")

GCP_ZONES: dict[str, str] = {  # region → zone letters
    "africa-south1": "abc", "asia-east1": "abc", "asia-east2": "abc", "asia-northeast1": "abc",
    "asia-northeast2": "abc", "asia-northeast3": "abc", "asia-south1": "abc",
    "asia-south2": "abc", "asia-southeast1": "abc", "asia-southeast2": "abc",
    "australia-southeast1": "abc", "australia-southeast2": "abc", "europe-central2": "abc",
    "europe-north1": "abc", "europe-southwest1": "abc", "europe-west1": "bcd",
    "europe-west2": "abc", "europe-west3": "abc", "europe-west4": "abc", "europe-west6": "abc",
    "europe-west8": "abc", "europe-west9": "abc", "europe-west10": "abc",
    "europe-west12": "abc", "me-central1": "abc", "me-central2": "abc", "me-west1": "abc",
    "northamerica-northeast1": "abc", "northamerica-northeast2": "abc",
    "southamerica-east1": "abc", "southamerica-west1": "abc", "us-central1": "abcf",
    "us-east1": "bcd", "us-east4": "abc", "us-east5": "abc", "us-south1": "abc",
    "us-west1": "abc", "us-west2": "abc", "us-west3": "abc", "us-west4": "abc",
}
AWS_ZONES: dict[str, str] = {
    "us-east-1": "abcdef", "us-east-2": "abc", "us-west-1": "abc", "us-west-2": "abcd",
    "ca-central-1": "abd", "ca-west-1": "abc", "eu-central-1": "abc", "eu-central-2": "abc",
    "eu-west-1": "abc", "eu-west-2": "abc", "eu-west-3": "abc", "eu-north-1": "abc",
    "eu-south-1": "abc", "eu-south-2": "abc", "ap-south-1": "abc", "ap-south-2": "abc",
    "ap-northeast-1": "acd", "ap-northeast-2": "abcd", "ap-northeast-3": "abc",
    "ap-southeast-1": "abc", "ap-southeast-2": "abc", "ap-southeast-3": "abc",
    "ap-southeast-4": "abc", "ap-east-1": "abc", "sa-east-1": "abc", "me-south-1": "abc",
    "me-central-1": "abc", "af-south-1": "abc", "il-central-1": "abc",
    "us-gov-west-1": "abc", "us-gov-east-1": "abc",
}

# ---- machine families -------------------------------------------------------------------
# GCP: <series>-<shape>-<vCPUs>[-lssd|g]; `shapes` lists the shapes the series offers.
GCP_SERIES: dict[str, tuple[str, ...]] = {
    "e2": ("standard", "highmem", "highcpu", "micro", "small", "medium"),
    "n1": ("standard", "highmem", "highcpu", "ultramem", "megamem"),
    "n2": ("standard", "highmem", "highcpu"), "n2d": ("standard", "highmem", "highcpu"),
    "n4": ("standard", "highmem", "highcpu"),
    "c2": ("standard",), "c2d": ("standard", "highmem", "highcpu"),
    "c3": ("standard", "highmem", "highcpu"), "c3d": ("standard", "highmem", "highcpu"),
    "c4": ("standard", "highmem", "highcpu"), "c4a": ("standard", "highmem", "highcpu"),
    "c4d": ("standard", "highmem", "highcpu"),
    "t2d": ("standard",), "t2a": ("standard",), "h3": ("standard",),
    "m1": ("ultramem", "megamem"), "m2": ("ultramem", "megamem"), "m3": ("ultramem", "megamem"),
    "z3": ("highmem",), "a2": ("highgpu", "megagpu", "ultragpu"), "a3": ("highgpu", "megagpu"),
    "g2": ("standard",),
}
GCP_TYPE = re.compile(r"^(?P<series>[a-z]\d[a-z]?)-(?P<shape>[a-z]+)(?:-(?P<size>\d+)(?:g|-lssd)?)?$")
# Series that accept a COLLOCATED (compact) placement policy.
GCP_COMPACT_SERIES = frozenset(
    {"a2", "a3", "a4", "c2", "c2d", "c3", "c3d", "c4", "c4a", "c4d", "g2", "h3", "n2",
     "n2d", "z3"}
)
# GPUs attached to N1 VMs (`guest_accelerators`): GPU → allowed counts per VM.
GCP_N1_GPUS: dict[str, tuple[int, ...]] = {
    "nvidia-tesla-t4": (1, 2, 4), "nvidia-tesla-v100": (1, 2, 4, 8),
    "nvidia-tesla-p100": (1, 2, 4), "nvidia-tesla-p4": (1, 2, 4),
}
# Series whose machine types come with their GPUs built in (the type fixes GPU and count).
GCP_BUNDLED_GPUS: dict[str, tuple[str, ...]] = {
    "a2": ("nvidia-tesla-a100", "nvidia-a100-80gb"), "a3": ("nvidia-h100-80gb", "nvidia-h100-mega-80gb"),
    "g2": ("nvidia-l4",),
}
GCP_GPUS = frozenset(GCP_N1_GPUS) | {g for gs in GCP_BUNDLED_GPUS.values() for g in gs}

AWS_TYPE = re.compile(r"^(?P<family>[a-z]+\d+[a-z\-]*)\.(?P<size>[a-z0-9\-]+)$")
AWS_SIZE = re.compile(r"^(nano|micro|small|medium|large|xlarge|\d+xlarge|metal(-\d+xl)?)$")
AWS_FAMILIES = frozenset({
    "t2", "t3", "t3a", "t4g", "m5", "m5a", "m5n", "m5zn", "m6i", "m6a", "m6g", "m6in", "m7i",
    "m7a", "m7g", "c5", "c5a", "c5n", "c6i", "c6a", "c6g", "c6gn", "c6in", "c7i", "c7a", "c7g",
    "c7gn", "r5", "r5a", "r5n", "r6i", "r6a", "r6g", "r7i", "r7g", "hpc6a", "hpc7g", "g4dn",
    "g4ad", "g5", "g5g", "g6", "p3", "p3dn", "p4d", "p5", "inf2", "trn1",
})
AWS_GPU_FAMILIES: dict[str, str] = {  # family → the GPU its types carry
    "g4dn": "nvidia-tesla-t4", "g4ad": "amd-radeon-v520", "g5": "nvidia-a10g",
    "g5g": "nvidia-t4g", "g6": "nvidia-l4", "p3": "nvidia-tesla-v100", "p3dn": "nvidia-tesla-v100",
    "p4d": "nvidia-a100", "p5": "nvidia-h100",
}
# GPUs per instance of the AWS GPU types (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html).
AWS_GPU_COUNTS: dict[str, int] = {
    **{f"g4dn.{s}": 1 for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")},
    "g4dn.12xlarge": 4, "g4dn.metal": 8,
    **{f"g4ad.{s}": 1 for s in ("xlarge", "2xlarge", "4xlarge")}, "g4ad.8xlarge": 2,
    "g4ad.16xlarge": 4,
    **{f"g5.{s}": 1 for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")},
    "g5.12xlarge": 4, "g5.24xlarge": 4, "g5.48xlarge": 8,
    **{f"g5g.{s}": 1 for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge")}, "g5g.16xlarge": 2,
    "g5g.metal": 2,
    **{f"g6.{s}": 1 for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")},
    "g6.12xlarge": 4, "g6.24xlarge": 4, "g6.48xlarge": 8,
    "p3.2xlarge": 1, "p3.8xlarge": 4, "p3.16xlarge": 8, "p3dn.24xlarge": 8,
    "p4d.24xlarge": 8, "p5.48xlarge": 8,
}
# G2 types carry L4s by size (cloud.google.com/compute/docs/gpus: G2 machine types); A2/A3
# types name their count (`-<n>g`).
GCP_G2_GPUS: dict[int, int] = {4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}
GCP_A_GPU: dict[str, str] = {"a2-highgpu": "nvidia-tesla-a100", "a2-megagpu": "nvidia-tesla-a100",
                             "a2-ultragpu": "nvidia-a100-80gb", "a3-highgpu": "nvidia-h100-80gb",
                             "a3-megagpu": "nvidia-h100-mega-80gb"}
UNKNOWN_COUNT = -1  # a GPU type whose count the catalog does not know (a newer size)


def vm_gpus(catalog: CloudCatalog | None, machine_type: str, accelerator: str | None,
            count: int) -> tuple[str | None, int]:
    """(GPU, count) one VM of `machine_type` has: its built-in GPUs (its cloud's catalog
    knows them), else the attached `count` × `accelerator` (GCP N1)."""
    built_in = catalog.built_in_gpus(machine_type) if catalog is not None else None
    if built_in is not None:
        return built_in
    return (accelerator, count) if accelerator else (None, 0)


# Cluster placement groups do not take burstable T2 instances.
AWS_NO_CLUSTER = frozenset({"t2"})

# ---- CPU architecture and GPU vendor ------------------------------------------------------
# spotbench boots x86_64 images (COS `cos-stable`, the ECS-optimized AL2023 x86_64 AMI) and
# builds its workload images for the builder's x86_64; its GPU image is CUDA. So an Arm
# machine, or a GPU that is not NVIDIA's, would fail at create time or at `exec`: refused here.
# GCP: the Arm series end in `a` after their generation (T2A Ampere Altra, C4A/N4A Axion):
# cloud.google.com/compute/docs/instances/arm-on-compute. EC2: the attribute letter `g` after
# the generation means AWS Graviton (c7g, m6gd, g5g, hpc7g):
# docs.aws.amazon.com/ec2/latest/instancetypes/instance-type-names.html
GCP_ARM_SERIES = re.compile(r"^[a-z]\d+a$")
AWS_GRAVITON = re.compile(r"^[a-z]+\d+[a-z\-]*g[a-z\-]*$")
IMAGE_ARCHITECTURE = "x86_64"
GPU_VENDOR = "nvidia"  # the GPU image is CUDA; other vendors' GPUs get no driver or runtime


Verdict = Literal["known", "unlisted", "bad"]


@dataclass(frozen=True)
class Check:
    """The verdict on one name and, for `unlisted`/`bad`, the sentence saying why."""

    verdict: Verdict
    message: str = ""


KNOWN = Check("known")
_ALL: list[CloudCatalog] = []  # every catalog made (one per provider), to name another cloud


@functools.cache
def priced_machine_types(cloud: str) -> frozenset[str]:
    """Machine types the shipped price CSVs (spotbench/prices) list for `cloud`, any region.
    Read here, not through `spotbench.costs`, which sits above spec validation."""
    found: set[str] = set()
    for entry in resources.files("spotbench.prices").iterdir():
        if entry.name.endswith(".csv"):
            for row in csv.DictReader(entry.read_text().splitlines()):
                if row.get("cloud") == cloud and row.get("kind") == "machine":
                    found.add((row.get("item") or "").strip())
    return frozenset(found)


def did_you_mean(value: str, known: list[str] | set[str] | frozenset[str], cutoff: float = 0.75) -> str:
    close = difflib.get_close_matches(value, sorted(known), n=1, cutoff=cutoff)
    return f"; did you mean {close[0]!r}?" if close else ""


class CloudCatalog:
    """Zones and machines of one cloud. Subclasses fill the tables and the machine rules."""

    cloud = ""
    zone_pattern: re.Pattern[str]
    region_pattern: re.Pattern[str]
    zones: dict[str, str] = {}  # region → zone letters
    zone_example = ""
    region_example = ""
    machine_example = ""
    scheduler_name = ""  # what starts a deployed sweep

    def check_crons(self, cron: str, deadline: timedelta) -> None:
        """Raise `CronShiftError` when the start/stop pair cannot be scheduled."""
        shift_cron(cron, deadline)

    def zone_name(self, region: str, letter: str) -> str:
        raise NotImplementedError

    def region_of(self, zone: str) -> str:
        raise NotImplementedError

    def zone_in_region(self, zone: str, region: str) -> bool:
        return self.region_of(zone) == region

    def family(self, machine_type: str) -> str:
        """The machine family (GCP: its series): n2-standard-4 → n2, c5.xlarge → c5; a name
        of no family (the local cloud's) is its own (the one home of this rule)."""
        return machine_type.lower()

    def looks_like_location(self, name: str) -> bool:
        return bool(self.zone_pattern.match(name) or self.region_pattern.match(name))

    def __init__(self) -> None:
        _ALL.append(self)

    def _other_cloud(self, name: str) -> str | None:
        """The other cloud whose naming `name` follows (and this cloud's does not)."""
        if self.looks_like_location(name):
            return None
        for catalog in _ALL:
            if catalog is not self and catalog.looks_like_location(name):
                return catalog.cloud
        return None

    def check_zone(self, zone: str) -> Check:
        known = {self.zone_name(r, z) for r, zs in self.zones.items() for z in zs}
        if zone in known:
            return KNOWN
        other = self._other_cloud(zone)
        if other:
            return Check("bad", f"looks like a zone of {other}, not {self.cloud}; {self.cloud} zones "
                         f"look like {self.zone_example!r}" + did_you_mean(zone, known))
        if not self.zone_pattern.match(zone):
            return Check("bad", f"not a {self.cloud} zone name (like {self.zone_example!r})"
                         + did_you_mean(zone, known))
        region = self.region_of(zone)
        if region in self.zones:  # a known region: its zones are known too
            letters = ", ".join(self.zone_name(region, z) for z in self.zones[region])
            return Check("bad", f"region {region} has the zones {letters}")
        return Check("unlisted", f"zone {zone!r} is not in spotbench's {CATALOG_DATE} zone list "
                     "(a newer region?); the cloud will say if it does not exist")

    def check_region(self, region: str) -> Check:
        if region in self.zones:
            return KNOWN
        other = self._other_cloud(region)
        if other:
            return Check("bad", f"looks like a region of {other}, not {self.cloud}; {self.cloud} "
                         f"regions look like {self.region_example!r}" + did_you_mean(region, list(self.zones)))
        if not self.region_pattern.match(region):
            return Check("bad", f"not a {self.cloud} region name (like {self.region_example!r})"
                         + did_you_mean(region, list(self.zones)))
        return Check("unlisted", f"region {region!r} is not in spotbench's {CATALOG_DATE} region list "
                     "(a newer region?)")

    def unlisted_type(self, machine_type: str) -> Check:
        return Check("unlisted", f"machine type {machine_type!r} is not in spotbench's catalog "
                     f"(newer than {CATALOG_DATE}?): `estimate` and budgets need a --prices row for it")

    def check_machine_type(self, machine_type: str, priced: set[str]) -> Check:
        """`priced`: the machine types the price catalog has rows for (any region)."""
        arch = self.architecture(machine_type)
        if arch != IMAGE_ARCHITECTURE:
            return Check("bad", f"{machine_type} is an {arch} machine ({self.arm_name}); spotbench's "
                         f"boot and workload images are {IMAGE_ARCHITECTURE} only: choose an "
                         f"{IMAGE_ARCHITECTURE} type such as {self.machine_example!r}")
        return self.check_name(machine_type, priced)

    def check_name(self, machine_type: str, priced: set[str]) -> Check:
        raise NotImplementedError

    arm_name = ""

    def architecture(self, machine_type: str) -> str:
        """The CPU architecture of `machine_type`'s family: `x86_64` or `arm64`."""
        return IMAGE_ARCHITECTURE

    @staticmethod
    def gpu_vendor_check(accelerator: str) -> Check | None:
        vendor = accelerator.split("-", 1)[0]
        if vendor != GPU_VENDOR:
            return Check("bad", f"{accelerator} is a {vendor} GPU; spotbench's GPU image runs CUDA "
                         f"and needs an {GPU_VENDOR} GPU")
        return None

    def check_accelerator(self, machine_type: str, accelerator: str, count: int) -> Check:
        """Can `machine_type` carry `count` × `accelerator`?"""
        raise NotImplementedError

    def check_placement(self, machine_type: str, placement: str, spot: bool) -> Check:
        raise NotImplementedError

    def built_in_gpus(self, machine_type: str) -> tuple[str, int] | None:
        """(GPU, count per VM) a machine type comes with, whatever the spec's `accelerator`
        says; None when it has none. The count is `UNKNOWN_COUNT` for a type of a GPU family
        the catalog has no size for (a guardrail then refuses rather than count 0)."""
        return None


class GcpCatalog(CloudCatalog):
    cloud = "gcp"
    zone_pattern, region_pattern = GCP_ZONE, GCP_REGION
    zones = GCP_ZONES
    zone_example, region_example = "us-central1-a", "us-central1"
    machine_example, scheduler_name = "n1-standard-2", "Cloud Scheduler"

    def zone_name(self, region: str, letter: str) -> str:
        return f"{region}-{letter}"

    def region_of(self, zone: str) -> str:
        return zone.rsplit("-", 1)[0]

    arm_name = "GCP Arm: Ampere Altra or Axion"

    @staticmethod
    def series(machine_type: str) -> str:
        return machine_type.split("-", 1)[0].lower()

    def family(self, machine_type: str) -> str:
        return self.series(machine_type)

    def architecture(self, machine_type: str) -> str:
        return "arm64" if GCP_ARM_SERIES.match(self.series(machine_type)) else IMAGE_ARCHITECTURE

    def built_in_gpus(self, machine_type: str) -> tuple[str, int] | None:
        mt = machine_type.lower()
        series, _, rest = mt.partition("-")
        if series == "g2":
            size = rest.rsplit("-", 1)[-1]
            return "nvidia-l4", GCP_G2_GPUS.get(int(size), UNKNOWN_COUNT) if size.isdigit() else UNKNOWN_COUNT
        if series in ("a2", "a3"):
            m = re.match(r"^(?P<kind>[a-z0-9]+-[a-z]+)-(?P<n>\d+)g$", mt)
            gpu = GCP_A_GPU.get(m.group("kind"), GCP_BUNDLED_GPUS[series][0]) if m else GCP_BUNDLED_GPUS[series][0]
            return gpu, int(m.group("n")) if m else UNKNOWN_COUNT
        return None

    def check_name(self, machine_type: str, priced: set[str]) -> Check:
        if machine_type in priced:
            return KNOWN
        hint = did_you_mean(machine_type, priced)
        m = GCP_TYPE.match(machine_type)
        if not m:
            return Check("bad", "not a GCP machine type (like 'n1-standard-2')" + hint)
        series, shape = m.group("series"), m.group("shape")
        if series not in GCP_SERIES:
            return self.unlisted_type(machine_type) if not hint else Check(
                "bad", f"unknown machine series {series!r}" + hint)
        if shape not in GCP_SERIES[series]:
            return Check("bad", f"series {series} has no {shape!r} shape (it has "
                         f"{', '.join(GCP_SERIES[series])})" + hint)
        if m.group("size") is None and shape not in ("micro", "small", "medium"):
            return Check("bad", f"a {series}-{shape} type needs its vCPU count, like "
                         f"'{series}-{shape}-4'" + hint)
        return self.unlisted_type(machine_type)

    def check_accelerator(self, machine_type: str, accelerator: str, count: int) -> Check:
        series = self.series(machine_type)
        if accelerator not in GCP_GPUS:
            hint = did_you_mean(accelerator, GCP_GPUS, cutoff=0.9)
            if hint:
                return Check("bad", "unknown GCP accelerator" + hint)
            if (other_vendor := self.gpu_vendor_check(accelerator)) is not None:
                return other_vendor
            return Check("unlisted", f"accelerator {accelerator!r} is not in spotbench's "
                         f"{CATALOG_DATE} GPU list (a newer GPU?)")
        if series in GCP_BUNDLED_GPUS:
            if accelerator not in GCP_BUNDLED_GPUS[series]:
                return Check("bad", f"{series} machine types come with "
                             f"{' or '.join(GCP_BUNDLED_GPUS[series])}, not {accelerator}")
            return KNOWN
        if series != "n1":
            where = ", ".join(f"{s} ({'/'.join(g)})" for s, g in GCP_BUNDLED_GPUS.items())
            return Check("bad", f"GCP attaches GPUs only to N1 machine types; {series} cannot take "
                         f"one (or use a type with its GPU built in: {where})")
        if accelerator not in GCP_N1_GPUS:
            owner = next(s for s, gs in GCP_BUNDLED_GPUS.items() if accelerator in gs)
            return Check("bad", f"{accelerator} does not attach to N1; it comes with {owner} machine types")
        if count not in GCP_N1_GPUS[accelerator]:
            return Check("bad", f"{count} × {accelerator} per VM is not offered (choose "
                         f"{', '.join(map(str, GCP_N1_GPUS[accelerator]))})")
        return KNOWN

    def check_placement(self, machine_type: str, placement: str, spot: bool) -> Check:
        if placement == "compact" and self.series(machine_type) not in GCP_COMPACT_SERIES:
            return Check("bad", f"compact placement is not supported for machine type "
                         f"{machine_type!r}: it needs one of the series "
                         f"{', '.join(sorted(GCP_COMPACT_SERIES))} (or placement spread/none)")
        return KNOWN


class AwsCatalog(CloudCatalog):
    cloud = "aws"
    zone_pattern, region_pattern = AWS_ZONE, AWS_REGION
    zones = AWS_ZONES
    zone_example, region_example = "us-east-1a", "us-east-1"
    machine_example, scheduler_name = "c5.large", "EventBridge Scheduler"

    def check_crons(self, cron: str, deadline: timedelta) -> None:
        stop = shift_cron(cron, deadline)
        aws_cron(cron)  # EventBridge's own cron rules, for the start and the stop
        aws_cron(stop)

    def zone_name(self, region: str, letter: str) -> str:
        return f"{region}{letter}"

    def region_of(self, zone: str) -> str:
        """us-east-1a → us-east-1; a region (us-east-1) is its own (the one home of this rule)."""
        return zone[:-1] if zone[-1:].isalpha() else zone

    arm_name = "AWS Graviton"

    def family(self, machine_type: str) -> str:
        return machine_type.split(".", 1)[0].lower()

    def architecture(self, machine_type: str) -> str:
        return "arm64" if AWS_GRAVITON.match(self.family(machine_type)) else IMAGE_ARCHITECTURE

    def built_in_gpus(self, machine_type: str) -> tuple[str, int] | None:
        mt = machine_type.lower()
        family = mt.split(".", 1)[0]
        if family in AWS_GPU_FAMILIES or family.startswith(("p", "g")) and family[1:2].isdigit():
            return AWS_GPU_FAMILIES.get(family, "unknown"), AWS_GPU_COUNTS.get(mt, UNKNOWN_COUNT)
        return None

    def check_name(self, machine_type: str, priced: set[str]) -> Check:
        if machine_type in priced:
            return KNOWN
        hint = did_you_mean(machine_type, priced)
        m = AWS_TYPE.match(machine_type)
        if not m:
            return Check("bad", "not an EC2 instance type (like 'c5.large')" + hint)
        if not AWS_SIZE.match(m.group("size")):
            return Check("bad", f"{m.group('size')!r} is not an EC2 size (large, xlarge, 2xlarge, …)" + hint)
        if m.group("family") not in AWS_FAMILIES and hint:
            return Check("bad", f"unknown instance family {m.group('family')!r}" + hint)
        return self.unlisted_type(machine_type)

    def check_accelerator(self, machine_type: str, accelerator: str, count: int) -> Check:
        family = self.family(machine_type)
        carried = AWS_GPU_FAMILIES.get(family)
        if carried is None:
            return Check("bad", f"EC2 {machine_type} has no GPU and EC2 attaches none: GPUs come "
                         f"with the instance type ({', '.join(sorted(AWS_GPU_FAMILIES))})")
        if accelerator != carried:
            return Check("bad", f"EC2 {family} instances carry {carried}, not {accelerator}")
        return self.gpu_vendor_check(accelerator) or KNOWN

    def check_placement(self, machine_type: str, placement: str, spot: bool) -> Check:
        if placement == "none":
            return KNOWN
        if spot:  # EC2 places no spot instance that stops on interruption in a placement group
            return Check("bad", f"EC2 does not launch a spot instance ({machine_type}) that stops on "
                         "interruption (how spotbench runs spot) in a placement group: use "
                         "provisioning: standard, or placement: none")
        if placement == "compact" and self.family(machine_type) in AWS_NO_CLUSTER:
            return Check("bad", f"cluster placement groups do not take {machine_type} "
                         f"({self.family(machine_type)} instances)")
        return KNOWN


# One catalog per cloud, made here so each can recognise the other's names.
GCP_CATALOG = GcpCatalog()
AWS_CATALOG = AwsCatalog()
