"""Change points: known steps and pure noise, through the real store and `spotbench history`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spotbench.history.changepoints import detect
from spotbench.history.synthetic import Step, SyntheticSweep
from tests.history.conftest import cli_json, run_cli, spec_for


def by_series(hist: dict) -> dict[tuple[str, str, int | None], dict]:
    return {(s["point"], s["metric"], s["size_bytes"]): s for s in hist["series"]}


def test_known_steps_are_found_at_their_run_with_direction(tmp_path: Path) -> None:
    root = tmp_path / "results"
    runs = SyntheticSweep(runs=12, groups=2, noise=0.02, preempted_every=5, seed=3,
                          steps=[Step("latency", 8, 1.25), Step("bibw", 5, 0.8)]).write(root)
    spec = spec_for(tmp_path, root)
    hist = cli_json("history", str(spec))
    series = by_series(hist)
    for point in ("g000", "g001"):
        for size in (8, 1 << 20):
            cps = series[(point, "latency", size)]["change_points"]
            assert [(c["run"], c["kind"]) for c in cps] == [(runs[8], "regression")]
            assert cps[0]["rel_change"] == pytest.approx(0.25, abs=0.04)
            assert cps[0]["before_runs"] == 8 and cps[0]["after_runs"] == 4 and cps[0]["pvalue"] < 0.001
            assert cps[0]["date"].startswith("2026-01-09")
        bibw = series[(point, "bibw", 1 << 20)]["change_points"]  # bandwidth down = worse
        assert [(c["run"], c["kind"]) for c in bibw] == [(runs[5], "regression")]
        assert bibw[0]["rel_change"] == pytest.approx(-0.2, abs=0.03)
        # sizes not followed are not reported
        assert (point, "latency", 1024) not in series
    # --fail-on-regression: 20 % bibw drop and 25 % latency rise fail at 10 %, not at 30 %
    failing = cli_json("history", str(spec), "--fail-on-regression", "10", code=1)["failing"]
    assert {(f["metric"], f["size_bytes"]) for f in failing} == {("latency", 8), ("latency", 1 << 20),
                                                                 ("bibw", 1 << 20)}
    assert "regression(s) of 30% or more" not in run_cli("history", str(spec), "--fail-on-regression", "30")
    # --since after every change: nothing fails
    run_cli("history", str(spec), "--fail-on-regression", "10", "--since", runs[9])


def test_improvements_do_not_fail_the_gate(tmp_path: Path) -> None:
    root = tmp_path / "results"
    runs = SyntheticSweep(runs=10, groups=1, seed=4,
                          steps=[Step("latency", 6, 0.7), Step("bibw", 6, 1.3)]).write(root)
    spec = spec_for(tmp_path, root)
    hist = cli_json("history", str(spec), "--fail-on-regression", "1")
    assert {(c["metric"], c["run"], c["kind"]) for c in hist["change_points"]} == {
        ("latency", runs[6], "improvement"), ("bibw", runs[6], "improvement")}
    assert hist["failing"] == []


def test_preempted_attempts_are_excluded_and_counted(tmp_path: Path) -> None:
    """Preempted attempts hold 5x values here: taken in, they would be outliers/change points."""
    root = tmp_path / "results"
    SyntheticSweep(runs=15, groups=2, noise=0.01, preempted_every=3, seed=5).write(root)
    spec = spec_for(tmp_path, root)
    hist = cli_json("history", str(spec))
    assert hist["change_points"] == []
    lat = by_series(hist)[("g000", "latency", 8)]
    assert max(r["value"] for r in lat["runs"]) < 2.2  # the 5x attempts never reach a value
    counted = [(r["attempts"], r["excluded_attempts"]) for r in lat["runs"]]
    assert set(counted) == {(1, 0), (2, 1)} and sum(e for _, e in counted) >= 4
    # the cost of a run counts every attempt, the preempted one too
    cost = by_series(hist)[("g000", "cost_usd", None)]
    per_attempt = 0.001
    for r in cost["runs"]:
        assert r["value"] == pytest.approx(per_attempt * r["attempts"])


def test_pure_noise_raises_no_alarm(tmp_path: Path) -> None:
    # 1,060 seeded noise series of 8–60 points at p < 0.001: about one false alarm expected
    # (measured: 1); without the Bonferroni factor and the sample std it was 20–40
    rng = np.random.default_rng(2026)
    alarms = [n for n in list(range(8, 61)) * 20 if detect(rng.normal(100.0, 3.0, n), max_pvalue=0.001)]
    assert len(alarms) <= 2, alarms
    # and through the store and the CLI
    root = tmp_path / "results"
    SyntheticSweep(runs=25, groups=3, noise=0.05, seed=11, preempted_every=4).write(root)
    hist = cli_json("history", str(spec_for(tmp_path, root)), "--fail-on-regression", "0")
    assert hist["change_points"] == [] and hist["failing"] == []
    assert len(hist["series"]) == 3 * 4 and all(len(s["runs"]) == 25 for s in hist["series"])


def test_detect_edge_cases() -> None:
    assert detect([]) == [] and detect([1.0, 2.0]) == []
    assert detect([1.0] * 10) == []
    steps = detect([1.0] * 5 + [2.0] * 5)  # constant levels: a certain step
    assert [(c.index, c.rel_change) for c in steps] == [(5, 1.0)]
    assert detect([10, 10.1, 9.9, 10, 10.05, 9.95, 12, 12.1, 11.9, 12], min_change=0.5) == []
    two = detect([10, 10.1, 9.9, 10, 10.05, 9.95, 12, 12.1, 11.9, 12, 15, 15.1, 14.9, 15.05])
    assert [c.index for c in two] == [6, 10]
