"""Per-role provisioning on the created lifecycle's capacity paths (issue #36): a group
whose chief and parameter server run standard and whose workers run spot is made all or
nothing in one zone — GCE: one bulkInsert per role, each from its role's template (so no
request mixes provisioning models); EC2: one instant fleet per member, each at its own
market (`DefaultTargetCapacityType` from the template's market tag). A preempted spot worker
still retries the group whole; GCE does not preempt the standard members."""

from __future__ import annotations

import boto3
import pytest

from spotbench import control
from spotbench.clouds.aws.ec2 import AwsCloud
from spotbench.clouds.base import ErrorKind, State
from spotbench.clouds.gcp import template_name
from tests.clouds.aws_templates import declare_templates as declare_aws_templates
from tests.clouds.test_aws_capacity import REGION, ZONES as AWS_ZONES, _live, _spec as aws_spec
from tests.clouds.test_aws_capacity import front  # noqa: F401 - fixture
from tests.clouds.test_gcp_capacity import SA, TICK, gce, gpu_spec, make_sweep, members_of  # noqa: F401

RESERVED = {"chief": "standard", "ps": "standard"}
TF = {"name": "tf-mnist", "strategy": "parameter_server", "workers": 2, "ps": 1}


def _gcp_templates(gce, spec) -> None:
    """What infra declares: a template per role with that role's scheduling."""
    from infra.gcp.vms import scheduling

    for g in spec.plan():
        for m in g.members:
            s = scheduling(spec, gpu=True, compact=False, domain=None, provisioning=m.provisioning)
            gce.add_template("us-central1", template_name(g.id, m.role),
                             {**spec.labels, **g.member_labels(m)}, service_account=SA,
                             termination_action=s["instance_termination_action"],
                             provisioning_model=s["provisioning_model"])


def test_multinode_per_role_provisioning_gcp_created_group_mixes_by_role_and_retries_whole(gce, tmp_path):
    spec = gpu_spec(workload=TF, role_provisioning=RESERVED)
    sweep = make_sweep(gce, tmp_path, spec)
    _gcp_templates(gce, spec)  # over make_sweep's: each role's own provisioning model
    group = sweep.groups[0]
    gce.exhaust("us-central1-a")
    first = control.start(sweep, TICK)
    assert first["started"] == [group.id]
    models = {n: gce.instances[("us-central1-b", n)]["provisioning_model"] for n in members_of(sweep)}
    assert {m.role: models[m.name] for m in group.members} == {
        "chief": "STANDARD", "ps": "STANDARD", "worker": "SPOT"}
    # one bulkInsert per role per zone: each names one template, so one provisioning model
    made_in_b = [b for b in gce.bulk_inserts
                 if any(p["preference"] == "ALLOW" and z.endswith("us-central1-b")
                        for z, p in b["locationPolicy"]["locations"].items())]
    assert sorted(b["sourceInstanceTemplate"].rsplit("/", 1)[-1] for b in made_in_b) == sorted(
        template_name(group.id, r) for r in ("chief", "ps", "worker"))
    chief = next(m.name for m in group.members if m.role == "chief")
    with pytest.raises(ValueError, match="STANDARD"):
        gce.preempt("us-central1-b", chief)  # GCE does not reclaim a standard VM
    worker = next(m.name for m in group.members if m.role == "worker")
    before = gce.instances[("us-central1-b", chief)]["id"]
    gce.preempt("us-central1-b", worker)  # a spot worker is reclaimed: the group is broken
    [seen] = [i for i in sweep.cloud.query(group.labels) if i.name == worker]
    assert (seen.state, seen.error) == (State.TERMINATED, ErrorKind.PREEMPTED)
    gce.replenish("us-central1-a")
    again = control.start(sweep, TICK)
    assert again["started"] == [group.id] and again["run"] == first["run"]
    zones = {z for n in members_of(sweep) for z in gce.zones_of(n)}
    assert len(zones) == 1  # retried whole, in one zone, the standard chief made again too
    [zone] = zones
    assert gce.instances[(zone, chief)]["id"] != before
    assert gce.instances[(zone, chief)]["provisioning_model"] == "STANDARD"


@pytest.fixture
def aws_setup(front):  # noqa: F811
    spec = aws_spec(workload=TF, role_provisioning=RESERVED, matrix={"machine_type": ["c5.xlarge"]})
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=front.url)
    declare_aws_templates(ec2, spec, AWS_ZONES)
    cloud = AwsCloud(REGION, endpoint_url=front.url, wait_timeout_s=10, poll_s=0.5,
                     lifecycle="created")
    return spec, spec.plan()[0], cloud, ec2


def test_multinode_per_role_provisioning_aws_fleets_launch_each_member_at_its_market(aws_setup, front):  # noqa: F811
    spec, group, cloud, ec2 = aws_setup
    front.exhaust(AWS_ZONES[0])
    out = cloud.start(group.labels, zones=AWS_ZONES)
    assert {i.state for i in out} == {State.RUNNING} and {i.zone for i in out} == {AWS_ZONES[1]}
    lifecycle = {next(t["Value"] for t in i["Tags"] if t["Key"] == "Name"): i.get("InstanceLifecycle", "on-demand")
                 for i in _live(ec2)}
    assert {m.role: lifecycle[m.name] for m in group.members} == {
        "chief": "on-demand", "ps": "on-demand", "worker": "spot"}
    assert len(lifecycle) == len(group.members)
    stopped = cloud.stop(group.labels)  # a stop terminates every member, whatever its market
    assert {i.state for i in stopped} == {State.TERMINATED} and _live(ec2) == []


def test_multinode_per_role_provisioning_aws_fleet_request_per_market():
    """The CreateFleet parameters of a standard member's fleet and a spot member's
    (docs/platform.md: `DefaultTargetCapacityType`, `OnDemandOptions` / `SpotOptions`)."""
    from spotbench.clouds.aws.fleet import Template, fleet_request

    on_demand = fleet_request([Template("lt-1", "m-c0", "us-east-1a", "subnet-1", "on-demand")], {})
    spot = fleet_request([Template("lt-2", "m-w0", "us-east-1a", "subnet-1", "spot")], {})
    assert on_demand["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    assert "SpotOptions" not in on_demand
    assert on_demand["OnDemandOptions"] == {"AllocationStrategy": "prioritized",
                                            "SingleAvailabilityZone": True, "MinTargetCapacity": 1}
    assert spot["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "spot"
    assert "OnDemandOptions" not in spot and spot["SpotOptions"]["SingleAvailabilityZone"] is True
