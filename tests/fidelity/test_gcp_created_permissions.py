"""The created lifecycle's start function under the declared IAM policy: its
regionInstances.bulkInsert calls (and the deletes of stop) are allowed by the roles infra
declares for it (the groups are spread: their templates name a placement policy), scoped
to the sweep; a create outside the sweep's name prefix (another
sweep's names, even one whose name starts with this sweep's) is refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spotbench.auth import Caller
from spotbench.clouds.gcp.gce import GcpCloud
from spotbench.clouds.gcp.provider import roster_of
from spotbench.plan import sweep_labels
from tests.clouds.google_endpoint import Call, GoogleEndpoint
from tests.fidelity.gcp_iam import DeclaredPolicy, bulk_insert_needs, sa
from tests.fidelity.test_gcp_permissions import (
    BETA, PROJECT, REGION, Deployment, Enforcer, World, _function, deploy,
)

pytestmark = pytest.mark.fidelity
ZONES = ["us-central1-a", "us-central1-b"]
TEMPLATE = "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"


def _created(name: str) -> dict:
    return {"name": name, "cloud": "gcp", "region": REGION, "zones": ZONES,
            "lifecycle": "created", "gcp": {"project": PROJECT},
            "workload": {"name": "osu", "benchmarks": ["latency"]},
            "matrix": {"machine_type": ["n2-standard-2"], "placement": ["spread"]}, "trials": 1, "concurrency": 1,
            "schedule": {"cron": "0 3 * * *"}, "deadline": "30m"}


def _template_facts(t, region: str, subnet: str) -> tuple[str, str, list[str], bool]:
    """What the checker needs of a declared template: (subnet, account, the resource
    policies it names, whether it labels its boot disk) — the policy as GCE names it."""
    link = t.inputs.get("resourcePolicies")
    policies = [f"projects/{PROJECT}/regions/{region}/resourcePolicies/{link.rsplit('/', 1)[-1]}"
                ] if link else []
    return (subnet, t.inputs["serviceAccount"]["email"], policies,
            bool(t.inputs["disks"][0].get("labels")))


def _world(alpha: Deployment, beta: Deployment) -> Iterator[World]:
    """Both sweeps deployed under one endpoint whose enforcer checks a bulkInsert against the
    declared policy with each template's facts (its region's subnet: one per region)."""
    policy = DeclaredPolicy.from_declared(alpha.declared + beta.declared, PROJECT)
    templates = {}
    for dep in (alpha, beta):
        subnets = {s.inputs["region"]: s.inputs["name"]
                   for s in dep.of_type("gcp:compute/subnetwork:Subnetwork")}
        for t in dep.of_type(TEMPLATE):
            region = t.inputs["region"]
            name = f"projects/{PROJECT}/regions/{region}/instanceTemplates/{t.inputs['name']}"
            templates[name] = _template_facts(
                t, region, f"projects/{PROJECT}/regions/{region}/subnetworks/{subnets[region]}")

    class CreatedEnforcer(Enforcer):
        def __call__(self, call: Call) -> str | None:
            if call.method == "POST" and call.path.endswith("/instances/bulkInsert"):
                needs = bulk_insert_needs(call, templates.get)
                self.needs.append((call, needs))
                missing = [n.permission for n in needs if not self.policy.allows(call.identity, n)]
                return ", ".join(missing) or None
            return super().__call__(call)

    enforcer = CreatedEnforcer(policy)
    endpoint = GoogleEndpoint(authorize=enforcer)
    enforcer.endpoint = endpoint
    endpoint.gce.project = PROJECT
    for dep in (alpha, beta):
        endpoint.gcs.add_bucket(dep.bucket)
        for t in dep.of_type(TEMPLATE):
            endpoint.gce.add_template(t.inputs["region"], t.inputs["name"], t.inputs["labels"],
                                      service_account=t.inputs["serviceAccount"]["email"])
    yield World(alpha, beta, endpoint, enforcer)
    endpoint.stop()


@pytest.fixture(scope="module")
def created() -> Iterator[World]:
    yield from _world(deploy(_created("alpha")), deploy(_created(BETA)))


def test_capacity_gcp_start_function_bulk_inserts_are_allowed_and_stop_deletes(created, monkeypatch):
    alpha, ep = created.alpha, created.endpoint
    ep.gce.exhaust("us-central1-a")  # the first candidate has no room: b, same start
    scheduler = alpha.jobs[0]["httpTarget"]["oidcToken"]["serviceAccountEmail"]
    out = _function(created, alpha, "start", Caller("scheduler", scheduler), {"sweep": "alpha"},
                    monkeypatch)
    (group,) = out["started"]
    made = {n: z for (z, n) in ep.gce.instances}
    assert made and set(made.values()) == {"us-central1-b"}
    bulk = [(c, needs) for c, needs in created.enforcer.needs if c.path.endswith("bulkInsert")]
    assert bulk and all(c.identity == alpha.function_sa for c, _ in bulk)
    denied = [c for c in ep.calls if c.denied]
    assert denied == [], [(c.path, c.denied) for c in denied]
    checked = {n.permission for _, needs in bulk for n in needs}
    assert {"compute.instances.create", "compute.disks.create", "compute.subnetworks.use",
            "compute.instanceTemplates.useReadOnly", "iam.serviceAccounts.actAs",
            "compute.resourcePolicies.use", "compute.disks.setLabels"} <= checked
    _function(created, alpha, "stop", Caller("scheduler", scheduler), {"sweep": "alpha"},
              monkeypatch)
    assert ep.gce.instances == {}
    assert not [c for c in ep.calls if c.denied]


def test_capacity_gcp_create_outside_the_sweeps_prefix_is_refused(created, monkeypatch):
    alpha, beta, ep = created.alpha, created.beta, created.endpoint
    ep.gce.replenish("us-central1-a")
    before = len(ep.calls)
    with created.as_identity(alpha.function_sa, monkeypatch) as url:
        # alpha's function making beta's group (beta's names start with alpha's name)
        cloud = GcpCloud(PROJECT, zones=ZONES, api_endpoint=url, retry_attempts=1,
                         lifecycle="created", roster=roster_of(beta.spec))
        out = cloud.start(beta.spec.plan()[0].labels, ZONES)
    assert out and all(i.error is not None and "403" in i.detail for i in out)
    assert ep.gce.instances == {}
    refused = [c for c in ep.calls[before:] if c.path.endswith("bulkInsert")]
    assert refused and all(c.denied and "compute.instances.create" in c.denied for c in refused)
    # and directly: a create named outside `alpha--` anywhere is not granted
    policy = created.enforcer.policy
    need = next(n for _, needs in created.enforcer.needs for n in needs
                if n.permission == "compute.instances.create")
    other = need.__class__(need.permission, need.resource.replace("/instances/alpha--",
                                                                  "/instances/other--"), need.type)
    assert policy.allows(sa(alpha.function_sa.removeprefix("serviceAccount:")) if not
                         alpha.function_sa.startswith("serviceAccount:") else alpha.function_sa, need)
    assert not policy.allows(alpha.function_sa, other)
    assert sweep_labels("alpha")  # the sweep's own labels are untouched


# ---- candidates across regions: the grants follow each candidate region, no other ------
EAST_ZONE = "us-east1-b"


@pytest.fixture(scope="module")
def regions() -> Iterator[World]:
    """alpha's candidates span us-central1 and us-east1 (home us-central1): per region a
    subnet and templates; beta is a one-region sweep whose name alpha's prefixes."""
    yield from _world(deploy({**_created("alpha"), "zones": ["us-central1-a", EAST_ZONE]}),
                      deploy(_created(BETA)))


