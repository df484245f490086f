"""Service accounts and the function's custom roles (least privilege), per sweep.

Whatever the group count, a sweep declares the same IAM objects (issue #29,
docs/identity.md): four accounts, three or four custom roles, a fixed set of bindings.

- Member account, one per sweep (`account_id(sweep, "member")`): every VM runs as it. It may
  read the sweep's results (bucket.py) and invoke `done` and `grant` (functions.py), and on
  the project `roles/artifactregistry.reader` and `roles/logging.logWriter`. It may write
  nothing: which group a VM is, the functions decide from the VM's instance identity token
  and the sweep's own records (`spotbench.auth.instance`), and they hand that group its
  grants (a signed POST policy for its records, a downscoped token for its checkpoints, its
  keys and env), valid until its deadline.
- Scheduler account: only `roles/run.invoker` on `start` and `stop` (functions.py).
- Function account: custom roles with exactly the permissions the functions call:
  `spotbench_<sweep>_<tag>` (get/start/stop; `get` is also the instance lookup of a
  `grant`) bound with an IAM condition on the sweep's instance names
  (`projects/P/zones/Z/instances/<sweep>--…`), so it cannot touch another sweep's VMs
  (sweep names cannot contain `--`: `bench--` does not begin sweep `bench-gpu`'s
  `bench-gpu--…`), `spotbench_<sweep>_<tag>.list` (the project-level aggregated list and
  zone-operation polling, which IAM conditions cannot scope to names) and
  `spotbench_<sweep>_<tag>.sign` (`iam.serviceAccounts.signBlob`) on its own account only:
  it signs the groups' POST policies. In the created lifecycle with candidates in several
  regions, the conditioned start/stop and create grants are bound once per candidate region
  (`_grant_by_region`: an IAM condition holds at most 12 logical operators), each naming
  that region's zones, templates and subnet. Plus the results prefix (bucket.py), the sweep's one
  secret (secrets.py) and `roles/iam.serviceAccountUser` on the member account (starting an
  instance that runs as a service account requires `iam.serviceAccounts.actAs` on it).
- Operators (`gcp.operators` in the spec): `spotbench_<sweep>_<tag>.ops` (list/get instances,
  read/pause/resume/run the sweep's scheduler jobs), read access to the results prefix
  (bucket.py) and `roles/iap.tunnelResourceAccessor` once per operator on the project's IAP
  tunnel resource (`TunnelIamMember`), conditioned on the sweep's addresses and ssh ports
  (`tunnel_condition`): O(1) per sweep, not one binding per VM. IAM conditions cannot name
  an IAP tunnel instance (IAP supports `resource.type`/`service`, not `resource.name`; its
  tunnel resources are named by instance id), so the condition is on the destination:
  `destination.ip` in the sweep's own subnet (`gcp.network_cidr`) and `destination.port` in
  its ssh ports (docs/platform.md). Sweeps of one project keep their operators apart only
  with distinct `network_cidr`s (docs/gcp.md).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp
import pulumi_random
import pulumiverse_time as time

from spotbench import limits
from spotbench.facts.gcp import FACTS
from spotbench.labels import name_prefix

# spotbench.clouds.gcp.gce: instances.aggregatedList (needs .list) → get → start/stop →
# zoneOperations.get while waiting. Nothing else: no create/delete/setMetadata.
FUNCTION_COMPUTE_PERMISSIONS = (  # on the sweep's instances only (IAM condition)
    "compute.instances.get",
    "compute.instances.start",
    "compute.instances.stop",
)
FUNCTION_LIST_PERMISSIONS = (  # project-level calls: the aggregated list, op polling
    "compute.instances.list",
    "compute.zoneOperations.get",
    "compute.zoneOperations.list",  # preempted or stopped? (compute.instances.preempted ops)
)
# The created lifecycle (`lifecycle: created`, spotbench.clouds.gcp.created): the start
# function makes the VMs with regionInstances.bulkInsert from the sweep's templates and stop /
# done delete them. Creating a VM from a template needs, besides compute.instances.create,
# the use of the template, its new boot disk, its subnet, and setting what the template sets
# (metadata, tags, labels, the service account; iam.serviceAccounts.actAs on the member
# account is the `roles/iam.serviceAccountUser` binding below). All on the sweep's own
# names only (IAM condition, `created_condition`); the region operations are project-level.
FUNCTION_CREATE_PERMISSIONS = (
    "compute.instances.create",
    "compute.instances.delete",
    "compute.instances.setMetadata",
    "compute.instances.setTags",
    "compute.instances.setLabels",
    "compute.instances.setServiceAccount",
    "compute.disks.create",
    "compute.disks.setLabels",  # the template labels the boot disk (research.md §1 G4)
    "compute.instanceTemplates.useReadOnly",
)
# `compute.subnetworks.use` (the template's subnet) cannot be scoped by a condition:
# subnetworks are not among the resource types IAM conditions see the name of, so a name
# term on one is false and the create would be refused. It is granted on the sweep's own
# subnet itself instead (a subnetwork has its own IAM policy), one binding per candidate
# region (docs/platform.md, "Created lifecycle").
SUBNET_ROLE = "roles/compute.networkUser"
# Unconditioned (project-level): the region operations, and the use of the group's placement
# policy (spread / compact) a template names. IAM conditions on resource names hold only for
# the resource types that accept them, and resource policies are not among them
# (cloud.google.com/iam/help/conditions/resource-policies lists for Compute Engine backend
# services, firewalls, images, instance templates, instances, disks, snapshots); `use` lets
# the holder attach a policy to a VM it may create (the sweep's, by the create condition),
# not change or delete one (docs/platform.md, "Created lifecycle").
FUNCTION_CREATE_LIST_PERMISSIONS = ("compute.regionOperations.get", "compute.resourcePolicies.use")
# `spotbench status` (list), `ssh --via iap` (gcloud looks the instance up), `schedule`.
OPERATOR_PERMISSIONS = (
    "compute.instances.get",
    "compute.instances.list",
    "compute.zoneOperations.list",  # status names members GCE preempted

    "cloudscheduler.jobs.get",
    "cloudscheduler.jobs.pause",
    "cloudscheduler.jobs.resume",
    "cloudscheduler.jobs.run",
)
# spotbench/clouds/gcp/grants.py signs each group's POST policy through IAM Credentials signBlob,
# as its own account (the only account it may sign as: bound on that account alone).
SIGN_PERMISSIONS = ("iam.serviceAccounts.signBlob",)
VM_PROJECT_ROLES = ("roles/artifactregistry.reader", "roles/logging.logWriter")
# The Pulumi types of the IAM objects a sweep declares (accounts, roles, bindings, secrets):
# what issue #29 keeps constant in the group count (tests/infra/test_gcp.py,
# bench/infra_scale.py count them).
IAM_TYPES = (
    "gcp:serviceaccount/account:Account", "gcp:serviceaccount/iAMMember:IAMMember",
    "gcp:projects/iAMCustomRole:IAMCustomRole", "gcp:projects/iAMMember:IAMMember",
    "gcp:storage/bucketIAMMember:BucketIAMMember", "gcp:secretmanager/secret:Secret",
    "gcp:secretmanager/secretIamMember:SecretIamMember",
    "gcp:cloudrunv2/serviceIamMember:ServiceIamMember", "gcp:iap/tunnelInstanceIAMMember:TunnelInstanceIAMMember",
    "gcp:iap/tunnelIamMember:TunnelIamMember",
)
IAP_TUNNEL_ROLE = "roles/iap.tunnelResourceAccessor"


def custom_role_id(sweep: str, suffix: str = "", stack_tag: str = "") -> str:
    """`spotbench_<sweep>[_<stack tag>][.<suffix>]`, `-` read as `_` (role ids allow
    `[a-zA-Z0-9_.]`, at most 64: a sweep name has at most 24 characters). The suffix follows
    a `.`, which no sweep name holds: with `_` sweep `a-b`'s `list` role and sweep
    `a-b-list`'s own role were one id. The stack tag is random per stack (`ROLE_TAG`): GCP
    keeps a deleted custom role's id for 37 days, so a sweep torn down and deployed again
    within that time needs new ids (docs/platform.md, naming and deletion)."""
    tag = f"_{stack_tag}" if stack_tag else ""
    return "spotbench_" + sweep.replace("-", "_") + tag + (f".{suffix}" if suffix else "")


ROLE_TAG_BYTES = 3  # 6 hex characters: a new value per stack, kept across `pulumi up`s


def measured(condition: dict[str, str]) -> dict[str, str]:
    """An IAM condition within IAM's 12 logical operators (spotbench.limits), else refused."""
    limits.require("iam.condition.operators", f"IAM condition {condition['title']!r}",
                   limits.logical_operators(condition["expression"]))
    return condition


