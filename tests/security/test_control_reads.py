"""Control reads bounded by what control wrote (issue #38): a start, done or stop reads a
number of objects bounded by the run's own ledger, never by what members created, and not by
the length of the history.

Performed over the object-store double (`tests/object_store_double.py`, every request
counted; S3/GCS delimiter listings, 1,000 keys a page) by `tests/control_reads.py`: a hostile
group writes 1,000 objects under its own prefix — all its grant allows — and each control call
is measured against the same calls without them. Before the fix every call listed `runs/`
recursively and opened every attempt file: with 3,000 hostile objects `done` made 3,051
requests instead of 33, and the hostile group's attempt files past its launches counted it
complete. `bench/control_reads.py` takes it to 10^5 objects and 10,000 runs.
"""

from __future__ import annotations

import pytest

from spotbench.results.model import SPARE_ATTEMPTS
from tests.control_reads import run_calls
from tests.object_store_double import read_keys

pytestmark = pytest.mark.security

CALLS = ("done", "start", "done_hostile", "stop")


def _requests(figures: dict) -> dict[str, int]:
    return {call: figures[call]["requests"] for call in CALLS}


def test_control_reads_do_not_grow_with_a_hostile_groups_objects():
    quiet = run_calls("quiet", hostile=0)
    hostile = run_calls("hostile", hostile=1000)
    assert _requests(hostile) == _requests(quiet), (_requests(quiet), _requests(hostile))
    for call in CALLS:  # and the same decisions: the flood is neither an attempt nor a result
        assert hostile[call]["answer"] == quiet[call]["answer"], call
    flooded = sorted(k for k in read_keys("hostile") if _flood(k))
    assert not flooded, flooded[:5]
    assert max(_requests(hostile).values()) < 80


def _flood(key: str) -> bool:
    """A key of the flood (`tests/control_reads.flood`) beyond what control reads of a group:
    its launches (at most 3) and `SPARE_ATTEMPTS`."""
    name = key.rsplit("/", 1)[-1]
    return ("/raw-" in key or ".z" in name
            or (name.endswith(".jsonl") and int(name.split(".")[-2]) > 3 + SPARE_ATTEMPTS))


def test_control_reads_do_not_grow_with_the_history_even_with_a_budget():
    short = run_calls("short", hostile=0, history=10, budget=1000.0)
    long = run_calls("long", hostile=0, history=60, budget=1000.0)
    assert _requests(long) == _requests(short), (_requests(short), _requests(long))
    assert long["done"]["answer"]["started"] == short["done"]["answer"]["started"]
