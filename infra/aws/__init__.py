"""The AWS sweep: every resource a spec needs, as one component tree.

`AwsSweep(spec.name, AwsSweepArgs(spec=spec))` declares the network, results bucket,
identities, the start/stop/done Lambdas, the EventBridge Scheduler pair and one
`AwsRunGroup` per planned group (instances created stopped), all through a provider pinned
to the spec's `region`, and exports the stack outputs (`bucket_url`, `function_urls`,
`function_arns`, `groups`, `crons`) like the GCP program.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.aws.bucket import ResultsBucket, ResultsBucketArgs
from infra.aws.failures import AwsFailures, AwsFailuresArgs
from infra.aws.functions import AwsFunctions, AwsFunctionsArgs
from infra.aws.grant_policy import check_grant_policy
from infra.aws.identity import AwsIdentities, AwsIdentitiesArgs
from infra.aws.instances import (
    AwsRunGroup,
    AwsRunGroupArgs,
    ami_parameter,
    has_gpu,
    machine_type,
    member_ips,
)
from infra.aws.network import AwsNetwork, AwsNetworkArgs, zone_cidrs
from infra.aws.templates import AwsGroupTemplates, AwsGroupTemplatesArgs
from infra.aws.registry import AwsRegistry
from infra.aws.secrets import USER_ENV, keys_arn, seed_parameter, user_env_parameter
from infra.aws.scheduler import AwsScheduler, AwsSchedulerArgs, schedule_pair
from infra.once import crons_of, crons_output
from infra.keys import derived_mpi_keys, group_known_hosts, key_seed
from spotbench.auth.group_keys import KEY_FILES
from infra.user_image import user_step
from spotbench.images import registry_images, resolve_image
from spotbench.plan import RunGroup, sweep_labels
from spotbench.workload_registry import get_workload
from spotbench.facts.aws import FACTS
from spotbench.spec import SweepSpec

__all__ = ["AwsSweep", "AwsSweepArgs"]


@dataclass
class AwsSweepArgs:
    spec: SweepSpec


def _check_region(spec: SweepSpec) -> str:
    if not spec.region:
        raise pulumi.RunError(f"spec {spec.name!r} is not an aws spec with a region")
    if spec.zone and FACTS.region_of_zone(spec.zone) != spec.region:
        raise pulumi.RunError(f"spec {spec.name!r}: zone {spec.zone!r} is not in {spec.region}")
    return spec.region


def _candidates(spec: SweepSpec) -> list[str]:
    """`lifecycle: created`: the candidate zones (a subnet and templates in each)."""
    zones = spec.candidate_zones
    if not zones:
        raise pulumi.RunError(
            f"spec {spec.name!r}: `lifecycle: created` needs candidate zones: set `zones` "
            f"(e.g. [{spec.region}a, {spec.region}b]) or `zones: any`")
    return zones


def _zones_by_region(spec: SweepSpec, zones: list[str]) -> dict[str, list[str]]:
    """Candidate region (first choice first) → its candidate zones; a stopped sweep: its
    home region, no candidates. Every region here gets a VPC, a subnet per zone, security
    groups and the groups' launch templates (docs/aws.md, "Several regions")."""
    if not zones:
        return {spec.region or "": []}
    return {r: [z for z in zones if FACTS.region_of_zone(z) == r]
            for r in spec.candidate_regions}


def _gpu_of(groups: list[RunGroup]) -> dict[str, bool]:
    return {g.id: any(has_gpu(machine_type(g, m), g.accelerator) for m in g.members)
            for g in groups}