def instances_condition(project: str, zone: str | list[str], sweep: str) -> dict[str, str]:
    """IAM condition: only instances of `sweep` (their names start with `<sweep>--`, which
    no other sweep's do: spotbench.labels.name_prefix), in its zone (the created lifecycle:
    in each candidate zone)."""
    zones = [zone] if isinstance(zone, str) else list(zone)
    prefixes = [f"projects/{project}/zones/{z}/instances/{name_prefix(sweep)}" for z in zones]
    return measured({
        "title": f"{sweep} instances only"[:100],
        "description": f"instances named {name_prefix(sweep)}* in {', '.join(zones)}"[:256],
        "expression": " || ".join(f'resource.name.startsWith("{p}")' for p in prefixes),
    })


def created_condition(project: str, regions: str | list[str], zones: list[str], sweep: str,
                      subnet: str) -> dict[str, str]:
    """IAM condition of the created lifecycle's role: the sweep's instances and their boot
    disks (named like them) in each candidate zone and its templates (named after its groups,
    whichever form IAM names a regional template in) — nothing of another sweep, no instance
    in another region. (Its subnet: `SUBNET_ROLE` on the subnet itself, not a term here.)"""
    regions = [regions] if isinstance(regions, str) else list(regions)
    pre = name_prefix(sweep)
    names = [f"projects/{project}/zones/{z}/{kind}/{pre}" for z in zones
             for kind in ("instances", "disks")]
    terms = [f'resource.name.startsWith("{n}")' for n in names]
    # a regional template's name as IAM reports it is undocumented (regional or global
    # form): the part after `/instanceTemplates/` is the sweep's in either (research.md §1 G2)
    terms.append(f'resource.name.extract("/instanceTemplates/{{name}}").startsWith("{pre}")')
    return measured({"title": f"{sweep} created instances only"[:100],
                     "description": f"create/delete {pre}* instances in {', '.join(zones)}"[:256],
                     "expression": " || ".join(terms)})


