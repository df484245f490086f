"""One run group in the created lifecycle (`lifecycle: created`): an instance template per
role, no instances. The start function creates the members from them (regionInstances.
bulkInsert, `spotbench.clouds.gcp.created`) in one zone with capacity; stop/done delete them.

A template carries what today's VM carries: the member service account, the COS image, the
boot document (user-data), the sweep's and the group's labels (the role's), spot scheduling
with `max_run_duration` (the deadline) and its termination action, no external IP. What
differs per member is not in a template: bulkInsert's `perInstanceProperties` name each
instance (the plan's member names, which `spotbench.auth.instance.group_of` checks); the
document holds every member's env of the role, and the VM picks its own by its instance name
at boot (`cloud_init.pick_member_script`). No static internal address per member (bulkInsert
cannot give one per instance): peers reach each other by instance name, which GCE's internal
DNS resolves within the zone (a group never spans zones), and the host firewall admits the
sweep's subnet (the VPC rule still admits only the group's tag).

Regional templates (`RegionInstanceTemplate`), not global: a template names the sweep's
subnet, which is regional, so it can only create VMs in that region anyway; a regional one
says so, and regionInstances.bulkInsert takes it (docs/platform.md, "Created lifecycle").
Candidates in several regions: one template per role in each candidate region, naming that
region's subnet, with the same GCE name (templates are regional objects); a group has
roles × regions templates (docs/gcp.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.gcp.cloud_init import METADATA_FLAGS, check_metadata, check_names, user_data
from infra.gcp.functions import GCSFS_ENV
from infra.gcp.network import group_tag, ssh_ports
from infra.members import member_contexts, workload_env
from infra.user_image import user_step
from spotbench.clouds.gcp import template_name
from spotbench.member import MEMBER_KEY


OWN_KEYS = (MEMBER_KEY, "SPOTBENCH_ROLE", "SPOTBENCH_RANK")  # a member's own env lines


def member_lines(member: Any) -> dict[str, str]:
    """The env lines a created member adds to its group's (`pick_member_script`)."""
    return {MEMBER_KEY: member.name, "SPOTBENCH_ROLE": member.role,
            "SPOTBENCH_RANK": str(member.rank)}


def role_members(args: Any) -> dict[str, list]:
    """role → the group's members of that role, in rank order."""
    out: dict[str, list] = {}
    for m in args.group.members:
        out.setdefault(m.role, []).append(m)
    return out


def group_templates(name: str, args: Any, scheduling: Mapping[str, dict], policies: list,
                    network_cidr: str, parent: pulumi.Resource,
                    key: str = "") -> dict[str, gcp.compute.RegionInstanceTemplate]:
    """role → the template its members are created from in `args.region`, on `args.subnet`
    (whose range `network_cidr` the host firewall admits as peers), with the role's
    `scheduling` (its provisioning: a role is one template, one bulkInsert, so a group that
    mixes spot and standard roles never mixes them in one request). `key` tells the Pulumi
    names of several regions' templates apart (the GCE name is the same in each region)."""
    spec, group = args.spec, args.group
    gpu = group.accelerator_count if group.accelerator else 0
    names = [m.name for m in group.members]
    ssh = args.ssh if args.ssh is not None else pulumi.Output.from_input(None)

    def render(keys: object) -> dict[str, str]:
        contexts = member_contexts(
            group, {n: n for n in names}, cloud="gcp", results_url=args.results_url,
            done_url=args.done_url, zone=None,
            deadline_s=int(spec.deadline.total_seconds()))
        extra = {**workload_env(group.workload), **GCSFS_ENV}
        documents = {}
        for role, members in role_members(args).items():
            # the group's env once (its first member's context: every peer, the params),
            # each member's own lines apart: linear in the group's size (MEMBER_KEY)
            shared = {k: v for k, v in {**contexts[members[0].name].to_env(), **extra}.items()
                      if k not in OWN_KEYS}
            documents[role] = user_data(
                image=args.image, env=shared, gpu_count=gpu, ssh=keys,  # type: ignore[arg-type]
                user=user_step(group, spec.image), secrets=args.secrets,
                operator_ports=ssh_ports(group.workload), peers=[network_cidr],
                user_env_secret=args.user_env_secret, grant_url=args.grant_url,
                member_envs={m.name: member_lines(m) for m in members})
            check_metadata(f"group {group.id} template {template_name(group.id, role)}",
                           documents[role])
        return documents

    documents = ssh.apply(render)
    if args.ssh is not None:
        documents = pulumi.Output.secret(documents)
    out = {}
    for role, members in role_members(args).items():
        labels = {**spec.labels, **group.member_labels(members[0])}
        check_names(f"group {group.id} role {role}", template_name(group.id, role), labels)
        out[role] = gcp.compute.RegionInstanceTemplate(
            f"{name}-{role}-template{key}",
            name=template_name(group.id, role),
            region=args.region,
            project=args.project,
            description=f"spotbench {spec.name}: the {role} members of {group.id}",
            machine_type=members[0].machine_type,
            labels=labels,
            tags=[args.tag, group_tag(group.id)],
            disks=[{"boot": True, "auto_delete": True, "source_image": f"cos-cloud/{spec.gcp.image_family}",
                    "disk_size_gb": spec.gcp.boot_disk_gb, "disk_type": "pd-balanced",
                    "labels": labels}],
            network_interfaces=[{"subnetwork": args.subnet}],  # no access config: no external IP
            guest_accelerators=[{"type": group.accelerator, "count": gpu}] if gpu else None,
            scheduling=scheduling[role],
            # one self link (the provider types it a string: "currently a max of 1 resource
            # policy"); a list failed the deploy of every spread / compact created group
            resource_policies=policies[0] if policies else None,
            service_account={"email": args.vm_account, "scopes": ["cloud-platform"]},
            metadata=_metadata(documents, role),
            opts=pulumi.ResourceOptions(parent=parent, depends_on=list(args.after)),
        )
    return out


def _metadata(documents: pulumi.Output, role: str) -> Mapping[str, pulumi.Input[str]]:
    return {"user-data": documents.apply(lambda d: d[role]), **METADATA_FLAGS}
