"""Seconds to declare a GCP sweep of 30 / 100 / 300 VMs under Pulumi mocks.

Prints JSON: per size the VM and resource counts and seconds, the per-VM cost of the
largest size relative to the smallest (`linearity`: ~1.0 = linear growth, 2.0 = per-VM
cost doubled; `cpu_linearity` the same on process CPU time, which other load on a shared
machine disturbs less), and whether 300 VMs stay within the 15 s target. A tiny sweep is declared
first so imports and the mock runtime's start-up are not billed to the 30-VM run.

    python bench/infra_scale.py [--sizes 30,100,300]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pulumi  # noqa: E402

from infra.preview import RecordingMocks, install, run_declarations  # noqa: E402
from spotbench.spec import load_spec  # noqa: E402

TARGET_300_S = 15.0
MACHINES = ["n1-standard-2", "n1-standard-4", "n1-highcpu-8", "n1-highmem-8"]


def spec_for(vms: int):
    """An OSU sweep (2 VMs a group) with `vms` VMs: k machine types × trials."""
    groups = vms // 2
    k = next(k for k in range(1, len(MACHINES) + 1) if groups % k == 0 and groups // k <= 100)
    return load_spec({
        "name": f"scale{vms}", "cloud": "gcp", "zone": "us-central1-a",
        "workload": {"name": "osu"}, "matrix": {"machine_type": MACHINES[:k]},
        "trials": groups // k, "placement": "spread",
        "schedule": {"cron": "0 3 * * *"}, "deadline": "30m",
    })


def declare(vms: int, mocks: RecordingMocks) -> dict:
    from infra.gcp import GcpSweep, GcpSweepArgs

    spec = spec_for(vms)
    mocks.reset()
    t0, c0 = time.perf_counter(), time.process_time()
    run_declarations(lambda: GcpSweep(spec.name, GcpSweepArgs(spec=spec)))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    count = len(mocks.of_type("gcp:compute/instance:Instance"))
    assert count == vms, (count, vms)
    return {"vms": vms, "resources": len(mocks.declared), "seconds": round(seconds, 3),
            "cpu_seconds": round(cpu, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="30,100,300")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    mocks = RecordingMocks()
    install(mocks, stack="bench")
    pulumi.runtime.set_all_config({"gcp:project": "bench-project"})
    declare(2, mocks)  # warm-up
    rows = [declare(n, mocks) for n in sizes]
    first, last = rows[0], rows[-1]
    linearity = (last["seconds"] / last["vms"]) / (first["seconds"] / first["vms"])
    cpu_linearity = (last["cpu_seconds"] / last["vms"]) / (first["cpu_seconds"] / first["vms"])
    out = {
        "bench": "infra_scale",
        "cloud": "gcp",
        "sizes": rows,
        "per_vm_ms": {r["vms"]: round(1000 * r["seconds"] / r["vms"], 2) for r in rows},
        "linearity": round(linearity, 2),
        "cpu_linearity": round(cpu_linearity, 2),  # robust to other load on the machine
        "target_300_s": TARGET_300_S,
    }
    big = next((r for r in rows if r["vms"] == 300), None)
    if big:
        out["meets_target"] = big["seconds"] <= TARGET_300_S
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
