"""The AWS Pulumi program under mocks (`tests/infra/conftest.py`): the resource graph a
`pulumi up` would create — spot options, IMDSv2, no public IPs, tags, security group rules,
IAM policy documents, the function URL's auth, the scheduler's targets."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from infra.aws.instances import GPU_AMI_PARAMETER, CPU_AMI_PARAMETER
from infra.aws.scheduler import aws_cron
from spotbench.clouds.aws.identity import member_role_name
from spotbench.cron import CronShiftError
from spotbench.member import MemberContext
from spotbench.spec import load_spec
from tests.infra.conftest import MOCKS

ROOT = Path(__file__).resolve().parents[2]
INSTANCE = "aws:ec2/instance:Instance"
SPOT = "aws:ec2/spotInstanceRequest:SpotInstanceRequest"
TAG = "aws:ec2/tag:Tag"
STATE = "aws:ec2transitgateway/instanceState:InstanceState"
POLICY = "aws:iam/rolePolicy:RolePolicy"
PROFILE = "aws:iam/instanceProfile:InstanceProfile"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
SCHEDULE = "aws:scheduler/schedule:Schedule"
FUNCTION = "aws:lambda/function:Function"
URL = "aws:lambda/functionUrl:FunctionUrl"


def sweep(declare, **over):
    from infra.aws import AwsSweep, AwsSweepArgs

    data = {"name": "ax", "cloud": "aws", "region": "eu-west-1", "zone": "eu-west-1a",
            "workload": {"name": "osu"}, "matrix": {"machine_type": ["c5n.large"]},
            "trials": 2, "placement": "none", "results": "s3://res-bucket/runs/ax",
            "image": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/spotbench/osu:1",
            "schedule": {"cron": "0 3 * * 1-5", "timezone": "Europe/Berlin"},
            "deadline": "45m", **over}
    spec = load_spec(data)
    MOCKS.reset()  # several sweeps may be declared in one test
    return spec, declare(lambda: AwsSweep(spec.name, AwsSweepArgs(spec=spec)))


def members(mocks):
    """The declared members: spot requests (spot sweeps) or instances (on-demand)."""
    return mocks.of_type(SPOT) + mocks.of_type(INSTANCE)


def env_of(user_data: str) -> dict[str, str]:
    doc = yaml.safe_load(user_data.removeprefix("#cloud-config\n"))
    text = next(f["content"] for f in doc["write_files"] if f["path"].endswith("/env"))
    return dict(line.split("=", 1) for line in text.splitlines())


def policy(mocks, suffix: str) -> dict:
    return json.loads(mocks.one(POLICY, suffix).inputs["policy"])


def statement(doc: dict, sid: str) -> dict:
    return next(s for s in doc["Statement"] if s.get("Sid") == sid)


def test_instances_are_stopped_persistent_spot_with_imdsv2_and_no_public_ip(declare):
    spec, mocks = sweep(declare)
    instances = members(mocks)
    assert len(instances) == 4 and not mocks.of_type(SPOT)  # 2 trials × (launcher, peer)
    ips = [i.inputs["privateIp"] for i in instances]
    assert len(set(ips)) == 4 and all(ip.startswith("10.43.1.") for ip in ips)
    for inst in instances:
        i = inst.inputs
        # an Instance with spot market options, not a SpotInstanceRequest: RunInstances
        # carries what the spot request's launch specification dropped (metadata options,
        # volume tags; tests/infra/test_aws_provider_api.py reads them back from EC2)
        market = i["instanceMarketOptions"]
        spot = market["spotOptions"]
        assert market["marketType"] == "spot"
        assert (spot["spotInstanceType"], spot["instanceInterruptionBehavior"]) == ("persistent", "stop")
        days = (datetime.strptime(spot["validUntil"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
                - datetime.now(UTC)).days
        assert days in (89, 90)  # aws.spot_valid_days
        assert i["volumeTags"] == i["tags"]
        assert i["metadataOptions"]["httpTokens"] == "required"
        assert i["associatePublicIpAddress"] is False
        assert i["instanceType"] == "c5n.large"
        assert i["ami"] == "ami-0mock"
        assert i["iamInstanceProfile"] == member_role_name("ax", "eu-west-1")  # one per sweep
        assert not i.get("placementGroup")  # EC2 puts no stop-on-interruption spot in one
        assert i["rootBlockDevice"]["encrypted"] is True
        tags = i["tags"]
        assert tags["managed-by"] == "spotbench" and tags["spotbench-sweep"] == "ax"
        assert tags["spotbench-role"] in ("launcher", "peer")
        assert tags["Name"].startswith("ax-")
        assert tags["spotbench-group"] in tags["Name"]
    assert not mocks.of_type("aws:ec2/placementGroup:PlacementGroup")
    params = [c[1]["name"] for c in mocks.calls if c[0] == "aws:ssm/getParameter:getParameter"]
    assert params == [CPU_AMI_PARAMETER]


def test_members_stop_themselves_only_after_their_first_boot_installed_the_unit(declare):
    """Nothing stops a member while user-data runs (an InstanceState did, right after
    creation: the first scheduled start then only finished the install and idled)."""
    _, mocks = sweep(declare)
    assert not mocks.of_type(STATE)
    for inst in members(mocks):
        assert inst.inputs["instanceInitiatedShutdownBehavior"] == "stop"
        doc = yaml.safe_load(inst.inputs["userData"].removeprefix("#cloud-config\n"))
        assert doc["power_state"]["mode"] == "poweroff" and doc["power_state"]["condition"] is True
        # cloud-init powers off after runcmd: the unit is enabled and the boot id recorded
        assert "systemctl enable spotbench.service" in doc["runcmd"]
        assert any("boot_id" in c for c in doc["runcmd"])
    _, mocks = sweep(declare, provisioning="standard")
    assert not mocks.of_type(STATE)
    assert {i.inputs["instanceInitiatedShutdownBehavior"] for i in mocks.of_type(INSTANCE)} == {"stop"}


def test_known_hosts_output_pins_members_by_ip_and_by_instance_id(declare):
    """`spotbench exec --via ssm` names a member by its instance id: the stack's known_hosts
    must pin the host key under that name too (it had the private IPs only)."""
    from infra.aws import AwsSweep, AwsSweepArgs

    spec = load_spec({"name": "kx", "cloud": "aws", "region": "eu-west-1", "zone": "eu-west-1a",
                      "workload": {"name": "osu"}, "matrix": {"machine_type": ["c5n.large"]},
                      "schedule": {"cron": "0 3 * * *"}})
    seen: list[str] = []
    MOCKS.reset()
    mocks = declare(lambda: AwsSweep(spec.name, AwsSweepArgs(spec=spec)).outputs[
        "known_hosts"].apply(seen.append))
    keys: dict[str, set[tuple[str, ...]]] = {}  # group → host keys pinned for its members
    lines = {line.split()[0]: tuple(line.split()[1:]) for line in seen[0].splitlines()}
    for r in members(mocks):
        instance_id = f"{r.name}-instance-id" if r.type == SPOT else f"{r.name}-id"  # the mocks' ids
        names = {f"[{instance_id}]:2222", f"[{r.inputs['privateIp']}]:2222"}
        assert names <= set(lines), (names, sorted(lines))
        keys.setdefault(r.inputs["tags"]["spotbench-group"], set()).update(lines[n] for n in names)
    assert all(len(k) == 1 for k in keys.values())  # one host key per group, both names
    assert len(lines) == 2 * len(members(mocks))


def test_user_data_runs_the_container_with_the_member_context(declare):
    spec, mocks = sweep(declare)
    by_name = {i.inputs["tags"]["Name"]: i for i in members(mocks)}
    group = spec.plan()[0]
    launcher, peer = group.members
    ud = by_name[launcher.name].inputs["userData"]
    assert "userData" in by_name[launcher.name].secrets  # holds the MPI ssh key
    env = env_of(ud)
    ctx = MemberContext.model_validate_json(env["SPOTBENCH_CONTEXT"])
    assert (ctx.cloud, ctx.name, ctx.role, ctx.group) == ("aws", launcher.name, "launcher", group.id)
    assert ctx.results_url == "s3://res-bucket/runs/ax" and ctx.spot is True
    peer_ip = by_name[peer.name].inputs["privateIp"]
    assert {(p.name, p.host, p.port) for p in ctx.members} >= {(peer.name, peer_ip, 2222)}
    assert "MPICH_PORT_RANGE" not in env and env["AWS_REGION"] == "eu-west-1"
    doc = yaml.safe_load(ud.removeprefix("#cloud-config\n"))
    unit = next(f["content"] for f in doc["write_files"] if f["path"].endswith(".service"))
    assert "docker run --rm --name spotbench --network host" in unit
    assert "--env-file /var/lib/spotbench/env" in unit and "--gpus" not in unit
    login = next(f["content"] for f in doc["write_files"] if f["path"].endswith("/ecr-login"))
    assert "ExecStartPre=/bin/sh /var/lib/spotbench/ecr-login" in unit  # ECR: instance role
    assert "docker login --username AWS" in login and "aws ecr" not in login  # no aws CLI
    assert "boot_id" in unit  # never runs in the creation boot
    assert any(f["path"].endswith("authorized_keys") for f in doc["write_files"])
    assert any(f["path"].endswith("/ssh_host_ed25519_key.pub") for f in doc["write_files"])
    # the private keys come from the sweep's function (`/keys`, signed for service lambda:
    # it answers the group's own entries) at each start, before the chown
    fetch = next(f for f in doc["write_files"] if f["path"] == "/var/lib/spotbench/fetch-keys")
    assert fetch["permissions"] == "0700" and "aws:amz:eu-west-1:lambda" in fetch["content"]
    assert "put ssh_host_ed25519_key /var/lib/spotbench/ssh/ssh_host_ed25519_key" in fetch["content"]
    assert "/keys" in fetch["content"] and "/spotbench/ax/" not in fetch["content"]
    pre = [line for line in unit.splitlines() if line.startswith("ExecStartPre=")]
    assert pre.index("ExecStartPre=/bin/sh /var/lib/spotbench/fetch-keys") < next(
        i for i, line in enumerate(pre) if "chown" in line)
    assert "systemctl enable spotbench.service" in doc["runcmd"]
    assert not any("start" in c and "spotbench" in c for c in doc["runcmd"])


def test_network_has_no_internet_ingress_and_group_members_talk_on_every_port(declare):
    spec, mocks = sweep(declare)
    sgs = mocks.of_type("aws:ec2/securityGroup:SecurityGroup")  # one per run group
    assert sorted(sg.inputs["tags"]["spotbench-group"] for sg in sgs) == sorted(
        g.id for g in spec.plan())
    for sg in sgs:  # each admits only itself, on every TCP/UDP port (MPI's are ephemeral)
        rules = [r for r in mocks.of_type(INGRESS) if r.inputs["securityGroupId"] == f"{sg.name}-id"]
        assert {(r.inputs["ipProtocol"], r.inputs["fromPort"], r.inputs["toPort"])
                for r in rules} == {("tcp", 0, 65535), ("udp", 0, 65535)}
        for r in rules:
            assert r.inputs["referencedSecurityGroupId"] == f"{sg.name}-id"
            assert "cidrIpv4" not in r.inputs
        assert "ingress" not in sg.inputs
    for subnet in mocks.of_type("aws:ec2/subnet:Subnet"):
        assert subnet.inputs["mapPublicIpOnLaunch"] is False
    assert mocks.one("aws:ec2/vpcEndpoint:VpcEndpoint").inputs["serviceName"] == (
        "com.amazonaws.eu-west-1.s3")
    assert len(mocks.of_type("aws:ec2/natGateway:NatGateway")) == 1
    bucket = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
    block = mocks.one(bucket).inputs
    assert all(block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy",
                                          "ignorePublicAcls", "restrictPublicBuckets"))
    sse = mocks.one("aws:s3/bucketServerSideEncryptionConfiguration:"
                    "BucketServerSideEncryptionConfiguration").inputs
    assert sse["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "AES256"
    versioning = mocks.one("aws:s3/bucketVersioning:BucketVersioning").inputs
    assert versioning["versioningConfiguration"]["status"] == "Enabled"


def test_iam_policies_are_scoped(declare):
    spec, mocks = sweep(declare)
    lam = policy(mocks, "-id-lambda")
    ec2 = statement(lam, "StartStopSweepInstances")
    assert sorted(ec2["Action"]) == ["ec2:StartInstances", "ec2:StopInstances"]
    assert ec2["Condition"]["StringEquals"] == {
        "aws:ResourceTag/managed-by": "spotbench", "aws:ResourceTag/spotbench-sweep": "ax"}
    actions = {a for s in lam["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str)
                                                      else s["Action"])}
    assert {a for a in actions if a.startswith("ec2:")} == {
        "ec2:StartInstances", "ec2:StopInstances", "ec2:DescribeInstances"}
    assert statement(lam, "RunLedger")["Resource"] == "arn:aws:s3:::res-bucket/runs/ax/*"

    groups = [g.id for g in spec.plan()]
    assert len(groups) > 1
    # one member role for every group (issue #29): it writes nothing; writes go through the
    # grant role, narrowed per group by the functions' session policy
    inst = policy(mocks, "-id-member")
    assert not any(a.startswith("s3:Put") or a.startswith("ssm:GetParameter")
                   for s in inst["Statement"]
                   for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
    done = statement(inst, "CallDone")
    assert done["Action"] == "lambda:InvokeFunctionUrl" and done["Resource"].endswith("-fn-done")
    assert done["Condition"] == {"StringEquals": {"lambda:FunctionUrlAuthType": "AWS_IAM"}}
    assert statement(inst, "CallDoneInvoke")["Resource"] == done["Resource"]
    assert statement(inst, "PullImage")["Resource"] == (
        "arn:aws:ecr:eu-west-1:123456789012:repository/spotbench/osu")
    assert not any("ec2:" in json.dumps(s) for s in inst["Statement"])
    grant = policy(mocks, "-id-grant")
    assert statement(grant, "PutResults")["Resource"] == "arn:aws:s3:::res-bucket/runs/ax/runs/*"
    assert statement(lam, "MintGrants")["Resource"].endswith("ax-id-grant")
    profiles = {p.inputs["name"]: p.inputs["role"] for p in mocks.of_type(PROFILE)}
    assert len(profiles) == 1 and set(profiles) == {member_role_name("ax", "eu-west-1")}

    sched = policy(mocks, "-id-scheduler")
    assert sched["Statement"] == [{
        "Sid": "InvokeStartStop", "Effect": "Allow", "Action": "lambda:InvokeFunction",
        "Resource": [f"arn:aws:lambda:us-east-1:123456789012:ax-fn-{a}" for a in ("start", "stop")],
    }, {  # a tick EventBridge could not deliver goes to the sweep's failure queue (#23 item 6)
        "Sid": "DeadLetters", "Effect": "Allow", "Action": "sqs:SendMessage",
        "Resource": "arn:aws:sqs:us-east-1:123456789012:ax-failed-queue",
    }]
    roles = {r.name: json.loads(r.inputs["assumeRolePolicy"])["Statement"][0]["Principal"]
             for r in mocks.of_type("aws:iam/role:Role")}
    assert roles == {"ax-id-member": {"Service": "ec2.amazonaws.com"},
                     "ax-id-grant": {"AWS": "arn:aws:iam:us-east-1:123456789012:ax-id-lambda"},
                     "ax-id-lambda": {"Service": "lambda.amazonaws.com"},
                     "ax-id-scheduler": {"Service": "scheduler.amazonaws.com"}}


def test_functions_done_url_and_schedules(declare):
    spec, mocks = sweep(declare)
    fns = {f.inputs["name"]: f.inputs for f in mocks.of_type(FUNCTION)}
    assert set(fns) == {"ax-start", "ax-stop", "ax-done"}
    for name, f in fns.items():
        assert f["handler"] == "functions.lambda_handler.handler"
        env = f["environment"]["variables"]
        assert env["SPOTBENCH_ACTION"] == name.removeprefix("ax-")
        assert env["SPOTBENCH_CLOUD"] == "aws"
        assert load_spec(json.loads(env["SPOTBENCH_SPEC"])) == spec
        assert env["SPOTBENCH_RESULTS_URL"] == "s3://res-bucket/runs/ax"
    url = mocks.one(URL)
    assert url.inputs["authorizationType"] == "AWS_IAM"
    assert url.inputs["functionName"] == "ax-done"

    schedules = {s.inputs["name"]: s.inputs for s in mocks.of_type(SCHEDULE)}
    start, stop = schedules["ax-start"], schedules["ax-stop"]
    assert start["scheduleExpression"] == "cron(0 3 ? * MON-FRI *)"
    assert stop["scheduleExpression"] == "cron(45 3 ? * MON-FRI *)"
    for s, action in ((start, "start"), (stop, "stop")):
        assert s["scheduleExpressionTimezone"] == "Europe/Berlin"
        assert s["flexibleTimeWindow"] == {"mode": "OFF"}
        target = s["target"]
        assert target["arn"].endswith(f"-fn-{action}")
        assert target["roleArn"].endswith("-id-scheduler")
        assert target["retryPolicy"]["maximumRetryAttempts"] >= 1
        payload = json.loads(target["input"])
        assert payload["schedule"] == "<aws.scheduler.schedule-arn>"
    assert json.loads(stop["target"]["input"])["body"] == {"reason": "deadline"}


def test_lambda_logs_are_declared_and_the_role_writes_only_its_own(declare):
    """The program declares each function's log group (retention, tags), so the Lambda role
    needs no logs:CreateLogGroup; its log grant names exactly those groups: `ax-*` would
    also match sweep `ax-gpu`'s functions."""
    _, mocks = sweep(declare)
    groups = {g.inputs["name"]: g.inputs for g in mocks.of_type("aws:cloudwatch/logGroup:LogGroup")}
    names = {f.inputs["name"] for f in mocks.of_type(FUNCTION)}
    assert set(groups) == {f"/aws/lambda/{n}" for n in names}
    assert all(g["retentionInDays"] > 0 for g in groups.values())
    logs = statement(policy(mocks, "-id-lambda"), "Logs")
    assert sorted(logs["Action"]) == ["logs:CreateLogStream", "logs:PutLogEvents"]
    assert sorted(logs["Resource"]) == sorted(
        f"arn:aws:logs:*:*:log-group:{g}:*" for g in groups)


