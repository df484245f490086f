"""The report's History section: trend plots with change points, and the since-previous /
since-baseline table, from a store with a known step."""

from __future__ import annotations

from pathlib import Path

from spotbench.history.synthetic import Step, SyntheticSweep
from tests.history.conftest import run_cli


def rows_of(md: str, caption_start: str) -> list[list[str]]:
    lines = md.split(f"*{caption_start}", 1)[1].splitlines()[2:]  # caption, blank line
    table = []
    for ln in lines:
        if not ln.startswith("|"):
            break
        table.append([c.strip() for c in ln.strip("|").split("|")])
    return table[2:]  # header and separator


def test_history_section_marks_the_step_and_compares_runs(tmp_path: Path) -> None:
    root = tmp_path / "results"
    runs = SyntheticSweep(runs=10, groups=1, seed=9, steps=[Step("latency", 6, 1.4)]).write(root)
    out = tmp_path / "report"
    printed = run_cli("report", str(root), "-o", str(out), "--baseline", runs[2])
    md = (out / "report.md").read_text()
    assert "## History" in md
    # the answer first, on the terminal too: the regression before the files' paths
    said = printed.split("report:", 1)[0]
    assert "Regression: OSU latency @ 8 B · m0" in said and f"from run {runs[6]}" in said
    changes = rows_of(md, "Change points")
    assert {(r[0], r[1], r[-1]) for r in changes} == {
        ("OSU latency @ 8 B · m0", runs[6], "regression"), ("OSU latency @ 1 MiB · m0", runs[6], "regression")}
    compare = {r[0]: r for r in rows_of(md, "Latest run")}
    lat = compare["OSU latency @ 8 B · m0"]
    # latest vs previous: both after the step (≈); vs baseline run 3: +40 % (a regression)
    assert lat[4] == "≈" and lat[7] == "regression" and 30 < float(lat[6].rstrip("%")) < 50
    assert compare["OSU bibw @ 1 MiB · m0"][7] == "≈"
    (market,) = rows_of(md, "Spot market")
    assert market[:3] == ["local · m0 · —", "10/10", "0"]  # no preemption in this history
    for metric in ("latency_8", "latency_1048576", "bibw_1048576", "cost_usd"):
        png = out / f"history_{metric}.png"
        assert png.stat().st_size > 5000 and str(png) in printed
    html = (out / "report.html").read_text()
    assert "<h2>History</h2>" in html and html.count("data:image/png;base64") >= 6
    # an unknown baseline run is a usage error naming the runs there are
    bad = run_cli("report", str(root), "-o", str(out), "--baseline", "19990101T000000Z", code=2)
    assert "19990101T000000Z" in bad and runs[0] in bad


def test_one_run_has_no_history_section(tmp_path: Path) -> None:
    root = tmp_path / "results"
    SyntheticSweep(runs=1, groups=2).write(root)
    run_cli("report", str(root), "-o", str(tmp_path / "report"))
    assert "## History" not in (tmp_path / "report" / "report.md").read_text()
