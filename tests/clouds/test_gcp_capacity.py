"""The created lifecycle on GCP, end to end under the local Compute Engine endpoint:
control.start → GcpCloud (regionInstances.bulkInsert from the group's templates, one zone
per call in the order control asks) → FakeGce. With the first candidate zone out of
capacity, a GPU group runs in another zone within the same tick and nothing is left in the
first; done deletes it; a preempted group is retried in a zone with capacity."""

from __future__ import annotations

import pytest

from spotbench import control
from spotbench.auth import Caller
from spotbench.clouds.base import ErrorKind, State
from spotbench.clouds.gcp import template_name
from spotbench.clouds.gcp.gce import GcpCloud
from spotbench.clouds.gcp.provider import roster_of
from spotbench.results import Result, ResultStore, utcnow
from spotbench.spec import load_spec
from tests.clouds.fake_gce import FakeGce

TICK = Caller("scheduler", "scheduler")
ZONES = ["us-central1-a", "us-central1-b", "us-central1-f"]
SA = "sb-cap-vm@proj.iam.gserviceaccount.com"


def gpu_spec(**over):
    return load_spec({"name": "cap", "cloud": "gcp", "zones": ZONES, "lifecycle": "created",
                      "gcp": {"project": "proj"}, "workload": {"name": "tf-mnist", "workers": 1,
                                                               "strategy": "parameter_server", "ps": 1},
                      "matrix": {"machine_type": ["n1-standard-4"],
                                 "accelerator": ["nvidia-tesla-t4"], "accelerator_count": [1]},
                      "trials": 1, "concurrency": 1, "schedule": {"cron": "0 3 * * *"},
                      "deadline": "30m", **over})


@pytest.fixture
def gce():
    fake = FakeGce(project="proj").start()
    yield fake
    fake.stop()


def declare_templates(gce: FakeGce, spec) -> None:
    """What infra declares (tests/infra/test_gcp_templates.py): one template per group and
    role, with infra's own termination action (infra/gcp/vms.py `scheduling`)."""
    from infra.gcp.vms import scheduling

    action = scheduling(spec, gpu=True, compact=False, domain=None)["instance_termination_action"]
    for g in spec.plan():
        for m in g.members:
            gce.add_template("us-central1", template_name(g.id, m.role),
                             {**spec.labels, **g.member_labels(m)}, service_account=SA,
                             termination_action=action)


def make_sweep(gce: FakeGce, tmp_path, spec=None) -> control.Sweep:
    spec = spec or gpu_spec()
    declare_templates(gce, spec)
    cloud = GcpCloud("proj", zones=spec.candidate_zones, api_endpoint=gce.url, timeout_s=30,
                     retry_initial_s=0.05, poll_s=0.05, lifecycle="created",
                     roster=roster_of(spec), max_run_s=spec.deadline.total_seconds() + 600)
    return control.Sweep(spec=spec, cloud=cloud, store=ResultStore(f"file://{tmp_path}"))


def members_of(sweep) -> list[str]:
    return [m.name for m in sweep.groups[0].members]


