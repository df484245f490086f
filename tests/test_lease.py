"""The control lease (spotbench/lease.py) over versioned objects: one holder, Busy for the
others, a dead holder taken over once its lease expires, and never two holders."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from spotbench.lease import Busy, Lease, MemoryObjects


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_a_second_caller_waits_then_gets_busy_with_a_retry_time():
    objects = MemoryObjects()
    with Lease(objects, "b/control.lock", holder="start", wait_s=0):
        with pytest.raises(Busy, match="held by start") as busy:
            Lease(objects, "b/control.lock", holder="done from m1", wait_s=0.2).acquire()
        assert 1 <= busy.value.retry_after_s <= 10
    assert objects.objects == {}  # released
    with Lease(objects, "b/control.lock", holder="done from m1", wait_s=0):
        pass


def test_a_waiting_caller_gets_the_lease_once_it_is_released():
    objects = MemoryObjects()
    first = Lease(objects, "l", holder="start", wait_s=0)
    first.acquire()
    threading.Timer(0.3, first.release).start()
    begin = time.monotonic()
    with Lease(objects, "l", holder="done", wait_s=5):
        assert time.monotonic() - begin >= 0.25


def test_a_dead_holder_is_taken_over_after_the_ttl_and_only_once():
    clock = Clock()
    objects = MemoryObjects(clock)
    dead = Lease(objects, "l", holder="start", ttl_s=60, wait_s=0, clock=clock)
    dead.acquire()
    dead._stop.set()  # it crashed: no more renewals, no release
    clock.now += timedelta(seconds=59)
    with pytest.raises(Busy):
        Lease(objects, "l", holder="tick", ttl_s=60, wait_s=0, clock=clock).acquire()
    clock.now += timedelta(seconds=2)
    a = Lease(objects, "l", holder="a", ttl_s=60, wait_s=0, clock=clock)
    b = Lease(objects, "l", holder="b", ttl_s=60, wait_s=0, clock=clock)
    a.acquire()
    with pytest.raises(Busy, match="held by a"):
        b.acquire()
    # the dead holder coming back to life must not delete the new holder's lease
    dead._version = "1"
    dead.release()
    assert "l" in objects.objects
    a.release()
    assert objects.objects == {}


def test_a_live_holder_renews_so_it_is_never_taken_over():
    objects = MemoryObjects()
    with Lease(objects, "l", holder="slow start", ttl_s=0.4, wait_s=0) as held:
        time.sleep(1.0)  # 2.5 TTLs: renewed every 0.1 s
        with pytest.raises(Busy):
            Lease(objects, "l", holder="done", ttl_s=0.4, wait_s=0).acquire()
        assert not held.lost


def test_many_callers_never_hold_it_at_once():
    objects = MemoryObjects()
    inside, peak, entries = [0], [0], []
    guard = threading.Lock()

    def call(i: int) -> None:
        with Lease(objects, "l", holder=f"c{i}", wait_s=20):
            with guard:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            time.sleep(0.01)
            with guard:
                inside[0] -= 1
                entries.append(i)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 1 and sorted(entries) == list(range(6))


# ---- a holder that lost the lease stops acting (issue 24: 9) ---------------------------------
@pytest.mark.security
def test_a_holder_whose_lease_was_taken_over_fails_its_check():
    from spotbench.lease import LeaseLost

    clock = Clock()
    objects = MemoryObjects(clock)
    stalled = Lease(objects, "l", holder="start", ttl_s=60, wait_s=0, clock=clock)
    stalled.acquire()
    stalled.check()  # held: passes
    stalled._stop.set()  # paused (a frozen function instance): no renewals
    clock.now += timedelta(seconds=61)
    taker = Lease(objects, "l", holder="done", ttl_s=60, wait_s=0, clock=clock)
    taker.acquire()
    with pytest.raises(LeaseLost, match="no longer held by start"):
        stalled.check()
    assert isinstance(LeaseLost("x", 1), Busy)  # answered 503 + Retry-After
    taker.check()
    taker.release()


@pytest.mark.security
def test_control_stops_acting_once_its_lease_is_taken_over():
    """A start tick stalls after its first launch; another call takes the lease over. The
    stalled tick must launch nothing more (each cloud/store action checks the lease)."""
    from spotbench import control
    from spotbench.lease import MEMORY, LeaseLost
    from spotbench.results import ResultStore
    from spotbench.spec import load_spec
    from spotbench.clouds.base import State
    from tests.test_control import SCHEDULER, MemoryCloud

    spec = load_spec({"name": "fence", "workload": {"name": "osu"}, "trials": 3, "concurrency": 3})
    groups = spec.plan()
    cloud = MemoryCloud(groups)
    sweep = control.Sweep(spec=spec, cloud=cloud, store=ResultStore("memory://fence-test/r"),
                          groups=groups)
    real_start = cloud.start

    def start_then_stall(labels):
        out = real_start(labels)
        path = next(p for p in MEMORY.objects if p.endswith("fence-test/r/control.lock"))
        held = MEMORY.objects[path]
        MEMORY.replace(path, b'{"holder": "another call"}', held.version)  # taken over
        return out

    cloud.start = start_then_stall
    with pytest.raises(LeaseLost):
        control.start(sweep, SCHEDULER, {})
    assert cloud.start_calls == 1, "the stalled holder launched more groups after losing the lease"
    running = [i for i in cloud.instances.values() if i.state == State.RUNNING]
    assert len({i.labels["spotbench-group"] for i in running}) == 1


def test_an_object_store_lease_is_written_with_what_its_cloud_hands_the_store():
    """The lease knows no cloud (issue #25): the store is handed its cloud's conditional
    requests (`Provider.lease_objects`); built without them, an object store refuses the
    lease with what to do instead of not excluding anyone."""
    from spotbench.clouds import get_provider
    from spotbench.clouds.aws.lease_objects import S3Objects
    from spotbench.clouds.gcp.lease_objects import GcsObjects
    from spotbench.results import ResultStore

    bare = ResultStore("s3://bucket/sweep")
    with pytest.raises(NotImplementedError, match="lease_objects=provider.lease_objects"):
        with bare.lease("control", holder="start", wait_s=0):
            pass
    assert isinstance(get_provider("aws").lease_objects(bare.fs), S3Objects)
    gcs = ResultStore("gs://bucket/sweep", endpoint_url="http://127.0.0.1:9/as/sa", token="anon")
    objects = get_provider("gcp").lease_objects(gcs.fs)
    assert isinstance(objects, GcsObjects)
    # the JSON API's simple upload on the store's own endpoint (gcsfs's public `base`)
    assert objects.upload_url() == "http://127.0.0.1:9/as/sa/upload/storage/v1/b/{}/o"
    assert get_provider("local").lease_objects(object()) is None


def test_a_store_uses_the_objects_it_was_handed():
    from spotbench.results import ResultStore

    objects = MemoryObjects()
    store = ResultStore("memory://handed/r", lease_objects=lambda fs: objects)
    with store.lease("control", holder="start", wait_s=0):
        assert [p.endswith("handed/r/control.lock") for p in objects.objects] == [True]
    assert objects.objects == {}
