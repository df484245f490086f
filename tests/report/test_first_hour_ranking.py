"""The answer first (issue #39): every report and `spotbench run` open with the
configurations ranked by the primary metric, per dollar and by cost per result, every swept
axis apart, each number with its spread and trial count; a Pareto view when they disagree."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd

from spotbench.failures import FAILED_METRIC, FAILED_UNIT, FAILURE_KEY
from spotbench.report import data, ranking, summary, write_report
from tests.report.conftest import T0, rec
from tests.report.test_tf_cost_reference import tf_group


def _tf_store(store, times=None):
    for w, t in (times or {1: 200.0, 2: 120.0, 3: 90.0}).items():
        for trial in (1, 2, 3):
            recs = tf_group(w, trial, t * (1 + 0.02 * trial))
            store.write_group("r1", recs[0].group, recs)
    return store


def test_first_hour_ranking_keeps_every_swept_axis_apart(store, tmp_path):
    df = data.frame(_tf_store(store).read())
    key = summary.key_numbers(df)
    assert list(key.index) == [f"n1-standard-2 · workers={w}" for w in (1, 2, 3)]  # not one row
    [r] = ranking.rank(df)
    assert r.primary.metric == "steps_per_s" and r.primary.better == "higher"
    assert list(r.table.index) == [f"n1-standard-2 · workers={w}" for w in (3, 2, 1)]  # best first
    shown = r.shown()
    col = next(c for c in shown.columns if c.startswith("TF steps/s"))
    assert shown[col].iloc[0].startswith("★ ") and not shown[col].iloc[1].startswith("★")
    assert "±" in shown[col].iloc[0] and set(shown["trials"]) == {"3 of 3"}
    # medians of the trials, the same statistic as the key numbers
    t3 = [1000 / (90 * (1 + 0.02 * k)) for k in (1, 2, 3)]
    assert r.table.at["n1-standard-2 · workers=3", "metric"] == pd.Series(t3).median()
    assert r.table.at["n1-standard-2 · workers=3", "trials"] == 3


def _priced(store):
    """A fast expensive type and a slow cheap one: the answer depends on the dollar."""
    for machine, latency, cost in (("c2-standard-60", 5.0, 0.40), ("e2-standard-2", 20.0, 0.02)):
        for trial in (1, 2, 3):
            group = f"{machine}-t{trial}"
            store.write_group("r1", group, [rec(
                group=group, trial=trial, machine_type=machine, cloud="gcp", metric="latency",
                value=latency * (1 + 0.01 * trial), cost_usd=cost, metadata={"size_bytes": 8},
                started_at=T0, ended_at=T0 + timedelta(seconds=120))])
    return store


def test_first_hour_report_opens_with_the_answer_per_dollar(store, tmp_path):
    paths = write_report(_priced(store).url, tmp_path / "out")
    md = paths.markdown.read_text()
    first_heading = next(line for line in md.splitlines() if line.startswith("## "))
    assert first_heading == "## The answer: OSU latency @ 8 B"
    assert md.index("## The answer") < md.index("## Summary")
    assert paths.answer[0].startswith("Best OSU latency @ 8 B (lower is better): c2-standard-60: 5.1")
    assert any(line.startswith("Best OSU latency per USD: e2-standard-2") for line in paths.answer)
    assert any(line.startswith("Cheapest result: e2-standard-2: 0.02 USD") for line in paths.answer)
    [r] = paths.rankings
    assert r.disagree and r.pareto() == ["c2-standard-60", "e2-standard-2"]
    assert (tmp_path / "out" / "pareto_1.png").stat().st_size > 1000
    assert "Pareto front" in md
    shown = r.shown()
    assert shown.at["e2-standard-2", "USD per result"].startswith("★ 0.02")
    assert shown.at["e2-standard-2", "per USD"].startswith("★ ×1")
    ranked = pd.read_csv(tmp_path / "out" / "ranking.csv")
    assert {"metric", "per_usd", "cost_usd", "pareto"} <= set(ranked["column"])


def test_first_hour_local_cloud_ranks_by_the_metric_only(store, tmp_path):
    for trial in (1, 2):
        store.write_group("r1", f"g-t{trial}", [rec(group=f"g-t{trial}", trial=trial, value=3.0,
                                                    cost_usd=0.0, metadata={"size_bytes": 8})])
    paths = write_report(store.url, tmp_path / "out")
    [r] = paths.rankings
    assert not r.priced and "per USD" not in r.shown().columns
    assert "ranked by the metric only" in paths.answer[1]


def test_first_hour_a_failed_group_is_never_complete(store, tmp_path):
    store.write_group("r1", "ok-t1", [rec(group="ok-t1", value=3.0, metadata={"size_bytes": 8})])
    store.write_group("r1", "bad-t1", [
        rec(group="bad-t1", machine_type="bad", metric=FAILED_METRIC, unit=FAILED_UNIT, value=1.0,
            metadata={FAILURE_KEY: "exit 1"}),
        rec(group="bad-t1", machine_type="bad", value=0.001, metadata={FAILURE_KEY: "exit 1", "size_bytes": 8})])
    paths = write_report(store.url, tmp_path / "out")
    ran = next(line for line in paths.summary if "group runs" in line)
    assert "2 group runs: 1 complete, 1 preempted, failed or incomplete" in ran, ran
    [r] = paths.rankings
    assert list(r.table.index) == ["local"]  # the failed attempt's value is not ranked
    key = summary.key_numbers(data.frame(store.read()))
    assert key.at["bad", "complete trials"] == "0 of 1"


def test_first_hour_report_command_prints_the_ranking_first_at_80_columns(store, tmp_path):
    import os
    import subprocess
    import sys

    _priced(store)
    env = {**os.environ, "COLUMNS": "80"}
    out = subprocess.run([sys.executable, "-m", "spotbench.cli", "report", store.url, "-o",
                          str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("Best OSU latency @ 8 B (lower is better): c2-standard-60")
    table = [ln for ln in lines if ln.startswith(("┃", "│", "┏", "└"))]
    assert table and all(len(ln) <= 80 for ln in table)
    assert any("e2-standard-2" in ln and "★ 0.02" in ln for ln in table)
    assert lines.index(next(ln for ln in lines if ln.startswith("1 run"))) > lines.index(table[-1])