def zones_by_region(args: GcpIdentitiesArgs) -> dict[str, list[str]]:
    """Candidate region → its candidate zones (the created lifecycle), first choice first;
    the stopped lifecycle: the home region, no zones (its one `zone` is used)."""
    regions = args.created_regions or [args.region]
    return {r: [z for z in args.created_zones if FACTS.region_of_zone(z) == r] for r in regions}


def ip_prefix(cidr: str) -> str:
    """The dotted prefix every address of IPv4 `cidr` starts with (`10.42.0.0/24` →
    `10.42.0.`): its whole octets. A prefix length that is not a multiple of 8 is widened to
    the octets it covers whole (`10.42.16.0/20` → `10.42.`)."""
    import ipaddress

    net = ipaddress.IPv4Network(cidr, strict=False)
    octets = net.prefixlen // 8
    return "".join(f"{o}." for o in str(net.network_address).split(".")[:octets])


def tunnel_condition(sweep: str, cidr: str, ports: list[str]) -> dict[str, str]:
    """IAM condition of an operator's IAP tunnel grant: tunnels to an instance (not a
    destination group), at an address of the sweep's subnet, on one of its ssh ports."""
    port_test = " || ".join(f"destination.port == {int(p)}" for p in ports)
    expression = ('resource.type == "iap.googleapis.com/TunnelInstance" && '
                  f'destination.ip.startsWith("{ip_prefix(cidr)}") && ({port_test})')
    return measured({"title": f"{sweep} ssh via IAP"[:100],
                     "description": f"instances at {cidr}, ports {', '.join(ports)}",
                     "expression": expression})


