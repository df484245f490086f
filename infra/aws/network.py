"""The sweep's network: a VPC whose members live in one private subnet, no public IPs.

Egress (image pulls, the `done` function URL, which is not reachable through PrivateLink)
goes through one NAT gateway in a small public subnet; S3 traffic takes a free gateway
endpoint instead. Each run group has its own security group, which lets the group's members
reach each other on every TCP and UDP port (MPICH's hydra proxies and ranks, TF servers
listen on ephemeral ports; tests/fidelity measures them): not another group's VMs, nothing
from the internet. Egress is open (image pulls, S3, the done URL: the one 0.0.0.0/0 rule).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from spotbench.spec import SweepSpec


def public_cidr(vpc_cidr: str, private_cidr: str) -> str:
    """A /28 of the VPC for the NAT gateway that does not overlap the private subnet."""
    vpc = ipaddress.ip_network(vpc_cidr)
    private = ipaddress.ip_network(private_cidr)
    if not private.subnet_of(vpc):
        raise pulumi.RunError(f"aws.subnet_cidr {private_cidr} is not inside aws.vpc_cidr {vpc_cidr}")
    for candidate in vpc.subnets(new_prefix=max(28, vpc.prefixlen)):
        if not candidate.overlaps(private):
            return str(candidate)
    raise pulumi.RunError(
        f"aws.vpc_cidr {vpc_cidr} has no room for the NAT subnet beside {private_cidr}; "
        "use a larger VPC (e.g. /16) or a smaller subnet"
    )


def zone_cidrs(vpc_cidr: str, private_cidr: str, zones: list[str]) -> dict[str, str]:
    """`lifecycle: created`: a members' subnet per candidate Availability Zone (a subnet
    lives in one AZ). The first candidate gets `aws.subnet_cidr`; each other one the next
    block of the same size in the VPC that overlaps neither it nor the NAT subnet."""
    if not zones:
        return {}
    vpc, private = ipaddress.ip_network(vpc_cidr), ipaddress.ip_network(private_cidr)
    nat = ipaddress.ip_network(public_cidr(vpc_cidr, private_cidr))
    free = (c for c in vpc.subnets(new_prefix=private.prefixlen)
            if not c.overlaps(private) and not c.overlaps(nat))
    out = {zones[0]: private_cidr}
    for zone in zones[1:]:
        block = next(free, None)
        if block is None:
            raise pulumi.RunError(
                f"aws.vpc_cidr {vpc_cidr} has no room for a {private_cidr}-sized subnet in each "
                f"of the {len(zones)} candidate zones; use a larger VPC or fewer `zones`")
        out[zone] = str(block)
    return out


@dataclass
class AwsNetworkArgs:
    spec: SweepSpec
    tags: dict[str, str]
    zone: str | None = None  # spec.zone (created lifecycle: the first candidate); None: AWS picks
    # created lifecycle: candidate zone → members' subnet CIDR (`zone_cidrs`); {}: one subnet
    zone_cidrs: dict[str, str] | None = None
    # the region of this network (its provider's); None: the spec's `region` (the home). A
    # network in another candidate region has no S3 gateway endpoint: a gateway endpoint only
    # reaches its own region's buckets, and the results bucket and the registry's layers are
    # in the home region (that traffic goes through the NAT gateway)
    region: str | None = None


class AwsNetwork(pulumi.ComponentResource):
    def __init__(self, name: str, args: AwsNetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotbench:aws:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        spec, tags = args.spec, args.tags
        cidr, private = spec.aws.vpc_cidr, spec.aws.subnet_cidr

        def tagged(suffix: str) -> dict[str, str]:
            return {**tags, "Name": f"{spec.name}-{suffix}"}

        self.vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=cidr, enable_dns_support=True,
                               enable_dns_hostnames=True, tags=tagged("vpc"), opts=child)
        self.subnet = aws.ec2.Subnet(
            f"{name}-private", vpc_id=self.vpc.id, cidr_block=private,
            availability_zone=args.zone, map_public_ip_on_launch=False,
            tags=tagged("private"), opts=child,
        )
        self.public_subnet = aws.ec2.Subnet(
            f"{name}-public", vpc_id=self.vpc.id, cidr_block=public_cidr(cidr, private),
            availability_zone=args.zone, map_public_ip_on_launch=False,
            tags=tagged("nat"), opts=child,
        )
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=self.vpc.id, tags=tagged("igw"),
                                      opts=child)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt", vpc_id=self.vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
            tags=tagged("public"), opts=child,
        )
        aws.ec2.RouteTableAssociation(f"{name}-public-rta", subnet_id=self.public_subnet.id,
                                      route_table_id=public_rt.id, opts=child)
        eip = aws.ec2.Eip(f"{name}-nat-ip", domain="vpc", tags=tagged("nat"), opts=child)
        self.nat = aws.ec2.NatGateway(
            f"{name}-nat", allocation_id=eip.id, subnet_id=self.public_subnet.id,
            tags=tagged("nat"), opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
        )
        self.private_rt = aws.ec2.RouteTable(
            f"{name}-private-rt", vpc_id=self.vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": self.nat.id}],
            tags=tagged("private"), opts=child,
        )
        aws.ec2.RouteTableAssociation(f"{name}-private-rta", subnet_id=self.subnet.id,
                                      route_table_id=self.private_rt.id, opts=child)
        self.zone_subnets = self._zone_subnets(name, args, tagged, child)
        self.s3_endpoint = aws.ec2.VpcEndpoint(
            f"{name}-s3", vpc_id=self.vpc.id, vpc_endpoint_type="Gateway",
            service_name=f"com.amazonaws.{spec.region}.s3",
            route_table_ids=[self.private_rt.id], tags=tagged("s3"), opts=child,
        ) if args.region in (None, spec.region) else None
        # one security group per run group, admitting only itself on every TCP/UDP port: a
        # VM of another group reaches none of a member's ports
        self.security_groups: dict[str, aws.ec2.SecurityGroup] = {}
        self.ingress: list[aws.vpc.SecurityGroupIngressRule] = []
        self.egress: list[aws.vpc.SecurityGroupEgressRule] = []
        for g in spec.plan():
            sg = self.security_groups[g.id] = aws.ec2.SecurityGroup(
                f"{name}-members-{g.id}", vpc_id=self.vpc.id,
                description=f"spotbench {spec.name}: members of group {g.id} reach each other",
                tags={**tagged(f"members-{g.id}"), "spotbench-group": g.id}, opts=child,
            )
            self.ingress += [
                aws.vpc.SecurityGroupIngressRule(
                    f"{name}-members-{g.id}-{proto}",
                    security_group_id=sg.id, referenced_security_group_id=sg.id,
                    ip_protocol=proto, from_port=0, to_port=65535,
                    description=f"every {proto} port between members of {g.id}",
                    tags=tags, opts=child,
                )
                for proto in ("tcp", "udp")
            ]
            self.egress.append(aws.vpc.SecurityGroupEgressRule(
                f"{name}-egress-{g.id}", security_group_id=sg.id, ip_protocol="-1",
                cidr_ipv4="0.0.0.0/0", description="image pulls, S3, the done function URL",
                tags=tags, opts=child,
            ))
        self.register_outputs({
            "vpc_id": self.vpc.id, "subnet_id": self.subnet.id, "nat_gateway_id": self.nat.id,
            "zone_subnet_ids": {z: s.id for z, s in self.zone_subnets.items()},
            "security_group_ids": {gid: sg.id for gid, sg in self.security_groups.items()},
        })

    def _zone_subnets(self, name: str, args: AwsNetworkArgs, tagged,
                      child: pulumi.ResourceOptions) -> dict[str, aws.ec2.Subnet]:
        """The members' subnet of each candidate zone (the first is `self.subnet`), routed
        through the one NAT gateway (in the first zone: traffic from the others crosses AZs)."""
        cidrs = args.zone_cidrs or {}
        out: dict[str, aws.ec2.Subnet] = {}
        for n, (zone, cidr) in enumerate(cidrs.items()):
            if n == 0:
                out[zone] = self.subnet
                continue
            out[zone] = aws.ec2.Subnet(
                f"{name}-private-{zone}", vpc_id=self.vpc.id, cidr_block=cidr,
                availability_zone=zone, map_public_ip_on_launch=False,
                tags=tagged(f"private-{zone}"), opts=child)
            aws.ec2.RouteTableAssociation(f"{name}-private-rta-{zone}", subnet_id=out[zone].id,
                                          route_table_id=self.private_rt.id, opts=child)
        return out
