"""The GCP half of bench/infra_scale.py: `declare_gcp(vms)` declares an OSU sweep of `vms`
VMs (2 a group) with two operators under Pulumi mocks and counts what it declared (the
operators' IAP tunnel grants included: `infra.gcp.identity.IAM_TYPES`)."""

from __future__ import annotations

import os
import time

import pulumi

from infra.preview import RecordingMocks, install, run_declarations
from spotbench.spec import load_spec

MACHINES = ["n1-standard-2", "n1-standard-4", "n1-highcpu-8", "n1-highmem-8", "n1-standard-8"]
OPERATORS = ["user:ops@example.com", "group:bench@example.com"]  # IAP, status, schedule
_MOCKS: RecordingMocks | None = None


def cpu_now() -> float:
    """CPU seconds of this process and its children (user + system)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def spec_for(vms: int):
    """An OSU sweep (2 VMs a group) with `vms` VMs: k machine types × trials (≤ 100)."""
    groups = vms // 2
    k = next(k for k in range(1, len(MACHINES) + 1) if groups % k == 0 and groups // k <= 100)
    return load_spec({
        "name": f"scale{vms}", "cloud": "gcp", "zone": "us-central1-a",
        "gcp": {"operators": OPERATORS},
        "workload": {"name": "osu"}, "matrix": {"machine_type": MACHINES[:k]},
        "trials": groups // k, "placement": "spread",
        "schedule": {"cron": "0 3 * * *"}, "deadline": "30m",
    })


def declare_gcp(vms: int) -> dict:
    """{vms, groups, resources, iam_objects, seconds, cpu_seconds, _declared} of one
    declaration (`_declared`: what it declared, for bench/infra_scale.py's replay)."""
    global _MOCKS
    from infra.gcp import GcpSweep, GcpSweepArgs
    from infra.gcp.identity import IAM_TYPES

    if _MOCKS is None:
        _MOCKS = RecordingMocks()
        install(_MOCKS, stack="bench")
        pulumi.runtime.set_all_config({"gcp:project": "bench-project"})
    mocks, spec = _MOCKS, spec_for(vms)
    mocks.reset()
    t0, c0 = time.perf_counter(), cpu_now()
    run_declarations(lambda: GcpSweep(spec.name, GcpSweepArgs(spec=spec)))
    seconds, cpu = time.perf_counter() - t0, cpu_now() - c0
    count = len(mocks.of_type("gcp:compute/instance:Instance"))
    assert count == vms, (count, vms)
    iap = len(mocks.of_type("gcp:iap/tunnelIamMember:TunnelIamMember"))
    assert iap == len(OPERATORS), iap  # counted among the IAM objects below
    return {"vms": vms, "groups": vms // 2, "resources": len(mocks.declared),
            "iam_objects": sum(len(mocks.of_type(t)) for t in IAM_TYPES),
            "seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3),
            "_declared": list(mocks.declared)}
