"""One run group: a static internal IP and a stopped VM per member, plus its placement.

VMs boot Container-Optimized OS and run the workload through cloud-init (cloud_init.py).
They are created stopped (`desired_status: TERMINATED`); `desired_status` is ignored on
later updates so a `pulumi up` never stops or restarts a group the scheduler started, and
`allow_stopping_for_update` is off so an update that needs a stop fails instead.
`max_run_duration` (= the spec's deadline) is the platform's own dead-man switch. At it, or
at a preemption, GCE STOPs a stopped-lifecycle VM (started again by the next run) and
DELETEs a created-lifecycle one (made again from its template; nothing left billed: no
stopped VM, no boot disk). docs/platform.md, "Created lifecycle".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pulumi
import pulumi_gcp as gcp

from infra.members import member_contexts, workload_env
from infra.gcp.cloud_init import METADATA_FLAGS, check_metadata, check_names, user_data
from infra.gcp.functions import GCSFS_ENV
from infra.gcp.network import group_tag, ssh_ports
from infra.gcp.templates import group_templates
from infra.user_image import user_step
from spotbench.catalog import GCP_CATALOG
from spotbench.catalog import GCP_COMPACT_SERIES as COMPACT_SERIES
from spotbench.plan import RunGroup
from spotbench.spec import SweepSpec

MAX_AVAILABILITY_DOMAINS = 8
PREEMPTIBLE_NOTE = (
    "provisioning 'preemptible' deploys as SPOT VMs on GCP: legacy preemptible VMs cannot "
    "have max_run_duration (the sweep's deadline) or a termination action; Spot VMs are "
    "their successor at the same price. Write `provisioning: spot` to silence this note."
)


def scheduling(spec: SweepSpec, *, gpu: bool, compact: bool, domain: int | None,
               provisioning: str | None = None) -> dict:
    """A VM's (or a role's template's) scheduling: `provisioning` is the member's (its
    role's, `Member.provisioning`; default the spec's). A STANDARD VM keeps the deadline's
    `max_run_duration` and termination action: GCE limits the run time of any VM but a
    legacy preemptible one (docs/platform.md, "Per-role provisioning")."""
    s: dict = {
        "max_run_duration": {"seconds": max(30, int(spec.deadline.total_seconds()))},
        # created: deleted at the deadline or a preemption (no disk left billed); the
        # driver still reports a member GCE deleted so (spotbench.clouds.gcp.created)
        "instance_termination_action": "DELETE" if spec.lifecycle == "created" else "STOP",
    }
    if (provisioning or spec.provisioning) in ("spot", "preemptible"):
        # Legacy preemptible VMs cannot take max_run_duration / a termination action (the
        # Compute API rejects the combination); Spot is their successor at the same price
        # without the 24 h limit, so `preemptible` deploys as SPOT (see PREEMPTIBLE_NOTE).
        s.update(provisioning_model="SPOT", preemptible=True, automatic_restart=False,
                 on_host_maintenance="TERMINATE")
    else:
        s.update(provisioning_model="STANDARD", preemptible=False, automatic_restart=True,
                 on_host_maintenance="TERMINATE" if gpu or compact else "MIGRATE")
    if domain is not None:
        s["availability_domain"] = domain
    return s


@dataclass
class GcpRunGroupArgs:
    spec: SweepSpec
    group: RunGroup
    project: str
    region: str
    zone: str
    subnet: pulumi.Input[str]
    tag: str
    vm_account: pulumi.Input[str]
    results_url: str
    done_url: str
    grant_url: str
    image: str
    ssh: pulumi.Output | None = None  # Output[SshKeys] (secret) for MPI workloads
    secrets: Mapping[str, str] | None = None  # key file → its file id at `grant` (fetched at boot)
    user_env_secret: str | None = None  # a `container` group's env file id (fetched at boot)
    after: list[pulumi.Resource] = field(default_factory=list)  # e.g. the secrets and grants
    # the created lifecycle: each VM region's subnet and range (default: `region`'s `subnet`)
    subnets: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    cidrs: Mapping[str, str] = field(default_factory=dict)


class GcpRunGroup(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: GcpRunGroupArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotbench:gcp:RunGroup", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        spec, group = args.spec, args.group
        compact = group.placement == "compact"
        if compact and GCP_CATALOG.series(group.machine_type) not in COMPACT_SERIES:
            raise pulumi.RunError(
                f"group {group.id}: placement 'compact' is not supported for machine type "
                f"{group.machine_type!r}; compact placement needs one of the series "
                f"{', '.join(sorted(COMPACT_SERIES))} — change matrix.machine_type or use "
                "placement 'spread' or 'none'"
            )
        if "preemptible" in {m.provisioning for m in group.members}:
            pulumi.log.warn(PREEMPTIBLE_NOTE, resource=self)
        self.instance_names = [m.name for m in group.members]
        if spec.lifecycle == "created":  # templates only: the start function makes the VMs
            self._created(name, args, compact, child)
            return
        policies, domains = self._placement(name, args, child)

        self.addresses = {
            m.name: gcp.compute.Address(
                f"{name}-{m.name.removeprefix(group.id + '-')}-ip",
                name=m.name,
                address_type="INTERNAL",
                subnetwork=args.subnet,
                region=args.region,
                project=args.project,
                labels={**spec.labels, **group.member_labels(m)},
                opts=child,
            )
            for m in group.members
        }
        names = [m.name for m in group.members]
        ssh = args.ssh if args.ssh is not None else pulumi.Output.from_input(None)
        ips = pulumi.Output.all(*(self.addresses[n].address for n in names))
        gpu = group.accelerator_count if group.accelerator else 0

        def render(values: list) -> dict[str, str]:
            ip_list, keys = values
            contexts = member_contexts(
                group, dict(zip(names, ip_list)), cloud="gcp", results_url=args.results_url,
                done_url=args.done_url, zone=args.zone,
                deadline_s=int(spec.deadline.total_seconds()),
            )
            extra = {**workload_env(group.workload), **GCSFS_ENV}
            documents = {
                n: user_data(image=args.image, env={**ctx.to_env(), **extra},
                             gpu_count=gpu, ssh=keys, user=user_step(group, spec.image),
                             secrets=args.secrets, operator_ports=ssh_ports(group.workload),
                             peers=[p.host for p in ctx.members if p.name != n],
                             user_env_secret=args.user_env_secret, grant_url=args.grant_url)
                for n, ctx in contexts.items()
            }
            for n, document in documents.items():
                check_metadata(f"group {group.id} member {n}", document)
            return documents

        documents = pulumi.Output.all(ips, ssh).apply(render)
        if args.ssh is not None:
            documents = pulumi.Output.secret(documents)

        self.instances = {}
        for m in group.members:
            check_names(f"group {group.id} member {m.name}", m.name,
                        {**spec.labels, **group.member_labels(m)})
            domain = domains[m.rank % len(domains)] if domains else None
            self.instances[m.name] = gcp.compute.Instance(
                f"{name}-{m.name.removeprefix(group.id + '-')}",
                name=m.name,
                zone=args.zone,
                project=args.project,
                machine_type=m.machine_type,
                labels={**spec.labels, **group.member_labels(m)},
                tags=[args.tag, group_tag(group.id)],  # IAP ssh: sweep; members: group
                boot_disk={
                    "auto_delete": True,
                    "initialize_params": {
                        "image": f"cos-cloud/{spec.gcp.image_family}",
                        "size": spec.gcp.boot_disk_gb,
                        "type": "pd-balanced",
                        "labels": {**spec.labels, **group.member_labels(m)},
                    },
                },
                network_interfaces=[{
                    "subnetwork": args.subnet,
                    "network_ip": self.addresses[m.name].address,
                }],
                guest_accelerators=(
                    [{"type": group.accelerator, "count": gpu}] if gpu else None
                ),
                scheduling=scheduling(spec, gpu=bool(gpu), compact=compact, domain=domain,
                                      provisioning=m.provisioning),
                resource_policies=policies[0] if policies else None,
                service_account={"email": args.vm_account, "scopes": ["cloud-platform"]},
                metadata={"user-data": documents.apply(lambda d, n=m.name: d[n]), **METADATA_FLAGS},
                desired_status="TERMINATED",
                allow_stopping_for_update=False,
                deletion_protection=False,
                # the creation boot fetches the keys: the secret and `grant` exist first
                opts=pulumi.ResourceOptions(parent=self, ignore_changes=["desiredStatus"],
                                            depends_on=list(args.after)),
            )
        self.instance_names = names
        self.register_outputs({
            "instances": names,
            "ips": {n: a.address for n, a in self.addresses.items()},
        })

    def _created(self, name: str, args: GcpRunGroupArgs, compact: bool,
                 child: pulumi.ResourceOptions) -> None:
        """Per VM region (one subnet each): the placement policy and a template per role
        (regional: a template creates VMs in its own region only). One region: today's
        resource names; several: the region in each (GCE names repeat: regional objects)."""
        spec, group = args.spec, args.group
        gpu = bool(group.accelerator and group.accelerator_count)
        subnets = dict(args.subnets) or {args.region: args.subnet}
        cidrs = dict(args.cidrs) or {args.region: spec.gcp.network_cidr}
        self.addresses: dict[str, gcp.compute.Address] = {}
        self.instances: dict[str, gcp.compute.Instance] = {}
        self.templates: dict[str, gcp.compute.RegionInstanceTemplate] = {}  # role (+ region)
        for region, subnet in subnets.items():
            key = "" if len(subnets) == 1 else f"-{region}"
            here = replace(args, region=region, subnet=subnet)
            policies, _ = self._placement(f"{name}{key}", here, child)
            by_role = {m.role: scheduling(spec, gpu=gpu, compact=compact, domain=None,
                                          provisioning=m.provisioning) for m in group.members}
            made = group_templates(name, here, by_role, policies, cidrs[region], self, key=key)
            self.templates |= {f"{role}{key}": t for role, t in made.items()}
        self.register_outputs({"instances": self.instance_names,
                               "templates": {r: t.name for r, t in self.templates.items()}})

    def _placement(self, name: str, args: GcpRunGroupArgs, child: pulumi.ResourceOptions):
        spec, group = args.spec, args.group
        n = len(group.members)
        if group.placement == "spread" and n > 1:
            count = min(n, MAX_AVAILABILITY_DOMAINS)
            policy = gcp.compute.ResourcePolicy(
                f"{name}-spread",
                name=f"{group.id}-spread",
                region=args.region,
                project=args.project,
                description=f"spread {group.id} over {count} availability domains",
                group_placement_policy={"availability_domain_count": count},
                opts=child,
            )
            return [policy.self_link], list(range(1, count + 1))
        if group.placement == "compact":
            policy = gcp.compute.ResourcePolicy(
                f"{name}-compact",
                name=f"{group.id}-compact",
                region=args.region,
                project=args.project,
                description=f"collocate {group.id}",
                group_placement_policy={"collocation": "COLLOCATED", "vm_count": n},
                opts=child,
            )
            return [policy.self_link], []
        return [], []
