"""Scaling on any axis (#36): the spec's `scaling: {axis, base}` and `work` reach the records
through the member, and the report's scaling section sets every point against the base:
speedup, parallel efficiency, time and cost for the user's work."""

from __future__ import annotations

from datetime import timedelta

import pytest

from spotbench.member import MemberContext
from spotbench.report import write_report
from spotbench.report import data as _data
from spotbench.report import scaling
from spotbench.spec import SpecError, load_spec
from tests.report.conftest import T0, rec

# a cluster of spot servers: epochs/min at 2, 4, 8 servers, each server $0.36/h
PUBLISHED = {2: 5.44, 4: 9.13, 8: 14.59}


def _records(kind: str = "epochs", amount: float = 1000) -> list:
    out = []
    for servers, epm in PUBLISHED.items():
        for trial in (1, 2):
            out.append(rec(
                group=f"g{servers}-t{trial}", trial=trial, workload="torch",
                params={"name": "torch", "workers": servers}, metric="epochs_per_min",
                value=epm * (1 + 0.01 * (trial - 1.5)), unit="epochs/min",
                ended_at=T0 + timedelta(seconds=600), cost_usd=0.36 * servers * 600 / 3600,
                metadata={"scaling": {"axis": "workers", "base": 2}, "work": {kind: amount}}))
    out.append(rec(group="g8-t3", trial=3, workload="torch", preempted=True,  # never averaged
                   params={"name": "torch", "workers": 8}, metric="epochs_per_min", value=1.0,
                   metadata={"scaling": {"axis": "workers", "base": 2}, "work": {kind: amount}}))
    return out


def test_scaling_speedup_efficiency_and_cost_of_the_users_work(store, tmp_path):
    for r in _records():
        store.write_group("r1", r.group, [r])
    table = scaling.summary(_data.frame(store.read()))
    rows = table.loc["local"]
    assert list(rows.index) == [2.0, 4.0, 8.0]
    assert rows.at[2.0, "speedup"] == pytest.approx(1.0)
    assert rows.at[4.0, "speedup"] == pytest.approx(9.13 / 5.44)
    assert rows.at[8.0, "speedup"] == pytest.approx(14.59 / 5.44)
    assert rows.at[8.0, "efficiency"] == pytest.approx(14.59 / 5.44 / 4)
    assert rows.at[4.0, "work_s"] == pytest.approx(1000 / 9.13 * 60)  # 1,000 epochs at 9.13/min
    assert rows.at[4.0, "work_usd"] == pytest.approx(0.36 * 4 / 3600 * 1000 / 9.13 * 60)
    assert rows.at[8.0, "trials"] == 2  # the preempted trial is left out

    md = write_report(store.url, tmp_path / "out").markdown.read_text()
    assert "## Scaling over workers" in md and "cost for 1,000 epochs (USD)" in md
    assert "| local | 4 | 9.13 | 1.678 | 0.8392 |" in md


def test_scaling_steps_work_also_prices_the_cost_section(store, tmp_path):
    recs = [r.model_copy(update={"metric": "steps_per_s"}) for r in _records("steps", 5000)]
    for r in recs:
        store.write_group("r1", r.group, [r])
    md = write_report(store.url, tmp_path / "out").markdown.read_text()
    assert "time for 5,000 steps (s)" in md and "10,000 steps" not in md


@pytest.mark.parametrize("extra, words", [
    ({"scaling": {"axis": "accelerator_count", "base": 1}}, "scaling.axis 'accelerator_count': not a matrix key"),
    ({"scaling": {"axis": "workers", "base": 3}}, r"scaling.base 3: not among matrix.workers \[1, 2\]"),
    ({"work": {"epochs": 10, "steps": 5}}, "give one of epochs or steps"),
    ({"work": {}}, "give one of epochs or steps"),
])
def test_scaling_spec_errors_name_the_field_and_the_fix(extra, words):
    with pytest.raises(SpecError, match=words):
        load_spec({"name": "s", "cloud": "local", "workload": {"name": "torch"},
                   "matrix": {"workers": [1, 2]}, **extra})


def test_scaling_reaches_every_member_and_its_records():
    spec = load_spec({"name": "s", "cloud": "local", "workload": {"name": "torch"},
                      "matrix": {"workers": [1, 2]}, "scaling": {"axis": "workers", "base": 1},
                      "work": {"epochs": 1000}})
    group = spec.plan()[1]
    ctx = MemberContext.for_member(group, group.members[1], cloud="local", results_url="file:///r",
                                   done_url=None, addresses={m.name: ("127.0.0.1", 1) for m in group.members})
    again = MemberContext.from_env(ctx.to_env())
    assert again.scaling == {"axis": "workers", "base": 1.0} and again.work == {"epochs": 1000.0}
