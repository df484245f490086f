"""Seconds to declare a sweep of 30 / 300 / 1,000 VMs under Pulumi mocks, and its IAM objects.

Prints JSON per cloud: per size the VM, resource and IAM-object counts (accounts, roles,
bindings, secrets: issue #29 keeps them constant in the group count) and seconds, the
per-VM cost of the largest size relative to the smallest (`linearity`: ~1.0 = linear
growth; `cpu_linearity` the same on process CPU time, which other load on a shared machine
disturbs less), whether IAM objects are independent of the size, and whether 1,000 VMs
stay within the 30 s target. A tiny sweep is declared first so imports and the mock
runtime's start-up are not billed to the first size. The AWS half is
`bench/_scale_aws.py`'s `declare_aws(vms) -> {vms, resources, iam_objects, seconds}`,
used when that module exists.

    python bench/infra_scale.py [--cloud gcp|aws|both] [--sizes 30,300,1000]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pulumi  # noqa: E402

from infra.preview import RecordingMocks, install, run_declarations  # noqa: E402
from spotbench.spec import load_spec  # noqa: E402

TARGET_1000_S = 30.0
MACHINES = ["n1-standard-2", "n1-standard-4", "n1-highcpu-8", "n1-highmem-8", "n1-standard-8"]


def spec_for(vms: int):
    """An OSU sweep (2 VMs a group) with `vms` VMs: k machine types × trials (≤ 100)."""
    groups = vms // 2
    k = next(k for k in range(1, len(MACHINES) + 1) if groups % k == 0 and groups // k <= 100)
    return load_spec({
        "name": f"scale{vms}", "cloud": "gcp", "zone": "us-central1-a",
        "workload": {"name": "osu"}, "matrix": {"machine_type": MACHINES[:k]},
        "trials": groups // k, "placement": "spread",
        "schedule": {"cron": "0 3 * * *"}, "deadline": "30m",
    })


def declare_gcp(vms: int, mocks: RecordingMocks) -> dict:
    from infra.gcp import GcpSweep, GcpSweepArgs
    from infra.gcp.identity import IAM_TYPES

    spec = spec_for(vms)
    mocks.reset()
    t0, c0 = time.perf_counter(), time.process_time()
    run_declarations(lambda: GcpSweep(spec.name, GcpSweepArgs(spec=spec)))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    count = len(mocks.of_type("gcp:compute/instance:Instance"))
    assert count == vms, (count, vms)
    return {"vms": vms, "groups": vms // 2, "resources": len(mocks.declared),
            "iam_objects": sum(len(mocks.of_type(t)) for t in IAM_TYPES),
            "seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3)}


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


def gcp_rows(sizes: list[int]) -> list[dict]:
    mocks = RecordingMocks()
    install(mocks, stack="bench")
    pulumi.runtime.set_all_config({"gcp:project": "bench-project"})
    declare_gcp(2, mocks)  # warm-up
    return [declare_gcp(n, mocks) for n in sizes]


def aws_declarer() -> Callable[[int], dict] | None:
    path = Path(__file__).with_name("_scale_aws.py")
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("bench._scale_aws", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.declare_aws


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cloud", choices=("gcp", "aws", "both"), default="both")
    parser.add_argument("--sizes", default="30,300,1000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    out: dict = {"bench": "infra_scale", "target_1000_s": TARGET_1000_S, "clouds": []}
    if args.cloud in ("gcp", "both"):
        out["clouds"].append(summary("gcp", gcp_rows(sizes)))
    if args.cloud in ("aws", "both"):
        declare_aws = aws_declarer()
        if declare_aws is None:
            out["clouds"].append({"cloud": "aws", "missing": "bench/_scale_aws.py (declare_aws)"})
        else:
            declare_aws(2)  # warm-up
            out["clouds"].append(summary("aws", [declare_aws(n) for n in sizes]))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
