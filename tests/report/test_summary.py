"""The report's Summary: key numbers of the latest run's complete trials per configuration,
failures counted in bold, change points regressions first."""

from __future__ import annotations

from datetime import datetime

from spotbench.history.changepoints import ChangePoint
from spotbench.history.trends import History, Series
from spotbench.report import data, summary
from spotbench.report.document import Para, TableBlock
from tests.report.conftest import rec


def _frame():
    recs = []
    for run, factor in (("r1", 1.0), ("r2", 2.0)):
        for trial, preempted in ((1, False), (2, False), (3, True)):
            value = 10.0 * factor * (1 + 0.1 * trial) * (50 if preempted else 1)
            recs.append(rec(run=run, group=f"g-t{trial}", trial=trial, value=value, preempted=preempted,
                            machine_type="c5n.18xlarge", metadata={"size_bytes": 8}, cost_usd=0.5))
    return data.frame(recs)


def test_key_numbers_are_the_latest_runs_complete_medians():
    table = summary.key_numbers(_frame())
    row = table.loc["c5n.18xlarge"]
    assert row["OSU latency @ 8 B"] == "23 µs"  # median of r2's 22 and 24; preempted 1,300 left out
    assert row["complete trials"] == "2 of 3"
    assert row["cost of the run"] == "1.5 USD"  # three attempts of r2, each 0.5


def _series(name: str, better: str, before: float, after: float) -> Series:
    s = Series(point=name, label=name, workload="osu", metric="latency", label_metric="OSU latency",
               size=8, unit="us", better=better, runs=["r1", "r2"],
               dates=[datetime(2026, 1, 1), datetime(2026, 1, 2)], values=[before, after])
    s.change_points = [ChangePoint(1, before, after, 0.1, 0.1, 1, 1, 1e-6)]
    return s


def test_failures_then_regressions_first():
    hist = History(sweep="s", runs=["r1", "r2"], max_pvalue=0.001, min_change=0.0, series=[
        _series("fast", "lower", 30.0, 20.0), _series("slow", "lower", 20.0, 28_750.0)])
    blocks = summary.blocks(_frame(), hist, failed=["run r2, group g-t3: exit 1"])
    paras = [b for b in blocks if isinstance(b, Para)]
    assert paras[1].anchor == "failures" and paras[1].strong
    assert paras[1].text.startswith("1 group failed (see Failures below): run r2, group g-t3")
    assert paras[2].anchor == "change-points" and paras[2].strong
    assert paras[2].text.startswith("Regression: OSU latency @ 8 B · slow: 20 µs → 28.75 ms (×1,438)")
    assert paras[3].text.startswith("Improvement:") and not paras[3].strong
    assert isinstance(blocks[-1], TableBlock) and blocks[-1].anchor == "key-numbers"
