"""Candidate zones ordered by their recent capacity failures and preemptions (spotbench.capacity)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spotbench.capacity import ZoneHistory, order_zones, why, zone_history
from spotbench.results import StartRecord

NOW = datetime(2026, 11, 25, 3, 0, tzinfo=UTC)
A, B, C = "us-central1-a", "us-central1-b", "us-central1-c"


def start(zone: str, days_ago: float, refused: str | None = None, machine: str = "n1-standard-4",
          accelerator: str | None = "nvidia-tesla-t4") -> StartRecord:
    errors = {"m0": refused} if refused else {}
    return StartRecord(run="r", group="g", at=NOW - timedelta(days=days_ago), machine_type=machine,
                       accelerator=accelerator, zone=zone, members=2,
                       failed={"m0": "no"} if refused else {}, errors=errors)


def test_capacity_fewest_recent_failures_first_and_old_failures_forgotten():
    starts = [start(A, 1, "capacity"), start(A, 2, "capacity"), start(A, 3),
              start(B, 1, "capacity"), start(B, 2),
              start(C, 30, "capacity"), start(C, 31, "capacity"), start(C, 32, "capacity")]  # a month ago
    seen = zone_history(starts, machine_type="n1-standard-4", accelerator="nvidia-tesla-t4", now=NOW)
    assert order_zones([A, B, C], seen) == [C, B, A]
    assert seen[A].capacity_failures == 2 and seen[A].starts == 3 and C not in seen
    assert why(A, seen) == f"{A}: 2 of 3 recent starts refused for capacity"


def test_capacity_only_capacity_errors_of_this_machine_and_gpu_count():
    starts = [start(A, 1, "quota"), start(A, 1, "api"),
              start(B, 1, "capacity", machine="n1-standard-8"),
              start(B, 1, "capacity", accelerator=None),
              start(C, 1, "capacity")]
    seen = zone_history(starts, machine_type="n1-standard-4", accelerator="nvidia-tesla-t4", now=NOW)
    assert order_zones([C, B, A], seen) == [B, A, C]  # B: never tried with this shape; A: no capacity error
    assert seen[A].capacity_failures == 0 and seen[A].starts == 2


def test_capacity_ties_go_to_fewer_preemptions_then_the_market_rate_then_the_given_order():
    market = [{"zone": A, "machine_type": "n1-standard-4", "accelerator": "nvidia-tesla-t4",
               "preemptions_per_vm_hour": 0.5},
              {"zone": B, "machine_type": "n1-standard-4", "accelerator": "nvidia-tesla-t4",
               "preemptions_per_vm_hour": 0.1},
              {"zone": C, "machine_type": "n2-standard-4", "accelerator": None,
               "preemptions_per_vm_hour": 9.0}]  # another shape: ignored
    seen = zone_history([], market, machine_type="n1-standard-4", accelerator="nvidia-tesla-t4",
                        now=NOW, preemptions=[(C, NOW - timedelta(hours=5))])
    assert order_zones([A, B, C], seen) == [B, A, C]  # C: a recent preemption
    assert order_zones([A, B], {}) == [A, B]  # no history: the spec's order


def test_capacity_equal_failures_prefer_the_zone_that_failed_longest_ago():
    starts = [start(A, 1, "capacity"), start(B, 5, "capacity")]
    seen = zone_history(starts, machine_type="n1-standard-4", accelerator="nvidia-tesla-t4", now=NOW)
    assert order_zones([A, B], seen) == [B, A]
    assert ZoneHistory(A).key() < seen[A].key()
