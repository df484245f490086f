"""Seconds to declare a sweep of 30 / 300 / 1,000 VMs under Pulumi mocks, and its IAM objects.

Prints JSON per cloud: per size the VM, resource and IAM-object counts (accounts, roles,
bindings, secrets: issue #29 keeps them constant in the group count) and seconds, the
per-VM cost of the largest size relative to the smallest (`linearity`: ~1.0 = linear
growth; `cpu_linearity` the same on process CPU time, which other load on a shared machine
disturbs less), whether IAM objects are independent of the size, and whether 1,000 VMs
stay within the 30 s target. A tiny sweep is declared first so imports and the mock
runtime's start-up are not billed to the first size. Each cloud's half is
`bench/_scale_<cloud>.py` with `declare_<cloud>(vms) -> {vms, resources, iam_objects,
seconds}` (GCP: `_scale_gcp.py`; AWS: `_scale_aws.py`, used when it exists).

    python bench/infra_scale.py [--cloud gcp|aws|both] [--sizes 30,300,1000]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_1000_S = 30.0
CLOUDS = ("gcp", "aws")  # bench/_scale_<cloud>.py


def declarer(cloud: str) -> Callable[[int], dict] | None:
    """`declare_<cloud>` of bench/_scale_<cloud>.py, or None when that module is absent."""
    path = Path(__file__).with_name(f"_scale_{cloud}.py")
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(f"bench._scale_{cloud}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, f"declare_{cloud}")


def summary(cloud: str, rows: list[dict]) -> dict:
    first, last = rows[0], rows[-1]
    out = {"cloud": cloud, "sizes": rows,
           "per_vm_ms": {r["vms"]: round(1000 * r["seconds"] / r["vms"], 2) for r in rows},
           "linearity": round((last["seconds"] / last["vms"]) / (first["seconds"] / first["vms"]), 2),
           "iam_objects_constant": len({r["iam_objects"] for r in rows}) == 1}
    if all("cpu_seconds" in r for r in rows):
        out["cpu_linearity"] = round(
            (last["cpu_seconds"] / last["vms"]) / (first["cpu_seconds"] / first["vms"]), 2)
    big = next((r for r in rows if r["vms"] == 1000), None)
    if big:
        out["meets_target"] = big["seconds"] <= TARGET_1000_S
    return out


def bench(cloud: str, sizes: list[int]) -> dict:
    declare = declarer(cloud)
    if declare is None:
        return {"cloud": cloud, "missing": f"bench/_scale_{cloud}.py (declare_{cloud})"}
    declare(2)  # warm-up: imports and the mock runtime's start
    return summary(cloud, [declare(n) for n in sizes])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cloud", choices=(*CLOUDS, "both"), default="both")
    parser.add_argument("--sizes", default="30,300,1000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    chosen = CLOUDS if args.cloud == "both" else (args.cloud,)
    out = {"bench": "infra_scale", "target_1000_s": TARGET_1000_S,
           "clouds": [bench(cloud, sizes) for cloud in chosen]}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
