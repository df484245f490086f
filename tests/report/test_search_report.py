"""The search report opens with the answer: the best trial (parameters, validation and
test objective, cost), then a leaderboard sorted by the objective (and its CSV), best-so-far
against trials and dollars, the objective against each parameter, importances, parallel
coordinates and the Pareto front of several objectives. Records of a known synthetic search:
val_accuracy peaks at kernel_size 5 and does not depend on `seed_noise`."""

from __future__ import annotations

import csv
from datetime import timedelta

import pytest

from spotbench.report import write_report
from spotbench.report.search import best_so_far, importances, pareto
from spotbench.report.trials import Objective, parse_objectives, rank, trials
from tests.report.conftest import T0, rec


def _search_records(n: int = 24) -> list:
    out = []
    for i in range(n):
        kernel = 1 + (i * 7) % 10  # 1..10, scattered
        noise = (i * 37) % 5  # an irrelevant parameter
        val = 0.95 - 0.02 * (kernel - 5) ** 2 + 0.0001 * noise
        params = {"name": "tf-mnist", "kernel_size": kernel, "filters": 16 * (1 + i % 4),
                  "seed_noise": noise, "dataset": "mnist"}
        start = T0 + timedelta(minutes=10 * i)
        common = dict(group=f"s-t{i}", trial=i, params=params, workload="tf-mnist", unit="fraction",
                      started_at=start, ended_at=start + timedelta(minutes=5),
                      cost_usd=0.01 * (1 + kernel), metadata={"artifacts_bytes": 1000})
        out += [rec(metric="val_accuracy", value=val, **common),
                rec(metric="test_accuracy", value=val - 0.03, **common)]
    # a trial cut short with a better (partial) number: never the answer
    start = T0 + timedelta(hours=9)
    out.append(rec(group="s-t99", trial=99, params={"name": "tf-mnist", "kernel_size": 5, "filters": 16,
                                                    "seed_noise": 0, "dataset": "mnist"},
                   workload="tf-mnist", metric="val_accuracy", value=0.999, unit="fraction",
                   preempted=True, started_at=start, ended_at=start + timedelta(minutes=1), cost_usd=0.005))
    return out


def test_search_trials_rank_by_the_objective_and_leave_cut_short_ones_last():
    found = trials(_search_records())
    assert len(found) == 25
    ranked = rank(found, Objective("val_accuracy"))
    assert ranked[0].params["kernel_size"] == 5 and ranked[0].state == "complete"
    assert ranked[-1].number == 99 and ranked[-1].state == "cut short" and "val_accuracy" not in ranked[-1].values
    values = [t.values["val_accuracy"] for t in ranked[:-1]]
    assert values == sorted(values, reverse=True)
    low = rank(found, Objective("val_accuracy", "minimize"))
    assert low[0].params["kernel_size"] in (1, 10)


def test_search_best_so_far_never_gets_worse_and_counts_dollars():
    curve = best_so_far(trials(_search_records()), Objective("val_accuracy"))
    assert list(curve["trials"]) == list(range(1, 25))
    assert all(b >= a for a, b in zip(curve["best"], curve["best"][1:], strict=False))
    assert curve["best"].iloc[-1] == pytest.approx(max(curve["value"]))
    assert all(b > a for a, b in zip(curve["usd"], curve["usd"][1:], strict=False))


def test_search_importance_finds_the_parameter_that_matters():
    found = trials(_search_records())
    weights = importances(found, Objective("val_accuracy"), ["filters", "kernel_size", "seed_noise"])
    assert max(weights, key=weights.get) == "kernel_size"
    assert weights["kernel_size"] > 0.8 and sum(weights.values()) == pytest.approx(1.0)


def test_search_pareto_front_of_accuracy_and_cost_is_the_non_dominated_trials():
    found = trials(_search_records())
    front = pareto(found, parse_objectives(["val_accuracy:max", "cost:min"]))
    by_number = {t.number: t for t in found}
    for n in front:  # no trial beats a front trial on both
        a = by_number[n]
        assert not any(t.values["val_accuracy"] > a.values["val_accuracy"] and t.values["cost"] < a.values["cost"]
                       for t in found if "val_accuracy" in t.values)
    others = [t for t in found if t.number not in front and "val_accuracy" in t.values]
    for t in others:  # and every other trial is beaten by one on the front
        assert any(by_number[n].values["val_accuracy"] >= t.values["val_accuracy"]
                   and by_number[n].values["cost"] <= t.values["cost"] for n in front)
    assert 99 not in front