def test_on_demand_spread_and_gpu_variants(declare):
    _, mocks = sweep(declare, provisioning="standard", placement="compact")
    for inst in mocks.of_type(INSTANCE):
        assert inst.inputs["placementGroup"].endswith("-compact")
    strategies = {d.inputs["strategy"]
                  for d in mocks.of_type("aws:ec2/placementGroup:PlacementGroup")}
    assert strategies == {"cluster"}

    _, mocks = sweep(declare, provisioning="standard", placement="spread")
    assert mocks.of_type(INSTANCE) and not mocks.of_type(SPOT) and not mocks.of_type(TAG)
    assert not any(i.inputs.get("instanceMarketOptions") for i in mocks.of_type(INSTANCE))
    strategies = {d.inputs["strategy"]
                  for d in mocks.of_type("aws:ec2/placementGroup:PlacementGroup")}
    assert strategies == {"spread"}

    _, mocks = sweep(declare, name="gx", workload={"name": "tf-mnist", "workers": 1},
                     matrix={"machine_type": ["g4dn.xlarge"]}, placement="none", image=None,
                     results=None)
    assert not mocks.of_type("aws:ec2/placementGroup:PlacementGroup")
    params = [c[1]["name"] for c in mocks.calls if c[0] == "aws:ssm/getParameter:getParameter"]
    assert params == [GPU_AMI_PARAMETER]
    for inst in members(mocks):
        ctx = MemberContext.model_validate_json(env_of(inst.inputs["userData"])["SPOTBENCH_CONTEXT"])
        assert {p.port for p in ctx.members} == {2223}
        assert "--gpus all" in inst.inputs["userData"]
        assert "gx-results-" in mocks.one("aws:s3/bucket:Bucket").inputs["bucketPrefix"]
    ports = {(r.inputs["ipProtocol"], r.inputs["fromPort"], r.inputs["toPort"])
             for r in mocks.of_type(INGRESS)}
    assert ports == {("tcp", 0, 65535), ("udp", 0, 65535)}


