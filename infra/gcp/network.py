"""VPC, subnet (Private Google Access), Cloud Router + NAT, and the members-only firewall.

VMs have no external IPs: egress (image pulls, pip) goes through Cloud NAT, Google APIs
(storage, metadata-identity, the `done` function) through Private Google Access. Ingress
is only allowed from VMs carrying the sweep's network tag to VMs carrying it, on the
workload's ports — nothing from the internet (GCP's implied deny-all covers the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.common import workload_ports
from spotbench.spec import SweepSpec


def member_tag(sweep: str) -> str:
    return f"{sweep}-member"


@dataclass
class GcpNetworkArgs:
    spec: SweepSpec
    region: str
    project: str | None = None


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
            name=f"{name}-subnet",
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
        self.firewall = gcp.compute.Firewall(
            f"{name}-members",
            name=f"{name}-members",
            network=self.network.id,
            direction="INGRESS",
            source_tags=[self.tag],
            target_tags=[self.tag],
            allows=[{"protocol": "tcp", "ports": workload_ports(spec.workload.name)}],
            description="workload traffic between members of this sweep only",
            project=args.project,
            opts=child,
        )
        self.register_outputs({
            "network": self.network.id,
            "subnet": self.subnet.id,
            "tag": self.tag,
        })
