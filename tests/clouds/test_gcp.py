"""The gcp driver with the real google-cloud-compute REST client against a local fake GCE."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from spotbench.clouds import Cloud, State, get_cloud
from spotbench.clouds.gcp._gce_status import STATUS_MAP, label_filter
from spotbench.clouds.gcp.gce import GcpCloud
from tests.clouds.fake_gce import FakeGce

pytestmark = pytest.mark.timeout(120)

SWEEP = {"managed-by": "spotbench", "spotbench-sweep": "s1"}
G1 = {**SWEEP, "spotbench-group": "g1"}
G2 = {**SWEEP, "spotbench-group": "g2"}


@pytest.fixture
def fake() -> Iterator[FakeGce]:
    gce = FakeGce(project="proj")
    gce.add("g1-a", "us-central1-a", "TERMINATED", G1, ip="10.0.0.2")
    gce.add("g1-b", "us-central1-b", "TERMINATED", G1, ip="10.0.0.3")
    gce.add("g1-c", "us-central1-c", "RUNNING", G1, ip="10.0.0.4")
    gce.add("g2-a", "us-central1-a", "RUNNING", G2, ip="10.0.1.2")
    gce.add("other", "us-central1-a", "RUNNING", {"managed-by": "someone-else"})
    gce.add("g1-far", "europe-west4-a", "TERMINATED", G1)
    gce.start()
    yield gce
    gce.stop()


def cloud(fake: FakeGce, **kw) -> GcpCloud:
    opts = {"region": "us-central1", "timeout_s": 30, "retry_initial_s": 0.05, "poll_s": 0.05}
    return GcpCloud("proj", api_endpoint=fake.url, **{**opts, **kw})


def by_name(instances):
    return {i.name: i for i in instances}


def test_get_cloud_builds_a_gcp_cloud(fake):
    c = get_cloud("gcp", project="proj", region="us-central1", api_endpoint=fake.url)
    assert isinstance(c, GcpCloud) and isinstance(c, Cloud) and c.name == "gcp"


def test_query_finds_labelled_instances_across_the_regions_zones(fake):
    got = by_name(cloud(fake).query(G1))
    assert set(got) == {"g1-a", "g1-b", "g1-c"}  # not europe, not g2, not foreign
    assert got["g1-a"].zone == "us-central1-a" and got["g1-a"].ip == "10.0.0.2"
    assert got["g1-b"].state is State.STOPPED and got["g1-c"].state is State.RUNNING
    assert got["g1-a"].labels["spotbench-group"] == "g1"
    # one aggregated call carrying the label filter
    assert [c for c in fake.calls if "aggregated" in c[1]] == [
        ("GET", "/compute/v1/projects/proj/aggregated/instances")
    ]
    assert fake.filters == [
        '(labels.managed-by = "spotbench") AND (labels.spotbench-group = "g1") '
        'AND (labels.spotbench-sweep = "s1")'
    ]


def test_query_sweep_labels_and_explicit_zones(fake):
    assert len(cloud(fake).query(SWEEP)) == 4
    only = cloud(fake, region=None, zones=["us-central1-a", "europe-west4-a"]).query(G1)
    assert sorted(i.name for i in only) == ["g1-a", "g1-far"]
    assert cloud(fake).query({"spotbench-group": "nope"}) == []


def test_start_starts_stopped_and_leaves_running_alone(fake):
    got = by_name(cloud(fake).start(G1))
    assert {n: i.state for n, i in got.items()} == {
        "g1-a": State.RUNNING,
        "g1-b": State.RUNNING,
        "g1-c": State.RUNNING,
    }
    assert all(i.detail == "" for i in got.values())
    started = sorted(p.split("/")[-2] for m, p in fake.mutations())
    assert started == ["g1-a", "g1-b"]  # g1-c was RUNNING: no API call
    assert fake.status("us-central1-b", "g1-b") == "RUNNING"
    assert fake.status("europe-west4-a", "g1-far") == "TERMINATED"  # outside the region

    fake.calls.clear()
    again = cloud(fake).start(G1)
    assert {i.state for i in again} == {State.RUNNING}
    assert fake.mutations() == []  # idempotent: nothing to do, nothing called


def test_stop_is_idempotent(fake):
    c = cloud(fake)
    got = by_name(c.stop(G1))
    assert {i.state for i in got.values()} == {State.STOPPED}
    assert [p.split("/")[-2:] for m, p in fake.mutations()] == [["g1-c", "stop"]]
    assert fake.status("us-central1-a", "g2-a") == "RUNNING"  # other group untouched
    fake.calls.clear()
    assert {i.state for i in c.stop(G1)} == {State.STOPPED}
    assert fake.mutations() == []


def test_a_failing_operation_is_reported_for_that_instance_only(fake):
    fake.fail_next("start", "g1-b")
    got = by_name(cloud(fake).start(G1))
    assert got["g1-a"].state is State.RUNNING and got["g1-a"].detail == ""
    assert got["g1-b"].state is State.STOPPED  # unchanged
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in got["g1-b"].detail
    assert got["g1-b"].error == "capacity" and got["g1-b"].unavailable  # typed: control branches on it
    assert got["g1-a"].error is None
    assert fake.status("us-central1-b", "g1-b") == "TERMINATED"


def test_an_api_error_is_reported_not_raised(fake):
    fake.refuse_once("POST", "/g1-b/start", 400)  # not transient: no retry
    got = by_name(cloud(fake).start(G1))
    assert got["g1-a"].state is State.RUNNING
    assert got["g1-b"].state is State.STOPPED
    assert got["g1-b"].detail.startswith("start failed: HTTP 400")
    assert got["g1-b"].error == "api"
    assert sum(p.endswith("/g1-b/start") for _, p in fake.calls) == 1


def test_a_transient_503_is_retried(fake):
    fake.unavailable_once("POST", "/g1-a/start")
    fake.unavailable_once("GET", "/aggregated/instances")
    got = by_name(cloud(fake).start(G1))
    assert got["g1-a"].state is State.RUNNING and got["g1-a"].detail == ""
    start = ("POST", "/compute/v1/projects/proj/zones/us-central1-a/instances/g1-a/start")
    starts = [c for c in fake.calls if c == start]
    assert len(starts) == 2  # first answered 503, then retried
    assert sum("aggregated" in p for _, p in fake.calls) == 2


def test_persistent_503_gives_up_and_reports(fake):
    for _ in range(3):
        fake.unavailable_once("POST", "/g1-a/start")
    got = by_name(cloud(fake, retry_attempts=3).start(G1))
    assert got["g1-a"].state is State.STOPPED
    assert "HTTP 503" in got["g1-a"].detail
    assert got["g1-b"].state is State.RUNNING


def test_an_operation_that_never_finishes_is_bounded(fake):
    fake.stick_next("start", "g1-a")
    got = by_name(cloud(fake, timeout_s=0.5).start(G1))
    assert "not done after 0.5s" in got["g1-a"].detail
    assert got["g1-a"].state is State.PENDING  # STAGING on the fake
    assert got["g1-b"].state is State.RUNNING


def test_start_resumes_a_suspended_instance(fake):
    fake.instances[("us-central1-a", "g1-a")]["status"] = "SUSPENDED"
    got = by_name(cloud(fake).start(G1))
    assert got["g1-a"].state is State.RUNNING
    resume = ("POST", "/compute/v1/projects/proj/zones/us-central1-a/instances/g1-a/resume")
    assert resume in fake.calls


def test_terminate_deletes_and_missing_is_a_noop(fake):
    c = cloud(fake)
    got = c.terminate(G1)
    assert sorted(i.name for i in got) == ["g1-a", "g1-b", "g1-c"]
    assert {i.state for i in got} == {State.TERMINATED}
    assert c.query(G1) == []
    assert fake.status("europe-west4-a", "g1-far") == "TERMINATED"  # other region kept
    fake.calls.clear()
    assert c.terminate(G1) == []
    assert fake.mutations() == []


def to_state(status: str) -> State:
    """(Was spotbench.clouds.gcp._gce_status.to_state, which nothing but this test used.)"""
    try:
        return STATUS_MAP[status]
    except KeyError:
        raise ValueError(f"unknown GCE instance status {status!r}") from None


def test_status_map_and_filter():
    assert to_state("PROVISIONING") is State.PENDING
    assert to_state("STAGING") is State.PENDING
    assert to_state("REPAIRING") is State.PENDING
    assert to_state("STOPPING") is State.STOPPING
    assert to_state("SUSPENDING") is State.STOPPING
    assert to_state("SUSPENDED") is State.STOPPED
    assert to_state("TERMINATED") is State.STOPPED
    with pytest.raises(ValueError, match="BOGUS"):
        to_state("BOGUS")
    assert label_filter({"b": "y", "a": "x"}) == '(labels.a = "x") AND (labels.b = "y")'
    with pytest.raises(ValueError, match="valid GCE label"):
        label_filter({"a": 'x") OR (name = "y'})


def test_needs_a_project():
    with pytest.raises(ValueError, match="project"):
        GcpCloud("")


def test_start_waits_for_a_stopping_instance_to_stop_first(fake):
    fake.instances[("us-central1-a", "g1-a")]["status"] = "STOPPING"
    threading.Timer(0.3, lambda: fake.instances[("us-central1-a", "g1-a")].update(
        status="TERMINATED")).start()
    got = by_name(cloud(fake).start(G1))
    assert got["g1-a"].state is State.RUNNING and got["g1-a"].detail == ""
    path = "/compute/v1/projects/proj/zones/us-central1-a/instances/g1-a"
    assert fake.calls.index(("GET", path)) < fake.calls.index(("POST", path + "/start"))


def test_a_preempted_vm_is_told_apart_from_a_stopped_one(fake):
    """GCE shows a preempted spot VM as TERMINATED, like a stopped one: the driver finds the
    `compute.instances.preempted` operation of its last life and types it preempted, so
    control stops and retries its group (the survivor would bill alone) and status names it."""
    from spotbench.clouds.base import ErrorKind
    from spotbench.control import broken

    c = cloud(fake)
    c.start(G1)  # every g1 member has run: lastStartTimestamp
    fake.preempt("us-central1-a", "g1-a")
    fake.instances[("us-central1-b", "g1-b")]["status"] = "TERMINATED"  # stopped, not preempted
    got = by_name(c.query(G1))
    assert got["g1-a"].state == State.STOPPED and got["g1-a"].error == ErrorKind.PREEMPTED
    assert got["g1-a"].detail.startswith("preempted by Compute Engine at ")
    assert got["g1-b"].state == State.STOPPED and got["g1-b"].error is None
    assert got["g1-c"].state == State.RUNNING and got["g1-c"].error is None
    assert broken(list(got.values()))  # g1-c still runs beside a preempted member
    # started again, the old preemption is history: no error
    c.start(G1)
    assert all(i.error is None for i in c.query(G1))
    listed = [p for m, p in fake.calls if m == "GET" and p.endswith("/operations")]
    assert listed and all("/zones/us-central1-" in p for p in listed)


def test_a_refused_preemption_lookup_still_reports_the_instances(fake):
    from spotbench.clouds.base import ErrorKind

    c = cloud(fake, retry_attempts=1)
    c.start(G1)
    fake.preempt("us-central1-a", "g1-a")
    fake.refuse_once("GET", "/zones/us-central1-a/operations", 403)
    got = by_name(c.query(G1))
    assert got["g1-a"].state == State.STOPPED and got["g1-a"].error is None
    assert by_name(c.query(G1))["g1-a"].error == ErrorKind.PREEMPTED


def test_control_stops_and_retries_a_group_gce_preempted_a_member_of():
    """The whole path on the real client: a start tick runs group 1; GCE preempts its peer;
    the next tick sees the group broken (its launcher would run alone until the deadline),
    stops it and starts it again whole, as a preemption (a retry, not a new run)."""
    from spotbench import control
    from spotbench.auth import Caller
    from spotbench.results import ResultStore
    from spotbench.spec import load_spec

    spec = load_spec({"name": "pre", "cloud": "gcp", "zone": "us-central1-a",
                      "gcp": {"project": "proj"}, "workload": {"name": "osu"},
                      "matrix": {"machine_type": ["n2-standard-2"]}, "trials": 2,
                      "concurrency": 1, "schedule": {"cron": "0 3 * * *"}, "deadline": "30m"})
    gce = FakeGce(project="proj")
    for g in spec.plan():
        for m in g.members:
            gce.add(m.name, "us-central1-a", "TERMINATED", g.member_labels(m))
    gce.start()
    try:
        c = GcpCloud("proj", zones=["us-central1-a"], api_endpoint=gce.url, timeout_s=30,
                     retry_initial_s=0.05, poll_s=0.05)
        sweep = control.Sweep(spec=spec, cloud=c, store=ResultStore("memory://pre-preempt"))
        tick = Caller("scheduler", "scheduler")
        first = control.start(sweep, tick)
        (group,) = first["started"]
        peer = next(m.name for g in spec.plan() if g.id == group for m in g.members if m.index == 0
                    and m.role != "launcher")
        gce.preempt("us-central1-a", peer)
        again = control.start(sweep, tick)
        assert again["broken"] == [group] and again["started"] == [group], again
        assert again["run"] == first["run"]
        members = [m.name for g in spec.plan() if g.id == group for m in g.members]
        assert {gce.status("us-central1-a", m) for m in members} == {"RUNNING"}
        assert sweep.store.launch_count(first["run"], group) == 2
    finally:
        gce.stop()
