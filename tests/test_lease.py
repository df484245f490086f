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