class AwsSweep(pulumi.ComponentResource):
    Args = AwsSweepArgs

    def __init__(self, name: str, args: AwsSweepArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotbench:aws:Sweep", name, None, opts)
        spec = args.spec
        region = _check_region(spec)
        groups = spec.plan()
        crons = crons_of(spec, schedule_pair)  # fail early; `schedule: once`: None
        created = spec.lifecycle == "created"
        zones = _candidates(spec) if created else []
        by_region = _zones_by_region(spec, zones)
        # the same CIDR plan in every region: VPCs of two regions never peer (docs/aws.md)
        cidrs = {r: zone_cidrs(spec.aws.vpc_cidr, spec.aws.subnet_cidr, zs)
                 for r, zs in by_region.items()}
        ips = member_ips(groups, spec.aws.subnet_cidr)
        self.zone_ips = {z: member_ips(groups, c) for per in cidrs.values() for z, c in per.items()}
        tags = {**spec.labels, **sweep_labels(spec.name)}  # the spec's labels are tags here

        self.provider = aws.Provider(f"{name}-aws", region=region,
                                     default_tags={"tags": tags},
                                     opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, provider=self.provider)
        invoke = pulumi.InvokeOptions(provider=self.provider)
        self._networks(name, spec, by_region, cidrs, tags)
        self.bucket = ResultsBucket(f"{name}-results", ResultsBucketArgs(spec=spec, tags=tags), child)
        gpu_of = _gpu_of(groups)
        account = aws.get_caller_identity_output(opts=invoke).account_id
        self.registry = AwsRegistry(
            f"{name}-registry", sweep=spec.name, region=region, tags=tags,
            images=sorted({image for g in groups
                           for image in registry_images(spec.image, g.workload, gpu_of[g.id])}),
            account=account, opts=child)
        mpi = self._secrets(name, spec, groups, tags, child)
        workload = get_workload(spec.workload.name)
        # the members may pull the spec's image, or any of the stack's repositories (a user's
        # image runs beside the stack's runner: public, or in the stack's registry)
        pullable = (pulumi.Output.from_input(spec.image)
                    if spec.image and not workload.user_image else
                    self.registry.url.apply(lambda r: f"{r}/*"))
        keys = (account.apply(lambda a: keys_arn(region, a, spec.name))
                if self.secret_files else None)
        self.identities = AwsIdentities(
            f"{name}-id",
            AwsIdentitiesArgs(sweep=spec.name, region=region,
                              results_bucket=self.bucket.results_bucket,
                              prefix=self.bucket.prefix, image=pullable, tags=tags,
                              checkpoints=spec.keeps_checkpoints(), keys=keys,
                              created=created, fleet_regions=list(by_region) if created else None),
            child,
        )
        ids = self.identities
        check_grant_policy(spec, groups, self.bucket.prefix)
        self.functions = AwsFunctions(
            f"{name}-fn",
            AwsFunctionsArgs(spec=spec, role_arn=ids.lambda_role.arn,
                             results_url=self.bucket.results_url, tags=tags,
                             secret_files=self.secret_files),
            pulumi.ResourceOptions(parent=self, provider=self.provider,
                                   depends_on=[ids.lambda_policy, ids.grant_policy,
                                               *([ids.fleet_policy] if ids.fleet_policy else [])]),
        )
        arns = self.functions.arns
        # failed asynchronous start/stop invocations (Lambda's and the scheduler's) land here
        self.failures = AwsFailures(f"{name}-failed", AwsFailuresArgs(spec=spec, tags=tags),
                                    pulumi.ResourceOptions(parent=self, provider=self.provider))
        ids.grant(done_arn=arns["done"], start_arn=arns["start"], stop_arn=arns["stop"],
                  failures_arn=self.failures.arn)
        self.failures.route({a: self.functions.functions[a].name for a in ("start", "stop")},
                            depends_on=[ids.failure_policy])
        self.scheduler = self._scheduler(name, spec, ids, arns, crons)
        needs = {has_gpu(machine_type(g, m), g.accelerator) for g in groups for m in g.members}
        amis = {gpu: aws.ssm.get_parameter_output(name=ami_parameter(spec, gpu), opts=invoke).value
                for gpu in sorted(needs)}
        self.templates: dict[str, AwsGroupTemplates] = {}
        self.region_templates: dict[tuple[str, str], AwsGroupTemplates] = {}
        for r in by_region if created else ():
            self._templates(spec, groups, ids, r, amis if r == region else
                            _amis(spec, needs, self.providers[r]), gpu_of, mpi)
        self.groups = {} if created else self._instances(spec, groups, ids, ips, amis, gpu_of, mpi)
        self.outputs = self._outputs(spec, groups, ips, mpi, workload, crons)
        self.register_outputs(self.outputs)  # infra/__main__.py exports them

    def _scheduler(self, name: str, spec: SweepSpec, ids: AwsIdentities, arns,
                   crons: tuple[str, ...] | None) -> AwsScheduler | None:
        """The start/stop pair of schedules (none with `schedule: once`: infra/once.py)."""
        if crons is None:
            return None
        return AwsScheduler(
            f"{name}-sched",
            AwsSchedulerArgs(spec=spec, role_arn=ids.scheduler_role.arn,
                             start_arn=arns["start"], stop_arn=arns["stop"],
                             dead_letter_arn=self.failures.arn),
            pulumi.ResourceOptions(parent=self, provider=self.provider,
                                   depends_on=[ids.scheduler_policy]),
        )

    def _networks(self, name: str, spec: SweepSpec, by_region: dict[str, list[str]],
                  cidrs: dict[str, dict[str, str]], tags: dict[str, str]) -> None:
        """A network per region of `by_region`, each through its region's provider: the home
        one keeps its one-region names (`<name>-net`, provider `<name>-aws`), another
        candidate region gets `<name>-aws-<region>` (EC2 objects are regional) and
        `<name>-net-<region>`."""
        home = spec.region
        self.providers = {r: self.provider if r == home else aws.Provider(
            f"{name}-aws-{r}", region=r, default_tags={"tags": tags},
            opts=pulumi.ResourceOptions(parent=self)) for r in by_region}
        self.networks = {r: AwsNetwork(
            f"{name}-net" if r == home else f"{name}-net-{r}",
            AwsNetworkArgs(spec=spec, tags=tags, zone=zs[0] if zs else spec.zone,
                           zone_cidrs=cidrs[r], region=r),
            pulumi.ResourceOptions(parent=self, provider=self.providers[r]))
            for r, zs in by_region.items()}
        self.network = self.networks.get(home or "")  # None: no candidate in the home region

    def _instances(self, spec: SweepSpec, groups: list[RunGroup], ids: AwsIdentities,
                   ips: dict[str, str], amis, gpu_of: dict[str, bool], mpi) -> dict[str, AwsRunGroup]:
        """`lifecycle: stopped`: each group's instances, created stopped in the home region."""
        network = self.network
        assert network is not None  # a stopped sweep's one network is its home region's
        return {
            g.id: AwsRunGroup(
                g.id,
                AwsRunGroupArgs(
                    spec=spec, group=g, ips=ips, subnet_id=network.subnet.id,
                    security_group_id=network.security_groups[g.id].id,
                    instance_profile=ids.instance_profile.name,
                    amis=amis, image=self.registry.url.apply(
                        lambda r, g=g: resolve_image(spec.image, r, g.workload, gpu_of[g.id])),
                    results_url=self.bucket.results_url, done_url=self.functions.urls["done"],
                    ssh=mpi.groups[g.id] if mpi else None,
                ),
                pulumi.ResourceOptions(parent=self, provider=self.provider,
                                       depends_on=[network.nat, ids.member_policy,
                                                   *self._entries(g.id)]),
            )
            for g in groups
        }

    def _templates(self, spec: SweepSpec, groups: list[RunGroup], ids: AwsIdentities,
                   region: str, amis, gpu_of: dict[str, bool], mpi) -> None:
        """`lifecycle: created`: launch templates per member and candidate zone of `region`
        (through its provider), no instances. The home region's keep their names of one
        region (`self.templates`); another region's are `<group>-<region>`."""
        network, home = self.networks[region], region == spec.region
        subnets = {z: s.id for z, s in network.zone_subnets.items()}
        for g in groups:
            made = self._group_templates(spec, g, ids, network, subnets, amis, gpu_of, mpi,
                                         g.id if home else f"{g.id}-{region}",
                                         self.providers[region])
            self.region_templates[(g.id, region)] = made
            if home or g.id not in self.templates:
                self.templates[g.id] = made

    def _group_templates(self, spec: SweepSpec, g: RunGroup, ids: AwsIdentities,
                         network: AwsNetwork, subnets, amis, gpu_of: dict[str, bool], mpi,
                         name: str, provider: aws.Provider) -> AwsGroupTemplates:
        return AwsGroupTemplates(
            name, AwsGroupTemplatesArgs(
                spec=spec, group=g, ips=self.zone_ips, subnet_ids=subnets,
                security_group_id=network.security_groups[g.id].id,
                instance_profile=ids.instance_profile.name, amis=amis,
                image=self.registry.url.apply(
                    lambda r, g=g: resolve_image(spec.image, r, g.workload, gpu_of[g.id])),
                results_url=self.bucket.results_url, done_url=self.functions.urls["done"],
                ssh=mpi.groups[g.id] if mpi else None),
            pulumi.ResourceOptions(parent=self, provider=provider,
                                   depends_on=[network.nat, ids.member_policy,
                                               *self._entries(g.id)]))

    def _secrets(self, name: str, spec: SweepSpec, groups: list[RunGroup], tags: dict[str, str],
                 child: pulumi.ResourceOptions):
        """The sweep's entries under its one parameter path, which the functions alone read:
        the one key seed every group's ssh keys derive from (as on GCP), a container group's
        secret env; the keys (public halves, or None)."""
        mpi = None
        self.seed_parameter: aws.ssm.Parameter | None = None
        self.env_parameters: dict[str, aws.ssm.Parameter] = {}
        files: set[str] = set()
        if get_workload(spec.workload.name).mpi:  # derived per group by the function on request
            seed = key_seed(name, self)
            mpi = derived_mpi_keys(name, self, [g.id for g in groups], seed.hex)
            self.seed_parameter = seed_parameter(f"{name}-keys", spec.name, seed.hex, tags, child)
            files.update(KEY_FILES)
        for g in groups:  # a container group's env (secret values): handed out like keys
            step = user_step(g, spec.image)
            if step is not None and step.secret:
                self.env_parameters[g.id] = user_env_parameter(
                    f"{name}-env", spec.name, g.id, step.env_file_text(), tags, child)
                files.add(USER_ENV)
        self.secret_files = sorted(files)
        return mpi

    def _entries(self, group: str) -> list[aws.ssm.Parameter]:
        """The parameters group `group`'s boot asks the function for (it waits for them)."""
        return [p for p in (self.seed_parameter, self.env_parameters.get(group)) if p is not None]

    def _outputs(self, spec: SweepSpec, groups: list[RunGroup], ips: dict[str, str], mpi,
                 workload, crons: tuple[str, ...] | None) -> dict:
        outputs = {
            "bucket_url": self.bucket.results_url,
            "image_registry": self.registry.url,
            "function_urls": dict(self.functions.urls),
            "function_arns": dict(self.functions.arns),
            "failed_invocations": self.failures.url,  # read it: docs/aws.md, Failed ticks
            "groups": {gid: grp.instance_ids for gid, grp in self.groups.items()},
            "launch_templates": {gid: _merged([t.template_ids for (g, _), t
                                               in self.region_templates.items() if g == gid])
                                 for gid in self.templates},
            "crons": crons_output(spec, crons, ("start", "stop", "start_expression", "stop_expression")),
        }
        if mpi is not None:  # for `spotbench exec/collect --port 2222`: pinned, never TOFU
            # by private IP (direct, jump) and by instance id (`--via ssm` names the instance)
            outputs["known_hosts"] = group_known_hosts(
                {g.id: [*(ips[m.name] for m in g.members),
                        *(z[m.name] for z in self.zone_ips.values() for m in g.members),
                        *(self.groups[g.id].member_ids.values() if g.id in self.groups else ())]
                 for g in groups},
                mpi.host_public, workload.port)
            outputs["ssh_private_key"] = mpi.login_private  # the operator's key
        return outputs


def _amis(spec: SweepSpec, needs: set[bool], provider: aws.Provider) -> dict[bool, pulumi.Output[str]]:
    """The AMI ids of a candidate region (AMI ids are regional): its own SSM parameters."""
    return {gpu: aws.ssm.get_parameter_output(
        name=ami_parameter(spec, gpu), opts=pulumi.InvokeOptions(provider=provider)).value
        for gpu in sorted(needs)}


def _merged(parts: list[pulumi.Output[dict[str, str]]]) -> pulumi.Output[dict[str, str]]:
    """One group's `member@zone` → template id over its regions (zones name their region)."""
    if len(parts) == 1:
        return parts[0]
    return pulumi.Output.all(*parts).apply(lambda ds: {k: v for d in ds for k, v in d.items()})
