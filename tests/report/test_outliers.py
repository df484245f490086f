"""Outlier trials are called out (issue #28): a trial measured across a stall the member did
not notice (or a noisy neighbour) stands far from its point's other trials."""

from __future__ import annotations

import pandas as pd

from spotbench.report import write_report
from spotbench.report.data import outliers
from tests.report.conftest import SIZES, osu_records


def test_one_trial_far_from_the_others_is_named_with_its_ratio(store, tmp_path):
    """The issue's frozen peer: one trial's 1 MiB latency 14.6× the other trials'."""
    base = [2.0 + i for i in range(len(SIZES))]
    frozen = list(base)
    frozen[-1] = base[-1] * 14.6
    values = {1: {"latency": base}, 2: {"latency": [v * 1.01 for v in base]}, 3: {"latency": frozen}}
    for recs in osu_records("c5n.large", values):
        store.write_group("r1", recs[0].group, recs)
    md = write_report(store.url, tmp_path / "out").markdown.read_text()
    line = next(l for l in md.splitlines() if l.startswith("Outlier trials"))
    assert "trial 3" in line and "14.46×" in line, line  # 73 vs the median 5.05
    assert "trial 1" not in line and "trial 2" not in line, line


def test_close_trials_have_no_outlier():
    values = pd.DataFrame({"trial 1": [10.0, 5.0], "trial 2": [10.5, 5.0], "trial 3": [9.8, 5.0]})
    assert outliers(values) == []


def test_two_trials_are_too_few_to_call_one_an_outlier():
    assert outliers(pd.DataFrame({"trial 1": [1.0], "trial 2": [100.0]})) == []


def test_identical_trials_but_one_are_judged_against_the_median_not_a_zero_spread():
    values = pd.DataFrame({"a": [4.0], "b": [4.0], "c": [4.0], "d": [4.2], "e": [9.0]})
    assert [(col, v) for _, col, v, _ in outliers(values)] == [("e", 9.0)]  # 4.2 is within 10%
