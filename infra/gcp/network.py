"""VPC, subnet (Private Google Access), Cloud Router + NAT, and the members-only firewall.

VMs have no external IPs: egress (image pulls, pip) goes through Cloud NAT, Google APIs
(storage, metadata-identity, the `done` function) through Private Google Access. Ingress
is only allowed between the VMs of one run group (each group's VMs carry its own network
tag, `group_tag`, and a rule per group admits that tag to that tag) on every TCP/UDP
port — a VM of another group reaches none of them — and from Identity-Aware Proxy's TCP
forwarding range (`IAP_RANGE`) to
the ssh ports (`spotbench ssh/exec/collect --via iap`; who may tunnel is IAM's
`iap.tunnelInstances.accessViaIAP`, granted once per operator, conditioned on the sweep's
addresses and ssh ports: infra/gcp/identity.py) — nothing from the
internet (GCP's implied deny-all covers the rest).

Several candidate regions (`lifecycle: created`, `spec.candidate_regions`): the VPC and its
firewall rules are global (tags match across regions), subnets and Cloud Router + NAT are
regional, so each candidate region gets its own subnet (with Private Google Access) and
router + NAT; `gcp.network_cidr` is carved into one block per region (`region_cidrs`), so
the IAP tunnel condition (an address of `network_cidr`) still covers every member. A sweep
with one VM region keeps exactly its one subnet, router and NAT (names and CIDR) as before.

The network path is explicit and consistent (tests/infra/test_gcp.py checks it on the
rendered stack): members have no external IP; Google APIs, the `done` function
(`*.cloudfunctions.net`) and Artifact Registry (`*.pkg.dev`) are reached through Private
Google Access, which Cloud Run ingress `internal` counts as the project's VPC (Cloud NAT
never translates traffic to Google APIs on a subnet with Private Google Access); Cloud NAT
serves everything else (an image on Docker Hub, pip). Cloud Scheduler in the same project
is internal for Cloud Run ingress, so start/stop need no public path either.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from spotbench.plan import concurrent_footprint
from spotbench.workload_registry import get_workload
from spotbench.spec import SweepSpec


IAP_RANGE = "35.235.240.0/20"  # https://cloud.google.com/iap/docs/using-tcp-forwarding
SMALLEST_SUBNET = 29  # GCE's smallest IPv4 subnet range (/29); it keeps 4 addresses of each
RESERVED_PER_SUBNET = 4  # network, gateway, second-to-last and broadcast addresses


def vm_regions(spec: SweepSpec, home: str) -> list[str]:
    """The regions the sweep's VMs may run in, first choice first: the created lifecycle's
    candidate regions (`spec.candidate_regions`), else the home region alone."""
    if spec.lifecycle == "created" and spec.candidate_regions:
        return list(spec.candidate_regions)
    return [home]


def region_cidrs(spec: SweepSpec, regions: list[str]) -> dict[str, str]:
    """region → its subnet's range: `gcp.network_cidr` itself for one region (today's
    subnet), else `network_cidr` split into 2^⌈log2 n⌉ equal blocks, the i-th region taking
    the i-th (deterministic: the spec's region order). Each block must be a GCE subnet
    (/29 or larger) and hold the VMs the sweep runs at once (they may all land in one
    region): else a `ValueError` naming `gcp.network_cidr`."""
    cidr = spec.gcp.network_cidr
    net = ipaddress.IPv4Network(cidr, strict=False)
    if len(regions) == 1:
        return {regions[0]: cidr}
    bits = math.ceil(math.log2(len(regions)))
    prefix = net.prefixlen + bits
    vms = int(concurrent_footprint(spec, spec.plan(), lambda g: len(g.members)))
    largest = min(SMALLEST_SUBNET, 32 - math.ceil(math.log2(vms + RESERVED_PER_SUBNET)))
    if prefix > largest:
        raise ValueError(
            f"gcp.network_cidr {cidr} is too small for {len(regions)} candidate regions "
            f"({', '.join(regions)}): each region's subnet gets a /{prefix} of it, and must be "
            f"a /{largest} or larger (a GCE subnet is /{SMALLEST_SUBNET} at least, and holds "
            f"the {vms} VMs the sweep runs at once plus {RESERVED_PER_SUBNET} reserved "
            f"addresses); give a larger range, e.g. gcp.network_cidr: "
            f"{net.supernet(new_prefix=max(0, largest - bits))}")
    blocks = net.subnets(new_prefix=prefix)
    return {region: str(next(blocks)) for region in regions}


def ssh_ports(workload: str) -> list[str]:
    """Ports an operator reaches through IAP: the host's sshd, and an MPI workload's
    container sshd (its service port: `spotbench exec --port`)."""
    desc = get_workload(workload)
    return ["22"] + ([str(desc.port)] if desc.mpi and desc.port else [])


def member_tag(sweep: str) -> str:
    return f"{sweep}-member"


def group_tag(group_id: str) -> str:
    """The network tag of one run group's VMs: its id (`<sweep>--<key>-t<n>`, already a valid
    tag: lowercase, digits, '-', starting with a letter, well under 63 characters)."""
    return group_id


@dataclass
class GcpNetworkArgs:
    spec: SweepSpec
    region: str  # the home region; the VMs' regions are `regions` (default: the home alone)
    project: str | None = None
    regions: list[str] | None = None


def subnet_name(network: str) -> str:
    """The subnet of the network component `network` (the created lifecycle's IAM names it)."""
    return f"{network}-subnet"


class GcpNetwork(pulumi.ComponentResource):
    def __init__(self, name: str, args: GcpNetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotbench:gcp:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        spec = args.spec
        self.tag = member_tag(spec.name)
        self.network = gcp.compute.Network(
            f"{name}-vpc",
            name=f"{name}-vpc",
            auto_create_subnetworks=False,
            project=args.project,
            description=f"spotbench sweep {spec.name}",
            opts=child,
        )
        regions = args.regions or [args.region]
        self.cidrs = region_cidrs(spec, regions)  # one region: `network_cidr` itself
        self.subnets: dict[str, gcp.compute.Subnetwork] = {}
        self.routers: dict[str, gcp.compute.Router] = {}
        self.nats: dict[str, gcp.compute.RouterNat] = {}
        for region in regions:
            # one region: today's resource names; several: the region in each (GCE names
            # stay the same: subnets, routers and NATs are regional)
            key = "" if len(regions) == 1 else f"-{region}"
            subnet = self.subnets[region] = gcp.compute.Subnetwork(
                f"{name}-subnet{key}", name=subnet_name(name), network=self.network.id,
                region=region, ip_cidr_range=self.cidrs[region],
                private_ip_google_access=True, project=args.project, opts=child)
            router = self.routers[region] = gcp.compute.Router(
                f"{name}-router{key}", name=f"{name}-router", network=self.network.id,
                region=region, project=args.project, opts=child)
            self.nats[region] = gcp.compute.RouterNat(
                f"{name}-nat{key}", name=f"{name}-nat", router=router.name, region=region,
                nat_ip_allocate_option="AUTO_ONLY",
                source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
                subnetworks=[{"name": subnet.id, "source_ip_ranges_to_nats": ["ALL_IP_RANGES"]}],
                project=args.project, opts=child)
        self.subnet = self.subnets[regions[0]]  # the first (the stopped lifecycle's only) one
        self.router, self.nat = self.routers[regions[0]], self.nats[regions[0]]
        # every TCP/UDP port, group tag to the same tag: MPICH's hydra proxies and ranks and
        # TF servers listen on ephemeral ports no list can name (tests/fidelity measures them).
        # Global: a source tag matches the group's VMs in every region of the VPC.
        self.firewalls = {
            g.id: gcp.compute.Firewall(
                f"{name}-members-{g.id}",
                name=f"{group_tag(g.id)}-members",
                network=self.network.id,
                direction="INGRESS",
                source_tags=[group_tag(g.id)],
                target_tags=[group_tag(g.id)],
                allows=[{"protocol": "tcp"}, {"protocol": "udp"}],
                description=f"every TCP/UDP port between members of group {g.id} only",
                project=args.project,
                opts=child,
            )
            for g in spec.plan()
        }
        self.iap_firewall = gcp.compute.Firewall(
            f"{name}-iap-ssh",
            name=f"{name}-iap-ssh",
            network=self.network.id,
            direction="INGRESS",
            source_ranges=[IAP_RANGE],
            target_tags=[self.tag],
            allows=[{"protocol": "tcp", "ports": ssh_ports(spec.workload.name)}],
            description="ssh through Identity-Aware Proxy TCP forwarding only",
            project=args.project,
            opts=child,
        )
        self.register_outputs({
            "network": self.network.id,
            "subnet": self.subnet.id,
            "subnets": {r: sn.id for r, sn in self.subnets.items()},
            "tag": self.tag,
        })