def test_capacity_gcp_regions_start_function_creates_in_the_second_region_granted(regions, monkeypatch):
    """The first candidate region out of capacity: the start function's bulkInsert in the
    second region (its template, its subnet, its zone) is allowed by the declared grants."""
    alpha, ep = regions.alpha, regions.endpoint
    ep.gce.exhaust("us-central1-a")
    scheduler = alpha.jobs[0]["httpTarget"]["oidcToken"]["serviceAccountEmail"]
    out = _function(regions, alpha, "start", Caller("scheduler", scheduler), {"sweep": "alpha"},
                    monkeypatch)
    assert out["started"] and {z for (z, _) in ep.gce.instances} == {EAST_ZONE}
    assert not [c for c in ep.calls if c.denied], [(c.path, c.denied) for c in ep.calls if c.denied]
    checked = {(n.permission, n.resource) for c, needs in regions.enforcer.needs
               if "/regions/us-east1/" in c.path for n in needs}
    assert ("compute.subnetworks.use",
            f"projects/{PROJECT}/regions/us-east1/subnetworks/alpha-net-subnet") in checked
    assert any(p == "compute.instanceTemplates.useReadOnly" and "/regions/us-east1/" in r
               for p, r in checked)
    _function(regions, alpha, "stop", Caller("scheduler", scheduler), {"sweep": "alpha"},
              monkeypatch)
    assert ep.gce.instances == {}


def test_capacity_gcp_regions_grants_stop_at_the_candidates(regions):
    """Nothing beyond the candidates: not another zone of a candidate region, not another
    region's subnet or templates, not another sweep's names in a candidate zone."""
    policy, fn = regions.enforcer.policy, regions.alpha.function_sa
    need = next(n for c, needs in regions.enforcer.needs for n in needs
                if n.permission == "compute.instances.create" and f"/zones/{EAST_ZONE}/" in n.resource)
    subnet = next(n for c, needs in regions.enforcer.needs for n in needs
                  if n.permission == "compute.subnetworks.use" and "/us-east1/" in n.resource)
    assert policy.allows(fn, need) and policy.allows(fn, subnet)
    for other in (need.__class__(need.permission, need.resource.replace(EAST_ZONE, "us-east1-c"), need.type),
                  need.__class__(need.permission, need.resource.replace(EAST_ZONE, "europe-west4-a"), need.type),
                  need.__class__(need.permission, need.resource.replace("/instances/alpha--",
                                                                        "/instances/other--"), need.type),
                  subnet.__class__(subnet.permission, subnet.resource.replace("us-east1", "europe-west4"),
                                   subnet.type)):
        assert not policy.allows(fn, other), other.resource


def test_capacity_gcp_a_template_named_either_way_is_the_sweeps_and_no_other(created):
    """research.md §1 G2: IAM's `resource.name` of a regional template is undocumented; the
    create condition grants the sweep's templates in the regional and the global form, and
    no other sweep's (beta's names start with alpha's)."""
    policy, fn = created.enforcer.policy, created.alpha.function_sa
    Need = type(next(n for _, needs in created.enforcer.needs for n in needs))
    [group] = created.alpha.spec.plan()[:1]
    name = f"{group.id}-launcher"
    for form in (f"projects/{PROJECT}/regions/{REGION}/instanceTemplates/{name}",
                 f"projects/{PROJECT}/global/instanceTemplates/{name}"):
        use = Need("compute.instanceTemplates.useReadOnly", form, "compute.googleapis.com/InstanceTemplate")
        assert policy.allows(fn, use), form
        other = Need(use.permission, form.replace("/alpha--", f"/{BETA}--"), use.type)
        assert not policy.allows(fn, other), other.resource