def test_capacity_gcp_first_zone_exhausted_group_runs_in_the_next_within_the_tick(gce, tmp_path):
    sweep = make_sweep(gce, tmp_path)
    group = sweep.groups[0]
    gce.exhaust("us-central1-a")
    out = control.start(sweep, TICK)
    assert out["started"] == [group.id]
    assert {z for n in members_of(sweep) for z in gce.zones_of(n)} == {"us-central1-b"}
    assert not [k for k in gce.instances if k[0] == "us-central1-a"]  # nothing in the first
    insts = sweep.cloud.query(group.labels)
    assert {i.state for i in insts} == {State.RUNNING} and {i.name for i in insts} == set(members_of(sweep))
    for (zone, name), inst in gce.instances.items():  # made from the template: its labels, SA
        assert inst["labels"]["spotbench-group"] == group.id and inst["service_account"] == SA
    # one bulkInsert per role and zone asked: a (refused up front), then b; each allows one zone
    asked = [(b["sourceInstanceTemplate"].rsplit("/", 1)[-1],
              [z.rsplit("/", 1)[-1] for z, p in b["locationPolicy"]["locations"].items()
               if p["preference"] == "ALLOW"]) for b in gce.bulk_inserts]
    assert asked[0][1] == ["us-central1-a"] and all(a[1] == ["us-central1-b"] for a in asked[1:])
    body = gce.bulk_inserts[-1]
    assert body["locationPolicy"]["targetShape"] == "ANY_SINGLE_ZONE"
    assert int(body["count"]) == int(body["minCount"]) == len(body["perInstanceProperties"])
    # the ledger: a refused for capacity, b used
    records = sorted(sweep.store.start_records(out["run"]), key=lambda r: r.zone)
    assert [(r.zone, set(r.errors.values())) for r in records] == [
        ("us-central1-a", {"capacity"}), ("us-central1-b", set())]

    # done: a member reports, the group is deleted (nothing left, no stopped disks)
    now = utcnow()
    sweep.store.write_group(out["run"], group.id, [Result(
        sweep="cap", run=out["run"], group=group.id, trial=1, workload="tf-mnist", metric="m",
        value=1.0, unit="s", cloud="gcp", machine_type="n1-standard-4", started_at=now,
        ended_at=now)])
    chief = members_of(sweep)[0]
    ident = gce.instances[("us-central1-b", chief)]["id"]
    done = control.done(sweep, Caller("member", chief, zone="us-central1-b", instance_id=ident,
                                      group=group.id), {"group": group.id})
    assert set(done["stopped"]) == set(members_of(sweep))
    assert gce.instances == {}


def test_capacity_gcp_every_zone_exhausted_is_a_capacity_failure_leaving_nothing(gce, tmp_path):
    sweep = make_sweep(gce, tmp_path)
    for z in ZONES:
        gce.exhaust(z)
    out = control.start(sweep, TICK)
    [refused] = out["unavailable"]
    assert refused["error"] == ErrorKind.CAPACITY
    assert all("insufficientCapacity" in m["detail"] or "enough resources" in m["detail"]
               for m in refused["members"].values())
    assert gce.instances == {}
    assert {r.zone for r in sweep.store.start_records(out["run"])} == set(ZONES)


def test_capacity_gcp_a_role_refused_after_another_was_made_deletes_the_made_one(gce, tmp_path):
    sweep = make_sweep(gce, tmp_path)
    gce.exhaust_calls(1)  # the first bulkInsert starts, then its operation ends refused
    out = control.start(sweep, TICK)
    assert out["started"] == [sweep.groups[0].id]
    zones = {z for n in members_of(sweep) for z in gce.zones_of(n)}
    assert zones == {"us-central1-b"}  # a refused by its operation: the next zone


def test_capacity_gcp_quota_is_typed_quota(gce, tmp_path):
    sweep = make_sweep(gce, tmp_path)
    gce.exceed_quota("us-central1")
    out = control.start(sweep, TICK)
    [refused] = out["unavailable"]
    assert refused["error"] == ErrorKind.QUOTA and gce.instances == {}


