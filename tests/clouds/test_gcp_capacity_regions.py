"""Candidate zones across several regions on GCP (`zones: [us-central1, us-east1]`,
`lifecycle: created`), end to end under the local Compute Engine endpoint: control.start →
GcpCloud (regionInstances.bulkInsert per region, from that region's templates, one zone per
call in the order control asks) → FakeGce. With every zone of the first candidate region out
of capacity, a GPU group runs in a zone of the second within the same tick and nothing is
left in the first; the orphan sweep finds a created instance of the second region whose
group was lost; `ssh/exec --via iap` tunnels to the zone the instance was made in."""

from __future__ import annotations


from spotbench import control
from spotbench.auth import Caller
from spotbench.catalog import GCP_CATALOG
from spotbench.clouds.base import State
from spotbench.clouds.gcp import template_name
from spotbench.clouds.gcp.gce import GcpCloud
from spotbench.clouds.gcp.provider import PROVIDER, roster_of
from spotbench.results import Result, ResultStore, utcnow
from tests.clouds.fake_gce import FakeGce
from tests.clouds.test_gcp_capacity import gce  # noqa: F401  (the fixture: a FakeGce per test)
from tests.clouds.test_gcp_capacity import gpu_spec as one_region_spec

TICK = Caller("scheduler", "scheduler")
FIRST, SECOND = "us-central1", "us-east1"
CENTRAL = [GCP_CATALOG.zone_name(FIRST, x) for x in GCP_CATALOG.zones[FIRST]]
EAST = [GCP_CATALOG.zone_name(SECOND, x) for x in GCP_CATALOG.zones[SECOND]]
SA = "sb-cap-vm@proj.iam.gserviceaccount.com"


def gpu_spec():
    """The single-region capacity tests' GPU group (tests/clouds/test_gcp_capacity.py), its
    candidates the two regions (every zone of each), its home the first."""
    return one_region_spec(region=FIRST, zones=[FIRST, SECOND])


def declare_templates(gce: FakeGce, spec) -> None:
    """What infra declares (tests/infra/test_gcp_regions.py): per candidate region, one
    template per group and role, with the same name in each region."""
    assert spec.candidate_regions == [FIRST, SECOND]
    for region in spec.candidate_regions:
        for g in spec.plan():
            for m in g.members:
                gce.add_template(region, template_name(g.id, m.role),
                                 {**spec.labels, **g.member_labels(m)}, service_account=SA)


def cloud_of(gce: FakeGce, spec) -> GcpCloud:
    return GcpCloud("proj", zones=spec.candidate_zones, api_endpoint=gce.url, timeout_s=30,
                    retry_initial_s=0.05, poll_s=0.05, lifecycle="created", roster=roster_of(spec))


def test_capacity_gcp_first_region_exhausted_group_runs_in_the_second_within_the_tick(gce, tmp_path):
    spec = gpu_spec()
    assert spec.candidate_zones == CENTRAL + EAST
    declare_templates(gce, spec)
    sweep = control.Sweep(spec=spec, cloud=cloud_of(gce, spec),
                          store=ResultStore(f"file://{tmp_path}"))
    group = sweep.groups[0]
    names = [m.name for m in group.members]
    for zone in CENTRAL:  # every zone of the first candidate region
        gce.exhaust(zone)
    out = control.start(sweep, TICK)
    assert out["started"] == [group.id]
    assert {z for n in names for z in gce.zones_of(n)} == {EAST[0]}  # one zone, same tick
    assert not [k for k in gce.instances if k[0] in CENTRAL]  # nothing in the first region
    insts = sweep.cloud.query(group.labels)
    assert {i.state for i in insts} == {State.RUNNING} and {i.name for i in insts} == set(names)
    assert {i.zone for i in insts} == {EAST[0]}
    # each bulkInsert named its own region's template and allowed one zone of that region
    asked = []
    for body in gce.bulk_inserts:
        path = body["sourceInstanceTemplate"].split("/regions/", 1)[1]
        [zone] = [z.rsplit("/", 1)[-1] for z, p in body["locationPolicy"]["locations"].items()
                  if p["preference"] == "ALLOW"]
        assert path.split("/")[0] == GCP_CATALOG.region_of(zone)
        asked.append(zone)
    roles = len({m.role for m in group.members})
    assert asked == CENTRAL + [EAST[0]] * roles  # each central zone refused up front, then east
    records = sweep.store.start_records(out["run"])
    assert sorted((r.zone, set(r.errors.values())) for r in records) == sorted(
        [(z, {"capacity"}) for z in CENTRAL] + [(EAST[0], set())])

    # done, from a member in the second region: the group is deleted there, nothing left
    now = utcnow()
    sweep.store.write_group(out["run"], group.id, [Result(
        sweep="cap", run=out["run"], group=group.id, trial=1, workload="tf-mnist", metric="m",
        value=1.0, unit="s", cloud="gcp", machine_type="n1-standard-4", started_at=now,
        ended_at=now)])
    ident = gce.instances[(EAST[0], names[0])]["id"]
    done = control.done(sweep, Caller("member", names[0], zone=EAST[0], instance_id=ident,
                                      group=group.id), {"group": group.id})
    assert set(done["stopped"]) == set(names) and gce.instances == {}


def test_capacity_gcp_orphan_sweep_finds_a_created_instance_of_the_second_region(gce, tmp_path):
    """A group made in the second candidate region, then its record lost: teardown's orphan
    sweep (aggregated lists: every zone of every region) finds it there and deletes it."""
    from spotbench.clouds.gcp.orphans import GcpSweeper

    spec = gpu_spec()
    declare_templates(gce, spec)
    for zone in CENTRAL:
        gce.exhaust(zone)
    group = spec.plan()[0]
    made = cloud_of(gce, spec).start(group.labels, spec.candidate_zones)
    assert {(i.state, i.zone) for i in made} == {(State.RUNNING, EAST[0])}
    sweeper = GcpSweeper("proj", api_endpoint=gce.url)
    found = [r for r in sweeper.find("cap") if r.kind == "instance"]
    assert {(r.id, r.where) for r in found} == {(m.name, EAST[0]) for m in group.members}
    for r in found:
        sweeper.delete(r)
    assert gce.instances == {} and sweeper.find("cap") == []


def test_capacity_gcp_iap_tunnel_uses_the_zone_the_created_instance_is_in(gce, tmp_path, monkeypatch):
    """`spotbench ssh/exec --via iap`: gcloud's `--zone` is where the created VM is (a zone of
    the second region here), not the spec's first candidate."""
    from spotbench.ops.remote import AccessConfig, targets_for

    spec = gpu_spec()
    declare_templates(gce, spec)
    for zone in CENTRAL:
        gce.exhaust(zone)
    cloud = cloud_of(gce, spec)
    group = spec.plan()[0]
    cloud.start(group.labels, spec.candidate_zones)
    monkeypatch.delenv("SPOTBENCH_GCP_PROJECT", raising=False)
    cfg = AccessConfig(known_hosts=tmp_path / "kh", via="iap",
                       **PROVIDER.access_options(spec, "iap"))
    targets = targets_for(group, cloud, cfg)
    assert {t.host for t in targets} == {m.name for m in group.members}
    for t in targets:
        cmd = cfg.proxy_command(t) or ""
        assert f"--zone={EAST[0]}" in cmd and f"--zone={CENTRAL[0]}" not in cmd
        assert "--project=proj" in cmd
