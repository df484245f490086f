"""tests/parallel.py's order of the suite's units: measured seconds first, marks second."""

from __future__ import annotations

import pytest

from tests import parallel

LOG = """============================ slowest 3 durations =============================
120.50s call     tests/a.py::test_long[x-1]
30.00s setup    tests/a.py::test_long[x-1]
9.25s call     tests/b.py::test_short
(1 durations < 0.005s hidden.)
"""


class _Item:
    def __init__(self, nodeid: str, *marks: pytest.Mark) -> None:
        self.nodeid, self._marks = nodeid, {m.name: m for m in marks}

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return self._marks.get(name)


def test_a_profile_sums_each_tests_phases():
    assert parallel.durations_from_log(LOG) == {"tests/a.py::test_long[x-1]": 150.5,
                                                "tests/b.py::test_short": 9.25}


def test_a_measured_test_costs_its_seconds_and_outranks_a_marked_one():
    measured = parallel.durations_from_log(LOG)
    slow = pytest.mark.slow.mark
    assert parallel.cost_of(_Item("tests/a.py::test_long[x-1]"), 300, measured) == 150.5
    assert parallel.cost_of(_Item("tests/b.py::test_short", slow), 300, measured) == 9.25
    unmeasured_slow = parallel.cost_of(_Item("tests/c.py::test_new", slow), 300, measured)
    assert 1 < unmeasured_slow < 9.25  # under every profiled test
    assert parallel.cost_of(_Item("tests/c.py::test_unit"), 300, measured) == 1.0
    longer = pytest.mark.timeout(3600).mark
    assert parallel.cost_of(_Item("tests/c.py::test_t", slow, longer), 300, {}) == 60.0


def test_the_shipped_profile_puts_the_walkthrough_first():
    measured = parallel.load_durations()
    assert max(measured, key=measured.get) == (
        "tests/docs/test_walkthroughs.py::test_readme_then_both_cloud_guides_on_a_fresh_install")
    assert min(measured.values()) > 5.0  # the unmeasured marked tests' figure stays under them