def test_capacity_gcp_a_preempted_group_is_retried_in_a_zone_with_capacity(gce, tmp_path):
    sweep = make_sweep(gce, tmp_path)
    group = sweep.groups[0]
    first = control.start(sweep, TICK)
    assert first["started"] == [group.id]
    assert {z for n in members_of(sweep) for z in gce.zones_of(n)} == {"us-central1-a"}
    gone = members_of(sweep)[0]
    gce.preempt("us-central1-a", gone)  # GCE reclaims one member: DELETE, nothing billed
    assert gce.zones_of(gone) == set()
    [seen] = [i for i in sweep.cloud.query(group.labels) if i.name == gone]
    assert (seen.state, seen.error, seen.zone) == (State.TERMINATED, ErrorKind.PREEMPTED,
                                                   "us-central1-a")
    gce.exhaust("us-central1-a")  # and a has no room now
    again = control.start(sweep, TICK)
    assert again["started"] == [group.id] and again["run"] == first["run"]
    assert {z for n in members_of(sweep) for z in gce.zones_of(n)} == {"us-central1-b"}
    assert not [k for k in gce.instances if k[0] == "us-central1-a"]  # the old ones deleted
    # the zone it was preempted in is asked last: b, f, then a (control/zones.py)
    allowed = [[z.rsplit("/", 1)[-1] for z, p in b["locationPolicy"]["locations"].items()
                if p["preference"] == "ALLOW"][0] for b in gce.bulk_inserts]
    roles = len({m.role for m in group.members})
    assert allowed[roles] == "us-central1-b"
    # the ledger: the retry's start record names the zone the group was preempted in
    records = [r for r in sweep.store.start_records(first["run"]) if r.zone == "us-central1-b"]
    assert [r.preempted_zone for r in records] == ["us-central1-a"]


def test_capacity_gcp_a_preemption_or_the_deadline_leaves_nothing_of_a_created_group_billed(gce, tmp_path):
    """research.md §4: with STOP a preempted member stayed TERMINATED with its boot disk
    until the next tick, and the deadline only stopped the group. DELETE: gone at once; the
    driver still says which member GCE preempted (a query of the whole sweep too)."""
    from spotbench.labels import sweep_labels

    sweep = make_sweep(gce, tmp_path)
    group = sweep.groups[0]
    control.start(sweep, TICK)
    names = members_of(sweep)
    gce.preempt("us-central1-a", names[0])
    assert names[0] not in {n for (_, n) in gce.instances}  # no stopped VM, no disk
    by_name = {i.name: i for i in sweep.cloud.query(sweep_labels("cap"))}
    assert set(by_name) == set(names)
    assert by_name[names[0]].error == ErrorKind.PREEMPTED
    assert by_name[names[0]].labels["spotbench-group"] == group.id
    for n in names[1:]:  # the deadline: GCE deletes the rest itself, no preempted operation
        gce.reach_deadline("us-central1-a", n)
    assert gce.instances == {}
    after = {i.name: i for i in sweep.cloud.query(group.labels)}
    assert after[names[0]].error == ErrorKind.PREEMPTED and set(after) == {names[0]}


def test_capacity_gcp_a_group_never_started_or_done_queries_as_nothing(gce, tmp_path):
    sweep = make_sweep(gce, tmp_path)
    assert sweep.cloud.query(sweep.groups[0].labels) == []


def test_capacity_gcp_stop_deletes_created_instances(gce, tmp_path):
    sweep = make_sweep(gce, tmp_path)
    control.start(sweep, TICK)
    assert gce.instances
    control.stop(sweep, TICK)
    assert gce.instances == {}


def test_capacity_gcp_orphan_sweep_finds_a_created_instance_whose_group_was_lost(gce, tmp_path):
    """The start function made a group, then its record was lost (a plan that no longer has
    the group, a store wiped, a stack destroyed): the created instances still carry the
    template's labels, so teardown's orphan sweep finds them in the zone they were made in
    and deletes them."""
    from spotbench.clouds.gcp.orphans import GcpSweeper

    spec = gpu_spec()
    declare_templates(gce, spec)
    gce.exhaust("us-central1-a")
    cloud = GcpCloud("proj", zones=ZONES, api_endpoint=gce.url, timeout_s=30,
                     retry_initial_s=0.05, poll_s=0.05, lifecycle="created", roster=roster_of(spec))
    group = spec.plan()[0]
    assert {i.state for i in cloud.start(group.labels, ZONES)} == {State.RUNNING}
    sweeper = GcpSweeper("proj", api_endpoint=gce.url)
    found = [r for r in sweeper.find("cap") if r.kind == "instance"]
    assert {(r.id, r.where) for r in found} == {(m.name, "us-central1-b") for m in group.members}
    assert sweeper.find("other") == []
    for r in found:
        sweeper.delete(r)
    assert gce.instances == {} and sweeper.find("cap") == []