def test_search_report_opens_with_the_answer_and_writes_the_leaderboard(store, tmp_path):
    for group in {r.group for r in _search_records()}:
        store.write_group("r1", group, [r for r in _search_records() if r.group == group])
    out = tmp_path / "report"
    paths = write_report(store.url, out, objectives=["val_accuracy:max", "cost:min"])
    md = paths.markdown.read_text()
    first = md.split("\n## ", 2)[1]  # the first section is the answer
    assert first.startswith("Best trial")
    best = rank(trials(_search_records()), Objective("val_accuracy"))[0]
    assert f"trial {best.number}" in first and "kernel_size=5" in first
    assert "test_accuracy = " in first and "held out" in first and "cost $" in first
    assert paths.summary[0].startswith("Best of 25 trials (24 complete) by val_accuracy")
    with open(out / "leaderboard.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 25 and rows[0]["trial"] == str(best.number)
    vals = [float(r["val_accuracy"]) for r in rows if r["val_accuracy"]]
    assert vals == sorted(vals, reverse=True)
    assert rows[-1]["trial"] == "99" and rows[-1]["state"] == "cut short"
    assert {"kernel_size", "filters", "seed_noise", "test_accuracy", "cost_usd"} <= set(rows[0])
    names = {p.name for p in paths.png}
    assert {"search_best_so_far.png", "search_params.png", "search_importance.png",
            "search_parallel.png", "search_pareto.png"} <= names
    html = paths.html.read_text()
    assert html.index("Best trial") < html.index("Summary") < html.index("Leaderboard")
    assert "Pareto front of val_accuracy" in md
    summary = md.split("## Summary", 1)[1].split("## ", 1)[0]
    rows = [line for line in summary.splitlines() if line.startswith("| local")]
    shown = [float(line.split("|")[2]) for line in rows if line.split("|")[2].strip() != "—"]
    assert shown == sorted(shown, reverse=True)  # the summary's configurations best first too


def test_search_report_without_an_objective_is_the_plain_report(store, tmp_path):
    for group in {r.group for r in _search_records()}:
        store.write_group("r1", group, [r for r in _search_records() if r.group == group])
    paths = write_report(store.url, tmp_path / "plain")
    assert "Best trial" not in paths.markdown.read_text()
    assert not (tmp_path / "plain" / "leaderboard.csv").exists()


def test_search_container_rows_are_sorted_by_the_objective_not_the_command_text(store, tmp_path):
    """Fix: a matrix of commands came back sorted by command text; with an objective the
    rows are best first."""
    scores = {"a-first": 0.2, "b-second": 0.9, "c-third": 0.5}
    for i, (cmd, score) in enumerate(scores.items()):
        start = T0 + timedelta(minutes=i)
        store.write_group("r1", f"c-{i}", [rec(
            group=f"c-{i}", trial=0, params={"name": "container", "command": ["echo", cmd]},
            workload="container", metric="score", value=score, unit="", started_at=start,
            ended_at=start + timedelta(seconds=30))])
    md = write_report(store.url, tmp_path / "r", objectives=["score:max"]).markdown.read_text()
    section = md.split("Container benchmarks", 1)[1]
    order = [cmd for cmd in scores if cmd in section]
    assert sorted(order, key=section.index) == ["b-second", "c-third", "a-first"]
    md_low = write_report(store.url, tmp_path / "r2", objectives=["score:min"]).markdown.read_text()
    section = md_low.split("Container benchmarks", 1)[1]
    assert sorted(scores, key=section.index) == ["a-first", "c-third", "b-second"]


def test_search_report_command_takes_objectives_and_says_the_answer_first(store, tmp_path):
    from typer.testing import CliRunner

    from spotbench.cli import app

    for group in {r.group for r in _search_records()}:
        store.write_group("r1", group, [r for r in _search_records() if r.group == group])
    runner = CliRunner()
    res = runner.invoke(app, ["report", store.url, "--out", str(tmp_path / "o"), "--objective", "val_accuracy:max"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0].startswith("Best of 25 trials (24 complete) by val_accuracy")
    res = runner.invoke(app, ["report", store.url, "--out", str(tmp_path / "o2"), "--objective", "val_accuracy:up"])
    assert res.exit_code == 2 and "direction 'up' is not one of max, min" in res.output
    assert "Traceback" not in res.output
