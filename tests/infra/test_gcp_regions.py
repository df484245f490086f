"""The GCP program with candidate zones across several regions (`lifecycle: created`), under
Pulumi mocks (inputs read from the mocks): one subnet (and router + NAT) per candidate
region, carved without overlap from `gcp.network_cidr`; per region a template per group and
role naming that region's subnet and admitting that subnet's peers; the function's create
grants name each candidate region and no other, within IAM's 12 logical operators per
condition. A single-region sweep's network is what it was (names, CIDR)."""

from __future__ import annotations

import ipaddress
import re

import pulumi
import pytest
import yaml

from spotbench.catalog import GCP_CATALOG
from spotbench.clouds.gcp import template_name
from spotbench.spec import load_spec
from tests.infra.test_gcp import CONFIG, _file, _snapshot

TEMPLATE = "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
ROUTER = "gcp:compute/router:Router"
NAT = "gcp:compute/routerNat:RouterNat"
MEMBER = "gcp:projects/iAMMember:IAMMember"
REGIONS = ["us-central1", "us-east1", "europe-west4"]
IAM_MAX_LOGICAL_OPERATORS = 12  # cloud.google.com/iam/docs/conditions-overview#limitations


def _spec(**over) -> dict:
    return {"name": "mr", "cloud": "gcp", "region": "us-central1", "zones": list(REGIONS),
            "lifecycle": "created", "gcp": {"project": "proj-1"},
            "workload": {"name": "tf-mnist", "strategy": "parameter_server", "workers": 2, "ps": 1},
            "matrix": {"machine_type": ["n1-standard-4"], "accelerator": ["nvidia-tesla-t4"],
                       "accelerator_count": [1, 2]},
            "trials": 1, "spot": True, "deadline": "45m", "schedule": {"cron": "30 5 * * *"},
            **over}


def _declared(spec_dict: dict):
    from infra.gcp import GcpSweep, GcpSweepArgs

    spec = load_spec(spec_dict)
    return spec, _snapshot(CONFIG, lambda: GcpSweep(spec.name, GcpSweepArgs(spec=spec)))


@pytest.fixture(scope="module")
def several():
    return _declared(_spec())


def _zones(region: str) -> list[str]:
    return [GCP_CATALOG.zone_name(region, x) for x in GCP_CATALOG.zones[region]]


def test_capacity_gcp_regions_one_subnet_router_and_nat_per_region_inside_network_cidr(several):
    spec, snap = several
    subnets = {s.inputs["region"]: s for s in snap.of_type(SUBNET)}
    assert list(subnets) == REGIONS == spec.candidate_regions
    whole = ipaddress.ip_network(spec.gcp.network_cidr)
    ranges = [ipaddress.ip_network(s.inputs["ipCidrRange"]) for s in subnets.values()]
    assert all(r.subnet_of(whole) for r in ranges)
    assert not any(a.overlaps(b) for i, a in enumerate(ranges) for b in ranges[i + 1:])
    assert {r.prefixlen for r in ranges} == {26}  # /24 in 4 blocks (3 regions: ⌈log2 3⌉ bits)
    assert {s.inputs["name"] for s in subnets.values()} == {"mr-net-subnet"}  # regional names
    assert all(s.inputs["privateIpGoogleAccess"] for s in subnets.values())
    # egress: a router + NAT in each region, for that region's subnet
    routers = {r.inputs["region"] for r in snap.of_type(ROUTER)}
    nats = {n.inputs["region"]: n for n in snap.of_type(NAT)}
    assert routers == set(nats) == set(REGIONS)
    for region, nat in nats.items():
        [sub] = nat.inputs["subnetworks"]
        assert sub["name"] == f"{subnets[region].name}-id"
    # the carving is deterministic: the same spec, the same blocks
    _, again = _declared(_spec())
    assert sorted((s.inputs["region"], s.inputs["ipCidrRange"]) for s in again.of_type(SUBNET)) == \
        sorted((r, s.inputs["ipCidrRange"]) for r, s in subnets.items())


