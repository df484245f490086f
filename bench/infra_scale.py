"""Seconds to declare a sweep of 30 / 300 / 1,000 VMs under Pulumi mocks, and its IAM objects.

Prints JSON per cloud: per size the VM, group, resource and IAM-object counts (accounts,
roles, bindings, secrets: issue #29 keeps them constant in the group count), wall and CPU
seconds (this process and its children), seconds per VM, and the load average around it;
then the mock runtime's floor measured in the same run, so the figures mean something on a
loaded machine too:

- `floor_ms_per_resource`: a program declaring `FLOOR_RESOURCES` bare custom resources
  (two plain inputs, no parent, no dependency) under the same mocks: what Pulumi's SDK and
  mock monitor cost per registration, whatever the program;
- per size, `replay_*`: the same resources (type, name and the inputs the sweep declared,
  as plain values) declared bare, and `over_replay` = the sweep's CPU seconds ÷ the
  replay's: what the program's own structure (components, outputs, dependencies, typed
  resource classes, boot documents) adds over registering those resources at all.

`linearity` compares the two largest sizes: (t(big) / t(small)) ÷ (big / small), ~1.0 =
linear (`cpu_linearity` on CPU seconds, which other load on a shared machine disturbs
less). `meets_target`: 1,000 VMs within `TARGET_1000_S` in wall and in CPU seconds.
A tiny sweep is declared first so imports and the mock runtime's start-up are not billed
to the first size. Each cloud's half is `bench/_scale_<cloud>.py` with
`declare_<cloud>(vms) -> {vms, groups, resources, iam_objects, seconds, cpu_seconds,
_declared}`.

    python bench/infra_scale.py [--cloud gcp|aws|both] [--sizes 30,300,1000]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_1000_S = 30.0
CLOUDS = ("gcp", "aws")  # bench/_scale_<cloud>.py
FLOOR_RESOURCES = 1000


def declarer(cloud: str) -> Callable[[int], dict] | None:
    """`declare_<cloud>` of bench/_scale_<cloud>.py, or None when that module is absent."""
    path = Path(__file__).with_name(f"_scale_{cloud}.py")
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(f"bench._scale_{cloud}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, f"declare_{cloud}")


def cpu_now() -> float:
    """CPU seconds of this process and its children (user + system)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) seconds of `fn` run as a Pulumi program under the installed mocks."""
    from infra.preview import run_declarations

    t0, c0 = time.perf_counter(), cpu_now()
    run_declarations(fn)
    return time.perf_counter() - t0, cpu_now() - c0


def floor(n: int = FLOOR_RESOURCES) -> dict:
    """The mock runtime's cost per bare registration (ms, wall and CPU)."""
    import pulumi

    def program() -> None:
        for i in range(n):
            pulumi.CustomResource("spotbench:bench:Bare", f"bare-{i}", {"x": i, "y": "v"})

    wall, cpu = timed(program)
    return {"resources": n, "ms_per_resource": round(1000 * wall / n, 3),
            "cpu_ms_per_resource": round(1000 * cpu / n, 3)}


def replay(declared: list) -> tuple[float, float]:
    """(wall, CPU) seconds to declare `declared` again as bare resources with plain inputs."""
    import pulumi

    def program() -> None:
        for i, d in enumerate(declared):
            if d.custom:
                pulumi.CustomResource(d.type, f"{d.name}-replay-{i}", dict(d.inputs))

    return timed(program)


def measure(declare: Callable[[int], dict], vms: int) -> dict:
    before = load()
    row = declare(vms)
    declared = row.pop("_declared")
    wall, cpu = replay(declared)
    row |= {"s_per_vm": round(row["seconds"] / row["vms"], 4),
            "cpu_s_per_vm": round(row["cpu_seconds"] / row["vms"], 4),
            "replay_seconds": round(wall, 3), "replay_cpu_seconds": round(cpu, 3),
            "over_replay": round(row["cpu_seconds"] / cpu, 2),
            "load_before": before, "load_after": load()}
    return row


def _ratio(rows: list[dict], key: str) -> float:
    small, big = rows[-2], rows[-1]
    return round((big[key] / small[key]) / (big["vms"] / small["vms"]), 2)


def summary(cloud: str, rows: list[dict], floors: list[dict]) -> dict:
    out: dict = {"cloud": cloud, "sizes": rows,
                 "floor": floors,
                 "floor_cpu_ms_per_resource": min(f["cpu_ms_per_resource"] for f in floors),
                 "iam_objects_constant": len({r["iam_objects"] for r in rows}) == 1}
    if len(rows) > 1:
        out["linearity"] = _ratio(rows, "seconds")
        out["cpu_linearity"] = _ratio(rows, "cpu_seconds")
        out["linearity_sizes"] = [rows[-2]["vms"], rows[-1]["vms"]]
    big = next((r for r in rows if r["vms"] == 1000), None)
    if big:
        out["meets_target"] = {"wall": big["seconds"] <= TARGET_1000_S,
                               "cpu": big["cpu_seconds"] <= TARGET_1000_S}
    return out


def bench(cloud: str, sizes: list[int]) -> dict:
    declare = declarer(cloud)
    if declare is None:
        return {"cloud": cloud, "missing": f"bench/_scale_{cloud}.py (declare_{cloud})"}
    declare(2)  # warm-up: imports and the mock runtime's start (it installs the mocks)
    floors = [floor()]
    rows = [measure(declare, n) for n in sizes]
    floors.append(floor())  # again after: the machine's load may have changed
    return summary(cloud, rows, floors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cloud", choices=(*CLOUDS, "both"), default="both")
    parser.add_argument("--sizes", default="30,300,1000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    chosen = CLOUDS if args.cloud == "both" else (args.cloud,)
    out = {"bench": "infra_scale", "target_1000_s": TARGET_1000_S, "cpus": os.cpu_count(),
           "load_start": load(), "clouds": [bench(cloud, sizes) for cloud in chosen],
           "load_end": load()}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