def account_id(sweep: str, kind: str) -> str:
    """A service-account id (6–30 chars, lowercase) for `kind` of `sweep`: `sb-<sweep>-sch`
    (`-fn`, `-bld`, `-vm`) when that fits, else `sb-<sweep…>-<10 hex>-sch`, the hex a digest of the
    whole sweep name — cutting the name alone gave two long sweeps in one project that
    share their first ~23 characters one scheduler (function, build) account."""
    suffix = {"scheduler": "-sch", "function": "-fn", "build": "-bld", "member": "-vm"}[kind]
    whole = f"sb-{sweep}"
    if len(whole) + len(suffix) <= 30:
        return whole + suffix
    digest = hashlib.sha256(sweep.encode()).hexdigest()[:10]
    return whole[: 30 - len(suffix) - 11].rstrip("-") + f"-{digest}{suffix}"


# IAM is eventually consistent: a new account or binding "typically" takes effect within
# 2 minutes, "potentially 7 minutes or longer" (cloud.google.com/iam/docs/access-change-
# propagation). What is used right after it is made waits this long after it (`time.Sleep`,
# on create only: a later `pulumi up` that changes nothing waits for nothing).
IAM_PROPAGATION = "120s"


def propagated(name: str, made: list[pulumi.Resource],
               opts: pulumi.ResourceOptions) -> time.Sleep:  # fmt: skip
    """A wait of `IAM_PROPAGATION` after the accounts and bindings `made`: depend on it to use
    them."""
    return time.Sleep(name, create_duration=IAM_PROPAGATION,
                      opts=pulumi.ResourceOptions.merge(opts,
                                                        pulumi.ResourceOptions(depends_on=made)))


@dataclass
class GcpIdentitiesArgs:
    sweep: str
    project: str
    zone: str
    operators: list[str] = field(default_factory=list)  # IAM members
    # the created lifecycle: the candidate zones, their regions (default: `region` alone)
    # and the sweep's subnet name (the same in each region)
    created_zones: list[str] = field(default_factory=list)
    region: str = ""
    subnet: str = ""
    created_regions: list[str] = field(default_factory=list)
    network_cidr: str = "10.42.0.0/24"  # the sweep's subnet (its instances' addresses)
    ssh_ports: list[str] = field(default_factory=lambda: ["22"])  # what operators reach
    # the created lifecycle: the subnets the function's subnet grants are bound on
    subnet_resources: list[pulumi.Resource] = field(default_factory=list)