def test_capacity_gcp_regions_templates_per_region_name_their_regions_subnet(several):
    spec, snap = several
    subnets = {s.inputs["region"]: s for s in snap.of_type(SUBNET)}
    groups = spec.plan()
    roles = {m.role for m in groups[0].members}
    templates = snap.of_type(TEMPLATE)
    assert len(templates) == len(groups) * len(roles) * len(REGIONS)  # docs/gcp.md's count
    seen = set()
    for t in templates:
        region = t.inputs["region"]
        assert t.inputs["networkInterfaces"] == [{"subnetwork": f"{subnets[region].name}-id"}]
        seen.add((t.inputs["labels"]["spotbench-group"], t.inputs["labels"]["spotbench-role"], region))
        assert t.inputs["name"] == template_name(t.inputs["labels"]["spotbench-group"],
                                                 t.inputs["labels"]["spotbench-role"])
        # the host firewall admits its region's subnet as peers, not the others'
        doc = yaml.safe_load(t.inputs["metadata"]["user-data"])
        unit = _file(doc, "/etc/systemd/system/spotbench.service")
        mine = subnets[region].inputs["ipCidrRange"]
        assert f"-s {mine}" in unit
        for other, s in subnets.items():
            if other != region:
                assert s.inputs["ipCidrRange"] not in unit
    assert seen == {(g.id, r, region) for g in groups for r in roles for region in REGIONS}
    assert len({t.name for t in templates}) == len(templates)  # Pulumi names differ


def test_capacity_gcp_regions_iam_conditions_name_each_candidate_region_and_no_other(several):
    spec, snap = several
    bindings = [b for b in snap.of_type(MEMBER) if b.inputs.get("condition")
                and "instances only" in b.inputs["condition"]["title"]]
    expressions = [b.inputs["condition"]["expression"] for b in bindings]
    create = [e for e in expressions if "/instanceTemplates/" in e]
    assert len(create) == len(REGIONS)  # one create binding per candidate region
    named_regions = {GCP_CATALOG.region_of(z) for e in create
                     for z in re.findall(r"/zones/([a-z0-9-]+)/", e)}
    named_zones = {z for e in expressions for z in re.findall(r"/zones/([a-z0-9-]+)/", e)}
    assert named_regions == set(REGIONS)
    assert named_zones == set(spec.candidate_zones) == {z for r in REGIONS for z in _zones(r)}
    for e in create:  # each binding: one region's zones, template prefix and subnet
        [region] = {GCP_CATALOG.region_of(z) for z in re.findall(r"/zones/([a-z0-9-]+)/", e)}
        assert "/subnetworks/" not in e  # not condition-able: granted on the subnet (#37)
        # the template term holds whichever form IAM names a regional template in
        assert 'resource.name.extract("/instanceTemplates/{name}").startsWith("mr--")' in e
    subnets = [b.inputs for b in snap.of_type("gcp:compute/subnetworkIAMMember:SubnetworkIAMMember")]
    assert sorted((b["region"], b["subnetwork"]) for b in subnets) == sorted(
        (r, "mr-net-subnet") for r in REGIONS)
    for e in expressions:  # IAM refuses a condition with more logical operators
        assert len(re.findall(r"\|\||&&|!(?!=)", e)) <= IAM_MAX_LOGICAL_OPERATORS, e


def test_capacity_gcp_single_region_keeps_its_subnet_router_nat_and_templates():
    """A sweep whose VMs use one region declares the network it did before several regions
    existed: the same Pulumi names, GCE names and CIDR (an existing stack does not change)."""
    for over in ({"zones": ["us-central1-a", "us-central1-b"]},
                 {"zones": None, "zone": "us-central1-a", "lifecycle": "stopped",
                  "region": None, "gcp": {"project": "proj-1", "network_cidr": "10.77.3.0/24"}}):
        spec, snap = _declared(_spec(**over))
        [subnet], [router], [nat] = (snap.of_type(t) for t in (SUBNET, ROUTER, NAT))
        assert (subnet.name, subnet.inputs["name"], subnet.inputs["region"],
                subnet.inputs["ipCidrRange"]) == (
            "mr-net-subnet", "mr-net-subnet", "us-central1", spec.gcp.network_cidr)
        assert (router.name, router.inputs["name"], nat.name, nat.inputs["name"]) == (
            "mr-net-router", "mr-net-router", "mr-net-nat", "mr-net-nat")
        for t in snap.of_type(TEMPLATE):
            assert t.name.endswith("-template")
            assert t.inputs["networkInterfaces"] == [{"subnetwork": "mr-net-subnet-id"}]
        expressions = [b.inputs["condition"]["expression"] for b in snap.of_type(MEMBER)
                       if "instances only" in (b.inputs.get("condition") or {}).get("title", "")]
        assert {r for e in expressions for r in re.findall(r"/regions/([a-z0-9-]+)/", e)} <= {
            "us-central1"}


def test_capacity_gcp_regions_refuse_a_network_cidr_too_small_naming_it():
    with pytest.raises(pulumi.RunError, match=r"gcp\.network_cidr 10\.42\.0\.0/28 is too small"
                       r".*3 candidate regions.*gcp\.network_cidr: 10\.42\.0\.0/"):
        _declared(_spec(gcp={"project": "proj-1", "network_cidr": "10.42.0.0/28"}))
