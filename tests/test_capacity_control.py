"""Control in the created lifecycle: the candidate zones go to `Cloud.start` in the order
the capacity and preemption history per zone says (spotbench.capacity over the store's start
ledger), the ledger records the zone actually used and each zone refused on the way, and a
preempted group is retried with the zone it was preempted in asked later."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

import pytest

from spotbench import control
from spotbench.auth import Caller
from spotbench.clouds.base import ACTIVE, ErrorKind, Instance, State, matches
from spotbench.results import ResultStore, utcnow
from spotbench.spec import load_spec

TICK = Caller("scheduler", "scheduler")
ZONES = ["us-central1-a", "us-central1-b", "us-central1-f"]


class ZonedCloud:
    """A created-lifecycle Cloud: start makes the group's members in the first of `zones`
    with capacity (the others are noted in `last_refusals`), stop deletes them."""

    name = "gcp"

    def __init__(self, groups) -> None:
        self.members = {g.id: [(m.name, g.member_labels(m)) for m in g.members] for g in groups}
        self.instances: dict[str, Instance] = {}
        self.exhausted: set[str] = set()
        self.asked: list[list[str]] = []  # the `zones` of every start, in order
        self.last_refusals: list[list[Instance]] = []

    def start(self, labels: Mapping[str, str], zones: Sequence[str] = ()) -> list[Instance]:
        self.asked.append(list(zones))
        self.last_refusals = []
        self.stop(labels)  # leftovers (e.g. preempted members) are deleted before a create
        members = self.members[labels["spotbench-group"]]
        for zone in zones:
            if zone in self.exhausted:
                self.last_refusals.append([
                    Instance(n, State.TERMINATED, lab, zone=zone, error=ErrorKind.CAPACITY,
                             detail="ZONE_RESOURCE_POOL_EXHAUSTED") for n, lab in members])
                continue
            made = [Instance(n, State.RUNNING, lab, zone=zone) for n, lab in members]
            self.instances.update({i.name: i for i in made})
            return made
        return self.last_refusals.pop() if self.last_refusals else []

    def stop(self, labels: Mapping[str, str]) -> list[Instance]:
        gone = [i for i in self.instances.values() if matches(i.labels, labels)]
        for i in gone:
            del self.instances[i.name]
        return [Instance(i.name, State.TERMINATED, i.labels, zone=i.zone) for i in gone]

    terminate = stop

    def query(self, labels: Mapping[str, str]) -> list[Instance]:
        return [i for i in self.instances.values() if matches(i.labels, labels)]

    def preempt_all(self) -> None:
        for name, i in self.instances.items():
            self.instances[name] = Instance(name, State.STOPPED, i.labels, zone=i.zone,
                                            error=ErrorKind.PREEMPTED, detail="preempted")


@pytest.fixture
def sweep(tmp_path):
    spec = load_spec({"name": "capz", "cloud": "gcp", "zones": ZONES, "lifecycle": "created",
                      "gcp": {"project": "proj"}, "workload": {"name": "osu"},
                      "matrix": {"machine_type": ["n1-standard-4"]}, "trials": 1,
                      "concurrency": 1, "schedule": {"cron": "0 3 * * *"}, "deadline": "30m"})
    cloud = ZonedCloud(spec.plan())
    return control.Sweep(spec=spec, cloud=cloud, store=ResultStore(f"file://{tmp_path}"))


def test_capacity_control_a_first_start_asks_the_spec_order_and_records_the_zone_used(sweep):
    out = control.start(sweep, TICK)
    assert out["started"] == [sweep.groups[0].id]
    assert sweep.cloud.asked == [ZONES]
    [record] = sweep.store.start_records(out["run"])
    assert record.zone == "us-central1-a" and record.errors == {}


def test_capacity_control_a_capacity_refused_zone_goes_last_next_time(sweep):
    cloud = sweep.cloud
    cloud.exhausted = {"us-central1-a"}
    out = control.start(sweep, TICK)
    assert out["started"] == [sweep.groups[0].id]  # in b, within the same start
    assert {i.zone for i in cloud.instances.values()} == {"us-central1-b"}
    records = sorted(sweep.store.start_records(out["run"]), key=lambda r: r.zone)
    assert [(r.zone, set(r.errors.values())) for r in records] == [
        ("us-central1-a", {"capacity"}), ("us-central1-b", set())]

    control.stop(sweep, TICK)  # the nightly stop deletes the group
    assert cloud.instances == {}
    control.start(sweep, TICK)
    assert cloud.asked[-1] == ["us-central1-b", "us-central1-f", "us-central1-a"]


def test_capacity_control_every_zone_refused_is_capacity_and_ranks_them_by_history(sweep):
    cloud = sweep.cloud
    cloud.exhausted = set(ZONES)
    out = control.start(sweep, TICK)
    [refused] = out["unavailable"]
    assert refused["error"] == ErrorKind.CAPACITY
    assert sweep.store.launch_count(out["run"], sweep.groups[0].id) == 0
    assert {r.zone for r in sweep.store.start_records(out["run"])} == set(ZONES)
    cloud.exhausted = {"us-central1-a", "us-central1-b"}
    control.start(sweep, TICK)  # f (one failure, like the others) … then a, b twice: last
    assert cloud.asked[-1] == ZONES and {i.zone for i in cloud.instances.values()} == {ZONES[2]}
    control.stop(sweep, TICK)
    cloud.exhausted = set()
    control.start(sweep, TICK)
    assert cloud.asked[-1] == ["us-central1-f", "us-central1-a", "us-central1-b"]


def test_capacity_control_a_preempted_group_is_retried_with_its_zone_asked_later(sweep):
    cloud = sweep.cloud
    first = control.start(sweep, TICK)
    assert first["started"] and cloud.asked[-1][0] == "us-central1-a"
    cloud.preempt_all()
    again = control.start(sweep, TICK)  # the retry: a new attempt of the same run
    assert again["started"] == [sweep.groups[0].id] and again["run"] == first["run"]
    assert cloud.asked[-1] == ["us-central1-b", "us-central1-f", "us-central1-a"]
    assert {i.zone for i in cloud.instances.values()} == {"us-central1-b"}
    assert all(i.state in ACTIVE for i in cloud.instances.values())


def test_capacity_control_old_history_is_outside_the_window(sweep):
    cloud = sweep.cloud
    cloud.exhausted = {"us-central1-a"}
    out = control.start(sweep, TICK, now=utcnow() - timedelta(days=30))
    assert out["started"]
    control.stop(sweep, TICK)
    cloud.exhausted = set()
    control.start(sweep, TICK)
    assert cloud.asked[-1] == ZONES  # a refusal a month ago no longer counts


def test_capacity_control_the_stopped_lifecycle_passes_no_zones(tmp_path):
    spec = load_spec({"name": "capz", "cloud": "gcp", "zone": "us-central1-a",
                      "gcp": {"project": "proj"}, "workload": {"name": "osu"},
                      "matrix": {"machine_type": ["n1-standard-4"]}, "trials": 1,
                      "schedule": {"cron": "0 3 * * *"}, "deadline": "30m"})
    calls = []

    class OneArgCloud(ZonedCloud):
        def start(self, labels):  # today's signature: no `zones`
            calls.append(dict(labels))
            return super().start(labels, ["us-central1-a"])

    cloud = OneArgCloud(spec.plan())
    out = control.start(control.Sweep(spec=spec, cloud=cloud,
                                      store=ResultStore(f"file://{tmp_path}")), TICK)
    assert out["started"] and len(calls) == 1
