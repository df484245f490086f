"""The clouds' machine types as their own APIs list them, refreshed by `spotbench prices`.

GCE's `machineTypes`/`acceleratorTypes` aggregatedList and EC2's `DescribeInstanceTypes`/
`DescribeInstanceTypeOfferings` give each type's CPU architecture, vCPUs, GPUs (maker,
model, count) and the zones offering it (`spotbench/clouds/<cloud>/catalog.py` fetch them).
The table is stored beside the price tables in the user's cache (`$SPOTBENCH_CATALOG_DIR`,
else `$XDG_CACHE_HOME/spotbench/catalog`, else `~/.cache/spotbench/catalog`), one JSON per
cloud with the time it was fetched; the spec checks read it over the shipped rules
(`CloudCatalog.check_machine_type`, `built_in_gpus`), which stay the offline fallback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path


@dataclass(frozen=True)
class Gpu:
    maker: str  # "nvidia", "amd", … (lowercase)
    model: str  # the cloud's name: "nvidia-tesla-t4", "T4", "Radeon Pro V520"
    count: int


@dataclass(frozen=True)
class MachineInfo:
    name: str
    architecture: str  # "x86_64" | "arm64" (the catalog's names)
    vcpus: int = 0
    gpus: tuple[Gpu, ...] = ()
    zones: tuple[str, ...] = ()


@dataclass
class LiveCatalog:
    cloud: str
    fetched_at: datetime
    source: str
    machines: dict[str, MachineInfo] = field(default_factory=dict)

    @property
    def date(self) -> str:
        return self.fetched_at.date().isoformat()


def catalog_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("SPOTBENCH_CATALOG_DIR"):
        return Path(env["SPOTBENCH_CATALOG_DIR"])
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "spotbench" / "catalog"
    return Path.home() / ".cache" / "spotbench" / "catalog"


def architecture(name: str) -> str:
    """The catalog's name of a cloud's architecture word (`X86_64`, `x86_64`, `ARM64`, `arm64`, `i386`)."""
    low = name.lower()
    return "arm64" if low in ("arm64", "aarch64", "arm64_mac") else "x86_64" if low in (
        "x86_64", "x86-64", "amd64") else low


def save(live: LiveCatalog, directory: Path | None = None) -> Path:
    directory = directory or catalog_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{live.cloud}.json"
    data = {"cloud": live.cloud, "fetched_at": live.fetched_at.isoformat(), "source": live.source,
            "machines": [asdict(m) for m in sorted(live.machines.values(), key=lambda m: m.name)]}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)
    _cache.clear()
    return path


_cache: dict[tuple[str, str, float], LiveCatalog | None] = {}


def load(cloud: str, directory: Path | None = None) -> LiveCatalog | None:
    """The refreshed table of `cloud`, or None (never refreshed, or unreadable: the shipped
    rules then decide alone)."""
    path = (directory or catalog_dir()) / f"{cloud}.json"
    try:
        stamp = path.stat().st_mtime
    except OSError:
        return None
    key = (cloud, str(path), stamp)
    if key not in _cache:
        _cache[key] = _read(path)
    return _cache[key]


def _read(path: Path) -> LiveCatalog | None:
    try:
        data = json.loads(path.read_text())
        machines = {
            m["name"]: MachineInfo(name=m["name"], architecture=m["architecture"],
                                   vcpus=int(m.get("vcpus", 0)),
                                   gpus=tuple(Gpu(**g) for g in m.get("gpus", ())),
                                   zones=tuple(m.get("zones", ())))
            for m in data["machines"]}
        return LiveCatalog(cloud=data["cloud"], fetched_at=datetime.fromisoformat(data["fetched_at"]),
                           source=str(data.get("source", "")), machines=machines)
    except (OSError, ValueError, KeyError, TypeError):
        return None
