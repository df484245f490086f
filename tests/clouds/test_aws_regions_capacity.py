"""`lifecycle: created` with candidate zones in two regions on AWS (issue #26): EC2 Fleet is
regional, so the driver (`spotbench.clouds.aws.regions.AwsRegions`) asks one region's fleet
after the other in control's order, through moto_server (which serves every region) and the
capacity-refusing front (tests/ec2_spot_front.py, answering per zone in the region each
request is signed for)."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from spotbench import control
from spotbench.auth import Caller
from spotbench.clouds import get_provider
from spotbench.clouds.aws.regions import AwsRegions
from spotbench.clouds.base import State
from spotbench.results import ResultStore
from spotbench.spec import load_spec
from tests.clouds.aws_templates import declare_templates
from tests.clouds.test_aws_capacity import REGION, front  # noqa: F401  (the fixture)
from tests.clouds.test_aws_capacity import _spec as one_region_spec

HOME, OTHER = REGION, "us-west-2"  # the front fixture is made for REGION
EAST = [f"{HOME}a", f"{HOME}b"]
WEST = [f"{OTHER}a", f"{OTHER}b"]
TICK = Caller("scheduler", "scheduler")


def _spec():
    """The one-region capacity tests' group (tests/clouds/test_aws_capacity.py), its
    candidates two zones of each region, its home the first."""
    return one_region_spec(name="reg", region=HOME, zones=[*EAST, *WEST])


@pytest.fixture
def setup(front, tmp_path: Path):
    spec = _spec()
    ec2 = {r: boto3.client("ec2", region_name=r, endpoint_url=front.url) for r in (HOME, OTHER)}
    declare_templates(ec2[HOME], spec, EAST)  # what the stack declares in each region
    declare_templates(ec2[OTHER], spec, WEST)  # (the same VPC CIDR in both: docs/aws.md)
    cloud = AwsRegions(HOME, spec.candidate_regions, endpoint_url=front.url,
                       wait_timeout_s=10, poll_s=0.5)
    sweep = control.Sweep(spec=spec, cloud=cloud, store=ResultStore(f"file://{tmp_path}"))
    return spec, spec.plan()[0], sweep, ec2


def _live(ec2) -> list[dict]:
    filters = [{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
    return [i for r in ec2.describe_instances(Filters=filters)["Reservations"] for i in r["Instances"]]


def test_capacity_aws_regions_the_provider_drives_every_candidate_region(front):
    spec = _spec()
    cloud = get_provider("aws").cloud(spec, {"AWS_ENDPOINT_URL": front.url})
    assert isinstance(cloud, AwsRegions) and list(cloud.clouds) == [HOME, OTHER]
    assert {r: c.ec2.meta.region_name for r, c in cloud.clouds.items()} == {HOME: HOME, OTHER: OTHER}
    one = load_spec({**_spec().model_dump(mode="json", exclude_none=True), "zones": EAST})
    assert not isinstance(get_provider("aws").cloud(one, {}), AwsRegions)  # one region: as before


def test_capacity_aws_regions_first_region_exhausted_the_group_runs_in_the_second(setup, front):
    spec, group, sweep, ec2 = setup
    for zone in EAST:
        front.exhaust(zone)
    out = control.start(sweep, TICK)  # one tick
    assert out["started"] == [group.id]
    live = _live(ec2[OTHER])
    assert len(live) == len(group.members)
    assert len({i["Placement"]["AvailabilityZone"] for i in live}) == 1  # one zone
    assert {i["Placement"]["AvailabilityZone"] for i in live} <= set(WEST)
    assert _live(ec2[HOME]) == []  # nothing left in the first region
    assert front.fleets[0] == (None, EAST)  # the first region's fleet refused both its zones
    assert front.asked[0] == EAST and front.asked[1] == WEST  # then the second region's
    assert {i.state for i in sweep.cloud.query(group.labels)} == {State.RUNNING}
    assert {i.state for i in sweep.cloud.stop(group.labels)} == {State.TERMINATED}
    assert _live(ec2[OTHER]) == [] and sweep.cloud.query(group.labels) == []


def test_capacity_aws_regions_the_next_region_only_when_the_first_refused(setup, front):
    _, group, sweep, ec2 = setup
    front.exhaust(EAST[0])
    out = sweep.cloud.start(group.labels, zones=[*EAST, *WEST])
    assert {i.zone for i in out} == {EAST[1]}
    assert all(WEST[0] not in asked and WEST[1] not in asked for asked in front.asked)
    assert _live(ec2[OTHER]) == []


def test_capacity_aws_regions_a_preempted_group_is_retried_in_the_other_region(setup, front):
    spec, group, sweep, ec2 = setup
    first = control.start(sweep, TICK)
    assert first["started"] == [group.id]
    made = {i["InstanceId"] for i in _live(ec2[HOME])}
    assert len(made) == len(group.members) and _live(ec2[OTHER]) == []
    front.interrupt(sorted(made)[0], region=HOME)  # EC2 reclaims one member: terminated
    for zone in EAST:
        front.exhaust(zone)  # and the first region has no room now

    again = control.start(sweep, TICK)

    assert again["started"] == [group.id] and again["broken"] == [group.id]
    assert _live(ec2[HOME]) == []  # nothing left of the first attempt
    live = _live(ec2[OTHER])
    assert len(live) == len(group.members)
    assert len({i["Placement"]["AvailabilityZone"] for i in live}) == 1
    states = sweep.cloud.query(group.labels)
    assert {i.state for i in states} == {State.RUNNING}  # the reclaimed one is history
    assert [i for i in states if i.error] == []


def test_capacity_aws_regions_orphan_sweep_finds_a_lost_group_in_the_second_region(setup, front):
    from spotbench.clouds.aws.orphans import AwsSweeper
    from spotbench.ops.teardown import teardown

    spec, group, sweep, ec2 = setup
    for zone in EAST:
        front.exhaust(zone)
    made = sweep.cloud.start(group.labels, zones=[*EAST, *WEST])  # then the group is lost
    sweeper = AwsSweeper(regions=[HOME, OTHER], endpoint_url=front.url)
    found = [r for r in sweeper.find(spec.name) if r.kind == "instance"]
    assert {r.id for r in found} == {i.name for i in made}
    assert {r.where for r in found} == {OTHER}
    report = teardown(spec.name, sweeper, yes=True, echo=lambda line: None)
    assert not report.failed
    assert _live(ec2[OTHER]) == [] and _live(ec2[HOME]) == []
