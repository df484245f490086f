"""One run group's members: EC2 instances that stop after their first boot, started later
by the scheduler.

Per member: the spec's instance type; spot as an `Instance` with *persistent* spot market
options that *stop* on interruption (so a group can be stopped and started again, like GCE
spot VMs), valid for `aws.spot_valid_days` (EC2 restarts an interrupted member only until
then); or on-demand. Not a `SpotInstanceRequest`: its launch specification cannot carry
metadata options, volume tags or the shutdown behaviour, so the provider drops them
(tests/infra/test_aws_provider_api.py);
the ECS-optimized Amazon Linux 2023 AMI (its GPU variant on GPU types) from its public SSM
parameter; a fixed
private IP; IMDSv2 only; no public IP; the sweep's tags (+ `Name`); shutdown from the OS
stops (not terminates). Each member powers itself off at the end of its first boot
(cloud-init `power_state`, `infra/aws/user_data.py`), once the workload unit is installed:
nothing stops it while user-data still runs (an early stop made the first scheduled start
finish that boot instead of running the workload). `ignore_changes` on the AMI (AWS
re-points the SSM parameter) keeps a later `pulumi up` from replacing members mid-sweep.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

from infra.aws.user_data import DEADMAN_GRACE_S, SshKeys, check_launch, user_data
from infra.members import member_contexts, workload_env
from infra.user_image import user_step
from spotbench.clouds.aws.identity import function_url_path
from spotbench.facts.aws import CPU_AMI_PARAMETER, GPU_AMI_PARAMETER, has_gpu  # noqa: F401 - the AMIs' home
from spotbench.facts.aws import ami_parameter as _ami_parameter
from spotbench.plan import Member, RunGroup
from spotbench.spec import SweepSpec

PLACEMENT_STRATEGY = {"spread": "spread", "compact": "cluster"}
FIRST_HOST = 10  # AWS reserves .0-.3 and the last address of a subnet; leave a margin


def machine_type(group: RunGroup, member: Member) -> str:
    return member.machine_type or group.machine_type


def ami_parameter(spec: SweepSpec, gpu: bool) -> str:
    return _ami_parameter(spec.aws.ami_ssm_parameter, gpu)


def member_ips(groups: list[RunGroup], subnet_cidr: str) -> dict[str, str]:
    """A fixed private IP for every member of every group, stable for a given plan."""
    net = ipaddress.ip_network(subnet_cidr)
    names = [m.name for g in groups for m in g.members]
    usable = net.num_addresses - FIRST_HOST - 1
    if len(names) > usable:
        raise pulumi.RunError(
            f"{len(names)} members do not fit subnet {subnet_cidr} ({usable} addresses); "
            "set a larger aws.subnet_cidr"
        )
    return {n: str(net.network_address + FIRST_HOST + i) for i, n in enumerate(names)}


def valid_until(days: int, now: datetime | None = None) -> str:
    """The spot requests' `ValidUntil` (RFC 3339, UTC, whole seconds)."""
    end = (now or datetime.now(UTC)) + timedelta(days=days)
    return end.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class AwsRunGroupArgs:
    spec: SweepSpec
    group: RunGroup
    ips: dict[str, str]
    subnet_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]
    instance_profile: pulumi.Input[str]
    amis: Mapping[bool, pulumi.Input[str]]  # has GPU → AMI id
    image: pulumi.Input[str]
    results_url: pulumi.Input[str]
    done_url: pulumi.Input[str]
    ssh: pulumi.Output[SshKeys] | None = None