class GcpIdentities(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: GcpIdentitiesArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotbench:gcp:Identities", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        accounts = {}
        for kind, what in (
            ("scheduler", "Cloud Scheduler → start/stop"),
            ("function", "start/stop/done/grant functions"),
            ("member", "every VM of the sweep"),
        ):
            accounts[kind] = gcp.serviceaccount.Account(
                f"{name}-{kind}",
                account_id=account_id(args.sweep, kind),
                display_name=f"spotbench {args.sweep}: {what}",
                project=args.project,
                opts=child,
            )
        self.scheduler, self.function = accounts["scheduler"], accounts["function"]
        self.member = accounts["member"]
        fn_member = self.function.email.apply(lambda e: f"serviceAccount:{e}")
        # created with the stack, kept by every later `pulumi up`, new after a destroy
        self.role_tag = pulumi_random.RandomId(f"{name}-role-tag", byte_length=ROLE_TAG_BYTES,
                                        keepers={"sweep": args.sweep}, opts=child)
        self.role = self._role(name, args, "", "start/stop", FUNCTION_COMPUTE_PERMISSIONS,
                               "get, start and stop the sweep's instances; nothing else", child)
        self.list_role = self._role(name, args, "list", "list", FUNCTION_LIST_PERMISSIONS,
                                    "find instances by label and follow zone operations", child)
        self._grant(f"{name}-function-list", args, self.list_role, fn_member, child)
        self.create_role = None
        if args.created_zones:
            self.create_role = self._role(
                name, args, "create", "create", FUNCTION_CREATE_PERMISSIONS,
                "create the sweep's instances from its templates, and delete them", child)
            self.create_list_role = self._role(
                name, args, "bulk", "bulk", FUNCTION_CREATE_LIST_PERMISSIONS,
                "follow the bulk creations' region operations", child)
            self._grant(f"{name}-function-bulk", args, self.create_list_role, fn_member, child)
        self._grant_by_region(name, args, fn_member, child)
        self.sign_role = self._role(name, args, "sign", "sign", SIGN_PERMISSIONS,
                                    "sign the groups' upload policies as itself", child)
        gcp.serviceaccount.IAMMember(  # on its own account only: it signs as nobody else
            f"{name}-function-sign",
            service_account_id=self.function.name,
            role=self.sign_role.role_id.apply(lambda rid: f"projects/{args.project}/roles/{rid}"),
            member=fn_member,
            opts=child,
        )
        self.operator_role = None
        if args.operators:
            self.operator_role = self._role(name, args, "ops", "operators", OPERATOR_PERMISSIONS,
                                            "status, schedule control and IAP lookups", child)
            iap = tunnel_condition(args.sweep, args.network_cidr, args.ssh_ports)
            for i, member in enumerate(args.operators):
                self._grant(f"{name}-operator-{i}", args, self.operator_role, member, child)
                gcp.iap.TunnelIamMember(  # one per operator, whatever the VM count
                    f"{name}-operator-{i}-iap", project=args.project, role=IAP_TUNNEL_ROLE,
                    member=member, condition=iap, opts=child)
        gcp.serviceaccount.IAMMember(
            f"{name}-function-actas",
            service_account_id=self.member.name,
            role="roles/iam.serviceAccountUser",
            member=fn_member,
            opts=child,
        )
        member_grants: list[pulumi.Resource] = [self.member]
        for role in VM_PROJECT_ROLES:
            member_grants.append(gcp.projects.IAMMember(
                f"{name}-member-{role.split('/')[1].replace('.', '-')}",
                project=args.project,
                role=role,
                member=self.member.email.apply(lambda e: f"serviceAccount:{e}"),
                opts=child,
            ))
        # the VMs run as the member account from their creation (`pulumi up` creates them)
        self.member_ready = propagated(f"{name}-member-iam", member_grants, child)
        self.register_outputs({
            "member": self.member.email,
            "scheduler": self.scheduler.email,
            "function": self.function.email,
            "role": self.role.name,
        })

    def _grant_by_region(self, name: str, args: GcpIdentitiesArgs, fn_member: pulumi.Output,
                         child: pulumi.ResourceOptions) -> None:
        """The function's conditioned grants on instances (start/stop) and, in the created
        lifecycle, on what it creates: one binding each, or one per candidate region when
        the candidates span several (`zones_by_region`): an IAM condition holds at most 12
        logical operators, and two terms a zone pass that with 6 zones in one condition."""
        split = zones_by_region(args)
        for region, zones in split.items():
            key = "" if len(split) == 1 else f"-{region}"
            self._grant(f"{name}-function-compute{key}", args, self.role, fn_member, child,
                        condition=instances_condition(args.project, zones or args.zone,
                                                      args.sweep))
            if self.create_role is not None:
                self._grant(f"{name}-function-create{key}", args, self.create_role, fn_member,
                            child, condition=created_condition(args.project, region, zones,
                                                               args.sweep, args.subnet))
                gcp.compute.SubnetworkIAMMember(  # its templates' subnet, on the subnet
                    f"{name}-function-subnet{key}", project=args.project, region=region,
                    subnetwork=args.subnet, role=SUBNET_ROLE, member=fn_member,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=args.subnet_resources))

    def _role(self, name: str, args: GcpIdentitiesArgs, suffix: str, what: str,
              permissions: tuple[str, ...], description: str,
              child: pulumi.ResourceOptions) -> gcp.projects.IAMCustomRole:  # fmt: skip
        return gcp.projects.IAMCustomRole(
            f"{name}-{suffix or 'function'}-role",
            role_id=self.role_tag.hex.apply(lambda tag: custom_role_id(args.sweep, suffix, tag)),
            title=f"spotbench {args.sweep} {what}",
            description=description,
            permissions=list(permissions),
            project=args.project,
            opts=child,
        )

    @staticmethod
    def _grant(name: str, args: GcpIdentitiesArgs, role: gcp.projects.IAMCustomRole,
               member: pulumi.Input[str], child: pulumi.ResourceOptions,
               condition: dict[str, str] | None = None) -> None:  # fmt: skip
        gcp.projects.IAMMember(
            name,
            project=args.project,
            role=role.role_id.apply(lambda rid: f"projects/{args.project}/roles/{rid}"),
            member=member,
            condition=condition,
            opts=child,
        )