def test_bad_schedules_fail_with_the_reason(declare):
    with pytest.raises(Exception, match="deadline"):
        sweep(declare, schedule={"cron": "0 * * * *"}, deadline="2h")
    with pytest.raises(Exception, match="EventBridge allows one"):
        sweep(declare, schedule={"cron": "0 3 1 * 1"})


def test_aws_cron():
    assert aws_cron("0 3 * * *") == "cron(0 3 * * ? *)"
    assert aws_cron("30 5 * * 1-5") == "cron(30 5 ? * MON-FRI *)"
    assert aws_cron("0 6 * * 0,6") == "cron(0 6 ? * SUN,SAT *)"
    assert aws_cron("0 6 * * sun") == "cron(0 6 ? * SUN *)"
    assert aws_cron("15 1 1 * *") == "cron(15 1 1 * ? *)"
    with pytest.raises(CronShiftError, match="EventBridge allows one"):
        aws_cron("0 3 1 * 1")


def test_the_example_stacks_run_through_the_program(run_program):
    for stack in ("aws-osu", "aws-tf-gpu"):
        config = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
        mocks = run_program({k: str(v) for k, v in config.items()})
        assert members(mocks) and mocks.of_type(SCHEDULE)


def test_spotbench_preview_cloud_aws():
    from spotbench.cli import app

    result = CliRunner().invoke(app, ["preview", str(ROOT / "examples/aws-osu.yaml"),
                                      "--cloud", "aws", "--json"])
    assert result.exit_code == 0, result.output
    assert INSTANCE in result.output  # on-demand: the example compares placement groups
    assert "c5n.18xlarge" in result.output


