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

The network path is explicit and consistent (tests/infra/test_gcp.py checks it on the
rendered stack): members have no external IP; Google APIs, the `done` function
(`*.cloudfunctions.net`) and Artifact Registry (`*.pkg.dev`) are reached through Private
Google Access, which Cloud Run ingress `internal` counts as the project's VPC (Cloud NAT
never translates traffic to Google APIs on a subnet with Private Google Access); Cloud NAT
serves everything else (an image on Docker Hub, pip). Cloud Scheduler in the same project
is internal for Cloud Run ingress, so start/stop need no public path either.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from spotbench.workload_registry import get_workload
from spotbench.spec import SweepSpec


IAP_RANGE = "35.235.240.0/20"  # https://cloud.google.com/iap/docs/using-tcp-forwarding


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
    region: str
    project: str | None = None


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
        self.subnet = gcp.compute.Subnetwork(
            f"{name}-subnet",
            name=subnet_name(name),
            network=self.network.id,
            region=args.region,
            ip_cidr_range=spec.gcp.network_cidr,
            private_ip_google_access=True,
            project=args.project,
            opts=child,
        )
        self.router = gcp.compute.Router(
            f"{name}-router",
            name=f"{name}-router",
            network=self.network.id,
            region=args.region,
            project=args.project,
            opts=child,
        )
        self.nat = gcp.compute.RouterNat(
            f"{name}-nat",
            name=f"{name}-nat",
            router=self.router.name,
            region=args.region,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
            subnetworks=[{
                "name": self.subnet.id,
                "source_ip_ranges_to_nats": ["ALL_IP_RANGES"],
            }],
            project=args.project,
            opts=child,
        )
        # every TCP/UDP port, group tag to the same tag: MPICH's hydra proxies and ranks and
        # TF servers listen on ephemeral ports no list can name (tests/fidelity measures them)
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
            "tag": self.tag,
        })
