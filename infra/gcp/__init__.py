"""The GCP sweep: every resource a spec needs, as one component tree.

`GcpSweep(spec.name, GcpSweepArgs(spec=spec))` declares the network, identities, results
bucket, functions, the start/stop scheduler pair and one `GcpRunGroup` per planned group,
and exports the stack outputs (`bucket_url`, `function_urls`, `groups`, `crons`).
Project and region come from the spec (`gcp.project`, `region`/`zone`) or the stack config
(`gcp:project`, `gcp:region`). The region is the sweep's home (bucket, functions, scheduler,
registry); in the created lifecycle the VMs' regions are the candidates' (`vm_regions`:
`spec.candidate_regions`), each with a subnet, router + NAT and the groups' templates.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from infra.gcp.apis import GcpApis
from infra.gcp.bucket import ResultsBucket, ResultsBucketArgs
from infra.gcp.functions import GcpFunctions, GcpFunctionsArgs
from infra.gcp.identity import GcpIdentities, GcpIdentitiesArgs
from infra.gcp.network import (
    GcpNetwork, GcpNetworkArgs, region_cidrs, ssh_ports, subnet_name,
    vm_regions,
)
from infra.gcp.registry import GcpRegistry
from infra.gcp.secrets import SweepSecret
from infra.gcp.scheduler import GcpScheduler, GcpSchedulerArgs, cron_pair
from infra.gcp.vms import GcpRunGroup, GcpRunGroupArgs
from infra.once import crons_of, crons_output
from infra.keys import derived_mpi_keys, group_known_hosts, key_seed
from infra.user_image import user_step
from spotbench.auth.group_keys import KEY_FILES
from spotbench.clouds.gcp import first_zone, region_of
from spotbench.images import resolve_image
from spotbench.workload_registry import get_workload
from spotbench.facts.gcp import FACTS
from spotbench.spec import SweepSpec

__all__ = ["GcpSweep", "GcpSweepArgs", "resolve_location"]


def resolve_location(spec: SweepSpec) -> tuple[str, str, str]:
    """(project, region, zone) from the spec, falling back to the `gcp:*` stack config."""
    config = pulumi.Config("gcp")
    project = spec.gcp.project or config.get("project")
    if not project:
        raise pulumi.RunError(
            "no GCP project: set `gcp.project` in the spec or "
            "`pulumi config set gcp:project MY-PROJECT`"
        )
    zone = first_zone(spec)  # created lifecycle: templates are regional, the zone a default
    if not zone:
        raise pulumi.RunError(f"spec {spec.name!r}: cloud gcp needs 'zone' (e.g. us-central1-a)")
    region = region_of(spec)  # the home region (spotbench.facts: CloudFacts.sweep_region)
    # the stopped lifecycle's VMs live in the fixed zone, next to the home region's subnet;
    # created candidates may be anywhere: each candidate region gets a subnet (network.py)
    if spec.lifecycle != "created" and FACTS.region_of_zone(zone) != region:
        raise pulumi.RunError(f"spec {spec.name!r}: zone {zone!r} is not in region {region!r}")
    return project, region, zone


def checked_regions(spec: SweepSpec, home: str) -> list[str]:
    """The regions the VMs run in (`network.vm_regions`), refused before anything is declared
    when `gcp.network_cidr` cannot give each its subnet (`network.region_cidrs`)."""
    regions = vm_regions(spec, home)
    try:
        region_cidrs(spec, regions)
    except ValueError as exc:
        raise pulumi.RunError(f"spec {spec.name!r}: {exc}") from exc
    return regions


def created_grants(spec: SweepSpec, regions: list[str]) -> dict[str, list[str]]:
    """What the created lifecycle's grants cover (`GcpIdentitiesArgs`): every candidate zone
    and region; nothing in the stopped lifecycle."""
    created = spec.lifecycle == "created"
    return {"created_zones": spec.candidate_zones if created else [],
            "created_regions": regions if created else []}


@dataclass
class GcpSweepArgs:
    spec: SweepSpec


class GcpSweep(pulumi.ComponentResource):
    Args = GcpSweepArgs

    def __init__(self, name: str, args: GcpSweepArgs, opts: pulumi.ResourceOptions | None = None):
        spec = args.spec
        project, region, zone = resolve_location(spec)
        groups = spec.plan()
        crons = crons_of(spec, cron_pair)  # fail before declaring anything; once: None
        regions = checked_regions(spec, region)  # where VMs run: a subnet and templates each
        self.apis = GcpApis(f"{name}-apis", project)
        # every resource of the sweep waits for the APIs it needs
        super().__init__("spotbench:gcp:Sweep", name, None, pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(transformations=[self.apis.after()])))
        child = pulumi.ResourceOptions(parent=self)

        self.network = GcpNetwork(f"{name}-net", GcpNetworkArgs(
            spec=spec, region=region, project=project, regions=regions), child)
        self.identities = GcpIdentities(
            f"{name}-id", GcpIdentitiesArgs(
                sweep=spec.name, project=project, zone=zone, operators=list(spec.gcp.operators),
                network_cidr=spec.gcp.network_cidr, ssh_ports=ssh_ports(spec.workload.name),
                region=region, subnet=subnet_name(f"{name}-net"), **created_grants(spec, regions),
                subnet_resources=list(self.network.subnets.values())),
            child
        )
        ids = self.identities
        self.bucket = ResultsBucket(
            f"{name}-bucket",
            ResultsBucketArgs(spec=spec, project=project, location=region,
                              readers=[ids.member.email], managers=[ids.function.email],
                              operators=list(spec.gcp.operators)),
            child,
        )
        workload = get_workload(spec.workload.name)
        steps = {g.id: user_step(g, spec.image) for g in groups}
        seed = key_seed(name, self)
        self.secret = SweepSecret(  # the key seed and secret envs: the functions read it alone
            f"{name}-secret", project=project, sweep=spec.name, seed_hex=seed.hex,
            envs={gid: s.env_file_text() for gid, s in steps.items() if s is not None and s.secret},
            reader=ids.function.email, opts=child)
        self.functions = GcpFunctions(
            f"{name}-fn",
            GcpFunctionsArgs(
                spec=spec, project=project, region=region, bucket=self.bucket.bucket.name,
                results_url=self.bucket.url, function_account=ids.function.email,
                scheduler_account=ids.scheduler.email, member_account=ids.member.email,
                secret=self.secret.name,
            ),
            pulumi.ResourceOptions(parent=self, depends_on=self.secret.resources),
        )
        urls = self.functions.urls
        self.scheduler = self._scheduler(name, spec, project, region, crons)
        # keys per group, derived from the sweep's seed: a member is handed only its group's
        mpi = derived_mpi_keys(name, self, [g.id for g in groups], seed.hex) if workload.mpi else None
        self.registry = GcpRegistry(f"{name}-registry", sweep=spec.name, project=project,
                                    region=region, opts=child)
        boot_needs = [*self.secret.resources, self.functions.functions["grant"], ids.member_ready]
        self.groups = {
            g.id: GcpRunGroup(
                g.id,
                GcpRunGroupArgs(
                    spec=spec, group=g, project=project, region=region, zone=zone,
                    subnet=self.network.subnet.id, tag=self.network.tag,
                    subnets={r: sn.id for r, sn in self.network.subnets.items()},
                    cidrs=self.network.cidrs,
                    vm_account=ids.member.email, results_url=self.bucket.url,
                    done_url=urls["done"], grant_url=urls["grant"],
                    ssh=mpi.groups[g.id] if mpi else None,
                    secrets={k: k for k in KEY_FILES} if mpi else None,
                    user_env_secret="env" if steps[g.id] is not None and steps[g.id].secret else None,
                    after=boot_needs,
                    image=resolve_image(spec.image, self.registry.url, g.workload,
                                        gpu=bool(g.accelerator)),
                ),
                # its members' rule first (every group's would be groups² dependencies)
                pulumi.ResourceOptions(parent=self, depends_on=[self.network.firewalls[g.id]]),
            )
            for g in groups
        }
        self.outputs = {
            "bucket_url": self.bucket.url,
            "image_registry": self.registry.url,
            "function_urls": dict(urls),
            "groups": {gid: grp.instance_names for gid, grp in self.groups.items()},
            "crons": crons_output(spec, crons),
        }
        if mpi is not None:  # for `spotbench exec/collect --port 2222`: pinned, never TOFU
            self.outputs["known_hosts"] = group_known_hosts(
                {gid: [a.address for a in grp.addresses.values()] or list(grp.instance_names)
                 for gid, grp in self.groups.items()},  # created VMs: by instance name
                mpi.host_public, workload.port)
            self.outputs["ssh_private_key"] = mpi.login_private  # the operator's key
        self.register_outputs(self.outputs)  # infra/__main__.py exports them

    def _scheduler(self, name: str, spec: SweepSpec, project: str, region: str,
                   crons: tuple[str, ...] | None) -> GcpScheduler | None:
        """The start/stop pair on the functions (none with `schedule: once`: infra/once.py)."""
        if crons is None:
            return None
        urls = self.functions.urls
        return GcpScheduler(
            f"{name}-sched",
            GcpSchedulerArgs(spec=spec, project=project, region=region,
                             scheduler_account=self.identities.scheduler.email,
                             start_url=urls["start"], stop_url=urls["stop"],
                             start_uri=self.functions.service_uris["start"],
                             stop_uri=self.functions.service_uris["stop"]),
            pulumi.ResourceOptions(parent=self, depends_on=list(self.functions.functions.values())),
        )