def test_example_compares_cluster_and_spread_placement_in_one_stack(run_program):
    config = yaml.safe_load((ROOT / "Pulumi.aws-osu.yaml").read_text())["config"]
    mocks = run_program({k: str(v) for k, v in config.items()})
    groups = mocks.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert sorted(g.inputs["strategy"] for g in groups) == ["cluster"] * 3 + ["spread"] * 3
    by_name = {g.inputs["name"]: g.inputs["strategy"] for g in groups}
    for inst in members(mocks):  # each instance sits in its own group's placement group
        assert inst.inputs["placementGroup"].startswith(inst.inputs["tags"]["spotbench-group"])
        assert by_name[inst.inputs["placementGroup"]] in ("cluster", "spread")


def test_spec_labels_are_tags_on_every_tagged_resource(declare):
    """`labels:` (GCP labels) are AWS tags: on the provider's default tags, on every resource
    the program tags itself (instances, their volumes, placement groups, network, bucket,
    roles, functions), while spotbench's own tags stay what teardown selects on."""
    labels = {"team": "ml", "cost-center": "bench-42"}
    spec, mocks = sweep(declare, labels=labels, provisioning="standard", placement="compact")
    (provider,) = mocks.of_type("pulumi:providers:aws")
    default_tags = json.loads(provider.inputs["defaultTags"])["tags"]  # the provider's JSON input
    assert labels.items() <= default_tags.items()
    tagged = [d for d in mocks.declared if d.inputs.get("tags")]
    kinds = {d.type for d in tagged}
    assert {INSTANCE, "aws:ec2/placementGroup:PlacementGroup", "aws:s3/bucket:Bucket",
            "aws:ec2/vpc:Vpc", "aws:iam/role:Role", "aws:lambda/function:Function"} <= kinds, kinds
    missing = [(d.type, d.name) for d in tagged if not labels.items() <= d.inputs["tags"].items()]
    assert missing == []
    for vm in mocks.of_type(INSTANCE):
        assert labels.items() <= vm.inputs["volumeTags"].items()
        assert vm.inputs["tags"]["spotbench-sweep"] == spec.name
        assert vm.inputs["tags"]["managed-by"] == "spotbench"


