"""The AWS half of bench/infra_scale.py: declare an AWS sweep of `vms` VMs under Pulumi mocks.

`declare_aws(vms)` → {vms, groups, resources, iam_objects, parameters, seconds, cpu_seconds,
_declared (what was declared, for bench/infra_scale.py's replay)}:
an OSU sweep (2 VMs a group) in us-east-1, placement none (a placement group per group
would hit EC2's 500 per account first), its subnet sized to hold every member. IAM objects
are the roles, role policies and instance profiles the program declares (issue #29: 4 + 5 + 1,
whatever the group count); `parameters` (SSM, under the sweep's one path, read by the
functions alone: the one key seed every group's ssh keys derive from) are not IAM objects
and, for an OSU sweep, do not grow with the groups either.

    python bench/_scale_aws.py [30,300,1000]
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from infra.preview import RecordingMocks, install, run_declarations  # noqa: E402
from spotbench.spec import load_spec  # noqa: E402

MACHINES = ["c5n.large", "c5n.xlarge", "c5.large", "c5.xlarge", "m5.large"]
IAM_TYPES = ("aws:iam/role:Role", "aws:iam/rolePolicy:RolePolicy",
             "aws:iam/instanceProfile:InstanceProfile", "aws:iam/policy:Policy",
             "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
_MOCKS: RecordingMocks | None = None


def cpu_now() -> float:
    """CPU seconds of this process and its children (user + system)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def spec_for(vms: int):
    """An OSU sweep with `vms` VMs: k machine types × trials (≤ 100 trials)."""
    groups = max(1, vms // 2)
    k = next(k for k in range(1, len(MACHINES) + 1) if groups % k == 0 and groups // k <= 100)
    prefix = 32 - max(8, (vms + 16).bit_length())  # room for every member's fixed IP
    subnet = ipaddress.ip_network(f"10.43.0.0/{prefix}")
    return load_spec({
        "name": f"scale{vms}", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
        "workload": {"name": "osu"}, "matrix": {"machine_type": MACHINES[:k]},
        "trials": groups // k, "schedule": {"cron": "0 3 * * *"}, "deadline": "30m",
        "aws": {"subnet_cidr": str(subnet)},
    })


def _mocks() -> RecordingMocks:
    global _MOCKS
    if _MOCKS is None:
        _MOCKS = RecordingMocks()
        install(_MOCKS, stack="bench")
    return _MOCKS


def declare_aws(vms: int) -> dict:
    from infra.aws import AwsSweep, AwsSweepArgs

    spec = spec_for(vms)
    mocks = _mocks()
    mocks.reset()
    t0, c0 = time.perf_counter(), cpu_now()
    run_declarations(lambda: AwsSweep(spec.name, AwsSweepArgs(spec=spec)))
    seconds, cpu = time.perf_counter() - t0, cpu_now() - c0
    count = len(mocks.of_type("aws:ec2/instance:Instance"))
    assert count == 2 * (vms // 2), (count, vms)
    return {"vms": count, "groups": len(spec.plan()), "resources": len(mocks.declared),
            "iam_objects": sum(len(mocks.of_type(t)) for t in IAM_TYPES),
            "parameters": len(mocks.of_type("aws:ssm/parameter:Parameter")),
            "seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3),
            "_declared": list(mocks.declared)}


if __name__ == "__main__":
    sizes = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "30,300,1000").split(",")]
    declare_aws(2)  # warm-up: imports and the mock runtime's start-up
    rows = [declare_aws(n) for n in sizes]
    print(json.dumps([{k: v for k, v in r.items() if k != "_declared"} for r in rows], indent=2))
