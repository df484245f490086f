"""What every cloud's catalog shares: the verdict on a name (`Check`), "did you mean",
the machine types the shipped prices list, the image's architecture and GPU vendor, and
`CloudCatalog`, the rules a cloud's catalog fills in (`gcp`, `aws`)."""

from __future__ import annotations

import csv
import difflib
import functools
import re
from dataclasses import dataclass
from datetime import timedelta
from importlib import resources
from typing import Literal

from spotbench.catalog.live import MachineInfo
from spotbench.catalog.live import load as load_live
from spotbench.cron import shift_cron

CATALOG_DATE = "2024-06"
UNKNOWN_COUNT = -1  # a GPU type whose count the catalog does not know (a newer size)


def vm_gpus(catalog: CloudCatalog | None, machine_type: str, accelerator: str | None,
            count: int) -> tuple[str | None, int]:
    """(GPU, count) one VM of `machine_type` has: its built-in GPUs (its cloud's catalog
    knows them), else the attached `count` × `accelerator` (GCP N1)."""
    built_in = (catalog.live_gpus(machine_type) or catalog.built_in_gpus(machine_type)
                if catalog is not None else None)
    if built_in is not None:
        return built_in
    return (accelerator, count) if accelerator else (None, 0)


# ---- CPU architecture and GPU vendor ------------------------------------------------------
# spotbench boots x86_64 images (COS `cos-stable`, the ECS-optimized AL2023 x86_64 AMI) and
# builds its workload images for the builder's x86_64; its GPU image is CUDA. So an Arm
# machine, or a GPU that is not NVIDIA's, would fail at create time or at `exec`: refused here.
# GCP: the Arm series end in `a` after their generation (T2A Ampere Altra, C4A/N4A Axion):
# cloud.google.com/compute/docs/instances/arm-on-compute. EC2: the attribute letter `g` after
# the generation means AWS Graviton (c7g, m6gd, g5g, hpc7g):
# docs.aws.amazon.com/ec2/latest/instancetypes/instance-type-names.html
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


def machine_family(catalog: CloudCatalog | None, machine_type: str) -> str:
    """A machine type's family under its cloud's catalog (`CloudCatalog.family`: n2-standard-4
    → n2, c5.xlarge → c5); with no catalog (the local cloud) a name is its own family, in
    lower case. The one home of this rule (the policy's `machine_families` reads it)."""
    return catalog.family(machine_type) if catalog is not None else machine_type.lower()


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
        """The machine family (GCP: its series): n2-standard-4 → n2, c5.xlarge → c5 (each
        cloud's catalog overrides this); a name of no family is its own."""
        return machine_family(None, machine_type)

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
        live = load_live(self.cloud)
        where = (f"among {self.cloud}'s machine types as its API listed them on {live.date}"
                 if live is not None else f"in spotbench's catalog (shipped {CATALOG_DATE}; "
                 f"`spotbench prices --cloud {self.cloud}` refreshes it from the cloud's API)")
        return Check("unlisted", f"machine type {machine_type!r} is not {where}: the cloud will say "
                     "if it does not exist; `estimate` and budgets need a --prices row for it")

    def live_machine(self, machine_type: str) -> MachineInfo | None:
        """What the cloud's own API said of `machine_type` at the last refresh (None: not
        refreshed, or not listed)."""
        live = load_live(self.cloud)
        return live.machines.get(machine_type) if live is not None else None

    def live_gpus(self, machine_type: str) -> tuple[str, int] | None:
        """(GPU, count per VM) as the cloud's API listed them (the shipped name of the model
        where the shipped rules know the type), None when unlisted or GPU-less."""
        info = self.live_machine(machine_type)
        if info is None or not info.gpus:
            return None
        shipped = self.built_in_gpus(machine_type)
        first = info.gpus[0]
        model = shipped[0] if shipped is not None and shipped[0] != "unknown" else (
            first.model if first.model.startswith(first.maker) else f"{first.maker}-{first.model}"
        ).lower().replace(" ", "-")
        return model, sum(g.count for g in info.gpus)

    def check_machine_type(self, machine_type: str, priced: set[str]) -> Check:
        """`priced`: the machine types the price catalog has rows for (any region). A type
        the cloud's API listed at the last refresh is judged by what it said (architecture,
        GPU maker); the shipped rules judge the rest."""
        info = self.live_machine(machine_type)
        if info is not None:
            return self._listed(info, priced)
        arch = self.architecture(machine_type)
        if arch != IMAGE_ARCHITECTURE:
            return Check("bad", f"{machine_type} is an {arch} machine ({self.arm_name}); spotbench's "
                         f"boot and workload images are {IMAGE_ARCHITECTURE} only: choose an "
                         f"{IMAGE_ARCHITECTURE} type such as {self.machine_example!r}")
        return self.check_name(machine_type, priced)

    def _listed(self, info: MachineInfo, priced: set[str]) -> Check:
        live = load_live(self.cloud)
        said = f"{self.cloud}'s API ({live.date if live else 'refreshed'})"
        if info.architecture != IMAGE_ARCHITECTURE:
            return Check("bad", f"{info.name} is an {info.architecture} machine ({said}); spotbench's "
                         f"boot and workload images are {IMAGE_ARCHITECTURE} only: choose an "
                         f"{IMAGE_ARCHITECTURE} type such as {self.machine_example!r}")
        for gpu in info.gpus:
            if gpu.maker != GPU_VENDOR:
                return Check("bad", f"{info.name} carries {gpu.count} × {gpu.maker} {gpu.model} "
                             f"({said}); spotbench's GPU image runs CUDA on {GPU_VENDOR} GPUs only")
        if info.name not in priced:
            return Check("unlisted", f"machine type {info.name!r} is listed by {said} but has no "
                         "shipped price: `spotbench prices` or a --prices row prices it")
        return KNOWN

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
