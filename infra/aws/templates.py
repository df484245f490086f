"""`lifecycle: created`: a run group's launch templates, and no instances.

The start function creates the group's instances at start with an instant EC2 Fleet
(`spotbench/clouds/aws/fleet.py`) in ONE candidate Availability Zone, and `done` / `stop` /
the deadline terminate them. Per member and candidate zone, one `aws.ec2.LaunchTemplate`
carrying what an instance of the stopped lifecycle carries (`infra/aws/instances.py`):

- the AMI (the ECS-optimized one from its SSM parameter), the instance type, the sweep's
  member instance profile, IMDSv2 only, an encrypted gp3 root volume deleted with it;
- network interface 0 in the zone's members' subnet (`infra/aws/network.py`) with the
  member's fixed private IP there, the group's security group, no public IP: the member
  context lists every peer's address, so the addresses of a zone are known before launch;
- the user data of a created member: its first boot runs the workload (`user_data(created=
  True)`), the dead-man switch powers it off at the deadline + grace, and a power-off
  *terminates* it (`instance_initiated_shutdown_behavior = terminate`): nothing is left;
- `TagSpecifications` for `instance` and `volume` with the sweep's tags, the group's and
  `Name` = the plan's member name (what `spotbench.auth.instance.group_of` checks): the
  provider's `default_tags` tag the template itself, never what it launches (pulumi-aws
  LaunchTemplate `tag_specifications` docs; docs/platform.md).

The template's own tags say what the driver needs: the sweep, the group, the member, the
zone, the subnet and the market (`spot` / `on-demand`, which the fleet request sets: the
template carries no market options, docs/aws.md).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.aws.instances import has_gpu, machine_type
from infra.aws.user_data import DEADMAN_GRACE_S, SshKeys, check_launch, user_data
from infra.members import member_contexts, workload_env
from infra.user_image import user_step
from spotbench.clouds.aws.identity import function_url_path
from spotbench.clouds.aws.fleet import MARKET_TAG, MEMBER_TAG, SUBNET_TAG, ZONE_TAG
from spotbench.plan import RunGroup
from spotbench.spec import SweepSpec

ROOT_DEVICE = "/dev/xvda"  # the ECS-optimized AMIs' root device


@dataclass
class AwsGroupTemplatesArgs:
    spec: SweepSpec
    group: RunGroup
    ips: Mapping[str, dict[str, str]]  # zone → member name → private IP in that zone's subnet
    subnet_ids: Mapping[str, pulumi.Input[str]]  # zone → members' subnet id
    security_group_id: pulumi.Input[str]
    instance_profile: pulumi.Input[str]
    amis: Mapping[bool, pulumi.Input[str]]  # has GPU → AMI id
    image: pulumi.Input[str]
    results_url: pulumi.Input[str]
    done_url: pulumi.Input[str]
    ssh: pulumi.Output[SshKeys] | None = None


class AwsGroupTemplates(pulumi.ComponentResource):
    def __init__(self, name: str, args: AwsGroupTemplatesArgs,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotbench:aws:GroupTemplates", name, None, opts)
        spec, group = args.spec, args.group
        gpus = {m.name: has_gpu(machine_type(group, m), group.accelerator) for m in group.members}
        ssh = args.ssh if args.ssh is not None else pulumi.Output.from_input(None)
        extra = {**workload_env(group.workload), "AWS_REGION": spec.region or "",
                 "AWS_DEFAULT_REGION": spec.region or ""}

        def render(zone: str):
            def docs(values: list) -> dict[str, str]:
                image, results_url, done_url, keys = values
                contexts = member_contexts(
                    group, args.ips[zone], cloud="aws", results_url=results_url,
                    done_url=done_url, zone=zone,
                    deadline_s=int(spec.deadline.total_seconds()))
                raw = {n: user_data(
                    image=image, env={**ctx.to_env(), **extra}, gpu=gpus[n], ssh=keys,
                    keys_url=(spec.region or "", function_url_path(done_url, "keys")),
                    user=user_step(group, spec.image), created=True,
                    max_run_s=int(spec.deadline.total_seconds()) + DEADMAN_GRACE_S,
                ) for n, ctx in contexts.items()}
                for m in group.members:  # the raw document counts, not its base64
                    check_launch(f"group {group.id} member {m.name} template {m.name}-{zone}",
                                 raw[m.name], {**spec.labels, **group.member_labels(m), "Name": m.name})
                return {n: base64.b64encode(doc.encode()).decode() for n, doc in raw.items()}

            out = pulumi.Output.all(args.image, args.results_url, args.done_url, ssh).apply(docs)
            return pulumi.Output.secret(out) if args.ssh is not None else out

        self.templates: dict[tuple[str, str], aws.ec2.LaunchTemplate] = {}
        for zone, subnet in args.subnet_ids.items():
            documents = render(zone)
            for m in group.members:
                short = m.name.removeprefix(group.id + "-")
                tags = {**spec.labels, **group.member_labels(m), "Name": m.name}
                self.templates[(m.name, zone)] = aws.ec2.LaunchTemplate(
                    f"{name}-{short}-{zone}", name=f"{m.name}-{zone}",
                    description=f"spotbench {spec.name}: member {m.name} in {zone}",
                    image_id=args.amis[gpus[m.name]],
                    instance_type=machine_type(group, m),
                    iam_instance_profile={"name": args.instance_profile},
                    user_data=documents.apply(lambda d, n=m.name: d[n]),
                    metadata_options={"http_tokens": "required", "http_endpoint": "enabled",
                                      "http_put_response_hop_limit": 2},
                    block_device_mappings=[{"device_name": ROOT_DEVICE, "ebs": {
                        "volume_size": spec.aws.root_volume_gb, "volume_type": "gp3",
                        "encrypted": "true", "delete_on_termination": "true"}}],
                    network_interfaces=[{
                        "device_index": 0, "subnet_id": subnet,
                        "private_ip_address": args.ips[zone][m.name],
                        "security_groups": [args.security_group_id],
                        "associate_public_ip_address": "false",
                        "delete_on_termination": "true"}],
                    instance_initiated_shutdown_behavior="terminate",  # the deadman leaves nothing
                    tag_specifications=[{"resource_type": kind, "tags": tags}
                                        for kind in ("instance", "volume")],
                    tags={**tags, MEMBER_TAG: m.name, ZONE_TAG: zone, SUBNET_TAG: subnet,
                          MARKET_TAG: "spot" if m.spot else "on-demand"},  # its role's
                    update_default_version=True,
                    opts=pulumi.ResourceOptions(parent=self),
                )
        ids = {f"{member}@{zone}": t.id for (member, zone), t in self.templates.items()}
        self.template_ids = pulumi.Output.all(*ids.values()).apply(
            lambda values: dict(zip(ids, values)))
        self.register_outputs({"launch_templates": self.template_ids})