def test_deploy_gpu_members_boot_the_al2023_gpu_ami_after_its_driver_loads(declare):
    """GPU members boot the ECS-optimized Amazon Linux 2023 GPU AMI (the AL2 GPU AMI reached
    its end of life on 2026-06-30), CPU members the AL2023 one; a GPU member's workload unit
    waits for the AMI's `nvidia-kmod-load.service`, which loads the NVIDIA kernel module at
    boot (before ecs.service only, and ECS is disabled here)."""
    from infra.aws.user_data import GPU_DRIVER_UNIT

    assert GPU_AMI_PARAMETER == "/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id"
    assert CPU_AMI_PARAMETER == "/aws/service/ecs/optimized-ami/amazon-linux-2023/recommended/image_id"
    assert GPU_DRIVER_UNIT == "nvidia-kmod-load.service"
    for machine, gpu in (("g5.xlarge", True), ("c5.large", False)):
        _, mocks = sweep(declare, name="gx", workload={"name": "tf-mnist", "workers": 1},
                         matrix={"machine_type": [machine]}, placement="none", image=None,
                         results=None)
        params = [c[1]["name"] for c in mocks.calls if c[0] == "aws:ssm/getParameter:getParameter"]
        assert params == [GPU_AMI_PARAMETER if gpu else CPU_AMI_PARAMETER]
        for inst in members(mocks):
            doc = yaml.safe_load(inst.inputs["userData"].removeprefix("#cloud-config\n"))
            unit = next(f["content"] for f in doc["write_files"] if f["path"].endswith(".service"))
            after = next(line for line in unit.splitlines() if line.startswith("After="))
            wants = next(line for line in unit.splitlines() if line.startswith("Wants="))
            assert (GPU_DRIVER_UNIT in after.split("=", 1)[1].split()) is gpu, unit
            assert (GPU_DRIVER_UNIT in wants.split("=", 1)[1].split()) is gpu, unit
            assert "docker.service" in after and "network-online.target" in wants


