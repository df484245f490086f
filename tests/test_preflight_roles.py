"""Per-role provisioning in `spotbench preflight` (issue #36): each member counts against its
own market's quota — a reserved master's standard VMs against the standard (on-demand)
quotas, the spot roles' against the spot / preemptible ones — on both clouds' doubles."""

from __future__ import annotations

from tests.test_preflight import ZONE, _aws, _gcp, _problems, aws, gcp  # noqa: F401 - fixtures

RESERVED = {"chief": "standard", "ps": "standard"}
TF = {"name": "tf-mnist", "strategy": "parameter_server", "workers": 2, "ps": 1}


def test_multinode_per_role_provisioning_preflight_aws_counts_each_market(aws):
    aws.update({"L-3819A6DF": 8.0, "L-DB2E81BA": 4.0})  # G and VT: spot 8, on-demand 4 vCPUs
    spec = _aws(workload=TF, trials=1, matrix={"machine_type": ["g4dn.xlarge"]},
                role_provisioning=RESERVED)
    (problem,) = _problems(spec)  # 2 spot workers × 4 vCPUs fit; chief + ps on demand do not
    assert "G and VT Running On-Demand instances" in problem.message
    assert "needs 8 vCPUs at once, the limit is 4" in problem.message
    assert "--quota-code L-DB2E81BA" in problem.fix
    aws["L-DB2E81BA"] = 8.0
    assert _problems(spec) == []


def test_multinode_per_role_provisioning_preflight_gcp_counts_each_quota(gcp):
    spec = _gcp(workload=TF, lifecycle="created", zone=None, zones=[ZONE], role_provisioning=RESERVED)
    # 2 groups: chief + ps standard (4 T4s on NVIDIA_T4_GPUS, limit 1), 4 workers' T4s spot
    (problem,) = _problems(spec)
    assert problem.message.startswith("NVIDIA_T4_GPUS in us-central1: the sweep needs 4 at once")
    gcp.project.quotas["us-central1"]["NVIDIA_T4_GPUS"] = (4, 0)
    gcp.project.quotas["us-central1"]["CPUS"] = (15, 0)  # the standard members' 16 vCPUs
    (problem,) = _problems(spec)
    assert problem.message.startswith("CPUS in us-central1: the sweep needs 16 at once")
