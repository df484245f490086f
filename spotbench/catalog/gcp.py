"""GCP's catalog: zones, machine series and shapes, GPUs (attached to N1, or built into
A2/A3/G2 types), compact placement, Arm series."""

from __future__ import annotations

import re

from spotbench.catalog.base import (
    CATALOG_DATE,
    IMAGE_ARCHITECTURE,
    KNOWN,
    UNKNOWN_COUNT,
    Check,
    CloudCatalog,
    did_you_mean,
)

GCP_ZONE = re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]$")
GCP_REGION = re.compile(r"^[a-z]+-[a-z]+\d+$")

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
# G2 types carry L4s by size (cloud.google.com/compute/docs/gpus: G2 machine types); A2/A3
# types name their count (`-<n>g`).
GCP_G2_GPUS: dict[int, int] = {4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}
GCP_A_GPU: dict[str, str] = {"a2-highgpu": "nvidia-tesla-a100", "a2-megagpu": "nvidia-tesla-a100",
                             "a2-ultragpu": "nvidia-a100-80gb", "a3-highgpu": "nvidia-h100-80gb",
                             "a3-megagpu": "nvidia-h100-mega-80gb"}
# Arm series end in `a` after their generation (T2A Ampere Altra, C4A/N4A Axion):
# cloud.google.com/compute/docs/instances/arm-on-compute (refused: base.IMAGE_ARCHITECTURE)
GCP_ARM_SERIES = re.compile(r"^[a-z]\d+a$")


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


GCP_CATALOG = GcpCatalog()  # one per cloud, so each recognises the other's names