@pytest.mark.parametrize("parameter", [
    "/aws/service/ecs/optimized-ami/amazon-linux-2/gpu/recommended/image_id",
    "/aws/service/ecs/optimized-ami/amazon-linux-2/recommended/image_id",
    "/aws/service/ami-amazon-linux-latest/amzn2-ami-hvm-x86_64-gp2",
])
def test_deploy_an_amazon_linux_2_ami_parameter_is_refused_at_plan(parameter):
    """`aws.ami_ssm_parameter` naming an AL2 image is refused when the spec loads, with the
    field, the value, the end-of-life date and the fix; an AL2023 one is taken."""
    from spotbench.spec import SpecError

    data = {"name": "ax", "cloud": "aws", "region": "eu-west-1", "zone": "eu-west-1a",
            "workload": {"name": "osu"}, "matrix": {"machine_type": ["c5n.large"]}}
    with pytest.raises(SpecError) as err:
        load_spec({**data, "aws": {"ami_ssm_parameter": parameter}})
    text = str(err.value)
    assert "ami_ssm_parameter" in text and parameter in text and "2026-06-30" in text
    assert CPU_AMI_PARAMETER in text and GPU_AMI_PARAMETER in text
    ok = "/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id"
    assert load_spec({**data, "aws": {"ami_ssm_parameter": ok}}).aws.ami_ssm_parameter == ok
