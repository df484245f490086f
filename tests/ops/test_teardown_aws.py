"""Teardown on AWS against a real moto_server: orphans the stack never knew are found in
every region, spot requests are cancelled, dry run deletes nothing, results stay."""

from __future__ import annotations

import boto3

from spotbench.clouds.aws.orphans import AwsSweeper
from spotbench.ops.teardown import teardown
from spotbench.results import ResultStore

AMI = "ami-12c6146b"  # one of moto's built-in images


def _tags(sweep: str, group: str) -> list[dict]:
    tags = {"managed-by": "spotbench", "spotbench-sweep": sweep, "spotbench-group": group}
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def _launch(url: str, region: str, sweep: str, spot: bool = False) -> str:
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=url)
    extra = {"InstanceMarketOptions": {"MarketType": "spot", "SpotOptions": {
        "SpotInstanceType": "persistent", "InstanceInterruptionBehavior": "stop"}}} if spot else {}
    answer = ec2.run_instances(
        ImageId=AMI, MinCount=1, MaxCount=1, InstanceType="t3.micro",
        TagSpecifications=[{"ResourceType": "instance", "Tags": _tags(sweep, f"{sweep}-g1")}],
        **extra,
    )
    return answer["Instances"][0]["InstanceId"]


def _live(url: str, region: str) -> set[str]:
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=url)
    out = set()
    for r in ec2.describe_instances()["Reservations"]:
        for i in r["Instances"]:
            if i["State"]["Name"] != "terminated":
                out.add(i["InstanceId"])
    return out


def test_teardown_finds_orphans_in_every_region_and_spares_others(moto_url, tmp_path):
    regions = ["us-east-1", "eu-west-1"]
    ours = {_launch(moto_url, "us-east-1", "osu"), _launch(moto_url, "eu-west-1", "osu", spot=True)}
    other_sweep = _launch(moto_url, "us-east-1", "other")
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_url)
    untagged = ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    # a tagged persistent spot request whose instance never came up
    ec2.request_spot_instances(
        SpotPrice="0.05", InstanceCount=1, Type="persistent",
        LaunchSpecification={"ImageId": AMI, "InstanceType": "t3.micro"},
        TagSpecifications=[{"ResourceType": "spot-instances-request", "Tags": _tags("osu", "osu-g2")}],
    )
    store = ResultStore(f"file://{tmp_path}/results")
    raw = store.write_raw("r1", "osu-g1", "latency.txt", "0 1.5\n", attempt=1)

    sweeper = AwsSweeper(regions=regions, endpoint_url=moto_url)
    lines: list[str] = []
    dry = teardown("osu", sweeper, yes=False, echo=lines.append)
    kinds = sorted((r.kind, r.where) for r in dry.found)
    assert ("instance", "us-east-1") in kinds and ("instance", "eu-west-1") in kinds
    assert {r.id for r in dry.found if r.kind == "instance"} == ours
    assert sum(r.kind == "spot-request" for r in dry.found) >= 1
    assert not dry.removed and dry.summary().startswith("dry run")
    assert any("would delete" in line for line in lines)
    assert ours <= _live(moto_url, "us-east-1") | _live(moto_url, "eu-west-1")  # nothing deleted

    done = teardown("osu", sweeper, yes=True, echo=lines.append)
    assert not done.failed, done.failed
    assert {r.id for r in done.removed if r.kind == "instance"} == ours
    assert [r.kind for r in done.removed][0] == "spot-request"  # requests cancelled first
    assert not (ours & (_live(moto_url, "us-east-1") | _live(moto_url, "eu-west-1")))
    assert {other_sweep, untagged} <= _live(moto_url, "us-east-1")
    open_requests = ec2.describe_spot_instance_requests(
        Filters=[{"Name": "tag:spotbench-sweep", "Values": ["osu"]},
                 {"Name": "state", "Values": ["open", "active"]}])["SpotInstanceRequests"]
    assert open_requests == []
    assert done.summary().startswith("removed")
    assert store.fs.exists(raw)  # results untouched
    assert teardown("osu", sweeper, yes=True, echo=lines.append).found == []


def test_all_sweeps_finds_every_spotbench_instance(moto_url):
    a, b = _launch(moto_url, "us-east-1", "one"), _launch(moto_url, "us-east-1", "two")
    sweeper = AwsSweeper(regions=["us-east-1"], endpoint_url=moto_url)
    report = teardown(None, sweeper, yes=False, echo=lambda _: None)
    assert {r.id for r in report.found if r.kind == "instance"} == {a, b}
    assert {r.sweep for r in report.found} == {"one", "two"}


def test_default_regions_come_from_the_account(moto_url):
    sweeper = AwsSweeper(endpoint_url=moto_url)
    assert "us-east-1" in sweeper.regions() and "eu-west-1" in sweeper.regions()


def test_cli_status_and_teardown_on_aws(moto_url, tmp_path, monkeypatch):
    import json

    import yaml
    from typer.testing import CliRunner

    from spotbench.cli import app
    from spotbench.spec import load_spec

    spec_file = tmp_path / "aws.yaml"
    spec_file.write_text(yaml.safe_dump({
        "name": "osu", "cloud": "aws", "region": "us-east-1", "workload": {"name": "osu"},
        "matrix": {"machine_type": ["c5.large"]}, "results": str(tmp_path / "results"),
    }))
    group = load_spec(spec_file).plan()[0]
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_url)
    for m in group.members:
        tags = {**group.member_labels(m), "Name": m.name}
        ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1, TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}])
    monkeypatch.setenv("SPOTBENCH_STATE_ROOT", str(tmp_path / "state"))
    runner = CliRunner()
    status = runner.invoke(app, ["status", str(spec_file), "--json"])
    assert status.exit_code == 0, status.output
    (g,) = json.loads(status.stdout)["groups"]
    assert g["id"] == group.id and g["state"] == "RUNNING", g

    monkeypatch.setenv("PATH", str(tmp_path))  # no pulumi on PATH
    out = runner.invoke(app, ["teardown", str(spec_file), "--yes", "--regions", "us-east-1"])
    assert out.exit_code == 0, out.output
    assert "Pulumi CLI is not installed" in out.output and "pulumi destroy --stack osu" in out.output
    assert "removed 2 resource(s), none left behind" in out.output
    assert _live(moto_url, "us-east-1") == set()
