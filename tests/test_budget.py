"""Budget refusal and status over real result stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spotbench.budget import budget_status, check_budget
from spotbench.clouds.base import Instance, State
from spotbench.costs import annotate, load_catalog
from spotbench.results import Result, ResultStore
from spotbench.spec import load_spec

T0 = datetime(2024, 5, 1, tzinfo=UTC)
CAT = load_catalog()


def spec(budget: float | None):
    data = {
        "name": "b", "cloud": "gcp", "zone": "us-central1-a", "workload": {"name": "osu"},
        "matrix": {"machine_type": ["n1-standard-2"]}, "trials": 3, "deadline": "9m",
        "spot": False,
    }
    if budget is not None:
        data["budget"] = budget
    return load_spec(data)


def stored(store: ResultStore, group: str, seconds: float) -> None:
    """A group run of `seconds` as control's ledger has it (launch → end), and its records."""
    store.record_launch("r1", group, T0)
    store.record_end("r1", group, 1, T0 + timedelta(seconds=seconds))
    recs = [
        Result(sweep="b", run="r1", group=group, trial=1, workload="osu", metric=m, value=1.0,
               unit="us", cloud="gcp", machine_type="n1-standard-2", zone="us-central1-a",
               started_at=T0, ended_at=T0 + timedelta(seconds=seconds))
        for m in ("latency", "bibw")
    ]
    store.write_group("r1", group, annotate(recs, CAT, members=2))


# One group of 2 × n1-standard-2 (0.095 $/h) up to its deadline: (9 min + 60 s boot) = 600 s
GROUP_MAX = 0.095 * 600 / 3600 * 2  # 0.031667
RUN_3600 = 0.095 * 2  # a stored 1-hour run of 2 members: 0.19


@pytest.fixture
def store(tmp_path):
    return ResultStore("file://" + str(tmp_path / "res"))


def test_budget_refuses_when_spent_plus_running_plus_group_exceeds(store):
    s = spec(0.25)
    g1, g2, g3 = s.plan()
    stored(store, g1.id, 3600)  # spent 0.19 (two records, counted once)
    assert check_budget(s, store, [], g2, T0, CAT) is None  # 0.19 + 0.0317 = 0.2217 ≤ 0.25
    running = [Instance(m.name, State.RUNNING, g2.labels) for m in g2.members]
    reason = check_budget(s, store, running, g3, T0, CAT)  # 0.19 + 0.0317 + 0.0317 > 0.25
    assert reason is not None
    assert "budget 0.25 USD" in reason and g3.id in reason and "raise `budget`" in reason
    assert "spent 0.1900" in reason and "running 0.0317" in reason
    # a repeated start of the running group does not count it twice
    assert check_budget(s, store, running, g2, T0, CAT) is None
    # stopped instances commit nothing
    stopped = [Instance(m.name, State.STOPPED, g2.labels) for m in g2.members]
    assert check_budget(s, store, stopped, g3, T0, CAT) is None


def test_raised_budget_lets_group_run(store):
    g1, g2, g3 = spec(0.25).plan()
    stored(store, g1.id, 3600)
    running = [Instance(m.name, State.RUNNING, g2.labels) for m in g2.members]
    assert check_budget(spec(0.26), store, running, g3, T0, CAT) is None
    assert check_budget(spec(None), store, running, g3, T0, CAT) is None


def test_budget_status(store):
    s = spec(1.0)
    g1, g2, _ = s.plan()
    stored(store, g1.id, 3600)
    running = [Instance(m.name, State.RUNNING, g2.labels) for m in g2.members]
    status = budget_status(s, store, running, CAT)
    assert status["budget"] == 1.0
    assert status["spent"] == pytest.approx(RUN_3600)
    assert status["committed"] == pytest.approx(GROUP_MAX)
    assert round(status["committed"], 2) == 0.03


def test_unpriced_machine_refuses_with_row(store):
    s = load_spec({"name": "b", "cloud": "gcp", "zone": "us-central1-a", "workload": {"name": "osu"},
                   "matrix": {"machine_type": ["n9-mega"]}, "budget": 5})
    reason = check_budget(s, store, [], s.plan()[0], T0, CAT)
    assert reason and "n9-mega" in reason and "cannot price" in reason