class AwsRunGroup(pulumi.ComponentResource):
    def __init__(self, name: str, args: AwsRunGroupArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotbench:aws:RunGroup", name, None, opts)
        spec, group = args.spec, args.group
        gpus = {m.name: has_gpu(machine_type(group, m), group.accelerator) for m in group.members}
        self.placement_group = None
        if group.placement in PLACEMENT_STRATEGY:
            self.placement_group = aws.ec2.PlacementGroup(
                f"{name}-placement", name=f"{group.id}-{group.placement}",
                strategy=PLACEMENT_STRATEGY[group.placement], tags={**spec.labels, **group.labels},
                opts=pulumi.ResourceOptions(parent=self),
            )
        ssh = args.ssh if args.ssh is not None else pulumi.Output.from_input(None)
        extra = {**workload_env(group.workload), "AWS_REGION": spec.region or "",
                 "AWS_DEFAULT_REGION": spec.region or ""}

        def render(values: list) -> dict[str, str]:
            image, results_url, done_url, keys = values
            contexts = member_contexts(group, args.ips, cloud="aws", results_url=results_url,
                                       done_url=done_url, zone=spec.zone,
                                       deadline_s=int(spec.deadline.total_seconds()))
            documents = {n: user_data(image=image, env={**ctx.to_env(), **extra}, gpu=gpus[n],
                                      ssh=keys, keys_url=(spec.region or "",
                                                          function_url_path(done_url, "keys")),
                                      user=user_step(group, spec.image),
                                      max_run_s=int(spec.deadline.total_seconds()) + DEADMAN_GRACE_S)
                         for n, ctx in contexts.items()}
            for m in group.members:
                check_launch(f"group {group.id} member {m.name}", documents[m.name],
                             {**spec.labels, **group.member_labels(m), "Name": m.name})
            return documents

        documents = pulumi.Output.all(args.image, args.results_url, args.done_url, ssh).apply(render)
        if args.ssh is not None:
            documents = pulumi.Output.secret(documents)

        self.instances: dict[str, pulumi.CustomResource] = {}
        ids: dict[str, pulumi.Output[str]] = {}
        for m in group.members:
            short = m.name.removeprefix(group.id + "-")
            tags = {**spec.labels, **group.member_labels(m), "Name": m.name}
            launch = dict(
                ami=args.amis[gpus[m.name]],
                instance_type=machine_type(group, m),
                subnet_id=args.subnet_id,
                private_ip=args.ips[m.name],
                vpc_security_group_ids=[args.security_group_id],
                associate_public_ip_address=False,
                iam_instance_profile=args.instance_profile,
                user_data=documents.apply(lambda docs, n=m.name: docs[n]),
                user_data_replace_on_change=True,
                metadata_options={"http_tokens": "required", "http_endpoint": "enabled",
                                  "http_put_response_hop_limit": 2},
                root_block_device={"volume_size": spec.aws.root_volume_gb, "volume_type": "gp3",
                                   "encrypted": True, "delete_on_termination": True},
                placement_group=self.placement_group.name if self.placement_group else None,
                volume_tags=tags,
                instance_initiated_shutdown_behavior="stop",  # the first boot's power-off
            )
            if m.spot:  # its role's provisioning (`role_provisioning`): standard is on-demand
                # A persistent spot instance that stops on interruption, declared as an
                # `Instance` with spot market options: `RunInstances` carries the metadata
                # options, volume tags and shutdown behaviour (a `SpotInstanceRequest`'s
                # launch specification has no field for them: the provider dropped them).
                # Its spot request carries no tags; teardown cancels it through the instance
                # (`SpotInstanceRequestId`) before terminating (docs/aws.md, Tear down).
                market = {"market_type": "spot", "spot_options": {
                    "spot_instance_type": "persistent", "instance_interruption_behavior": "stop",
                    "valid_until": valid_until(spec.aws.spot_valid_days)}}
                ignore = ["ami", "instanceMarketOptions.spotOptions.validUntil"]
            else:
                market, ignore = None, ["ami"]
            instance = aws.ec2.Instance(
                f"{name}-{short}", **launch, tags=tags, instance_market_options=market,
                opts=pulumi.ResourceOptions(parent=self, ignore_changes=ignore),
            )
            self.instances[m.name] = instance
            ids[m.name] = instance.id
        self.member_ids = ids  # member name → instance id
        self.instance_ids = pulumi.Output.all(*ids.values()).apply(
            lambda values: dict(zip(ids, values)))
        self.register_outputs({"instances": self.instance_ids})
