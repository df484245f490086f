from __future__ import annotations

import pytest

from spotbench.report import NoResults, write_report
from workloads.osu.report import summary
from spotbench.report import data as _data
from tests.report.conftest import osu_records


def _write(store, machine, values, preempted=()):
    for recs in osu_records(machine, values, preempted):
        store.write_group("r1", recs[0].group, recs)


def test_osu_trials_and_average_exclude_preempted(store, tmp_path):
    _write(store, "c5n.18xlarge", {
        1: {"latency": [2.0, 2.0, 3.0, 4.0], "bibw": [1.0, 2.0, 4.0, 8.0]},
        2: {"latency": [4.0, 4.0, 5.0, 6.0], "bibw": [3.0, 4.0, 6.0, 10.0]},
        3: {"latency": [100.0, 100.0]},  # preempted after two sizes
    }, preempted=(3,))
    _write(store, "local", {1: {"latency": [1.0, 1.5, 2.0, 2.5]}})
    df = _data.frame(store.read())
    table = summary(df, "latency")
    row = table.loc[("c5n.18xlarge", 0)]
    assert row["trial 1"] == 2.0 and row["trial 2"] == 4.0
    assert row["average"] == pytest.approx(3.0)  # preempted 100 excluded
    assert row["n"] == 2
    assert row["trial 3 (preempted)"] == 100.0
    assert table.loc[("local", 4), "average"] == 2.5
    counts = _data.trial_counts(df)
    assert counts.loc["c5n.18xlarge"].tolist() == [2, 1, 3]

    paths = write_report(store.url, tmp_path / "out")
    md = paths.markdown.read_text()
    assert "| c5n.18xlarge | 0 B | 2 | 4 | 100* | 3 |" in md  # numbers for people (#27)
    assert "2 complete, 1 preempted/incomplete" in md
    for png in paths.png:
        assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"
    assert {p.name for p in paths.png} == {"osu_latency.png", "osu_bibw.png"}
    page = paths.html.read_text()
    assert page.count("data:image/png;base64,") == 2 and "<table>" in page
    csv = paths.csv.read_text()
    assert "osu_latency" in csv and "average" in csv


def test_empty_results_raise_clear_error(store, tmp_path):
    with pytest.raises(NoResults, match="no results under"):
        write_report(store.url, tmp_path / "out")


def test_placements_of_one_instance_type_are_separate_rows(store, tmp_path):
    for placement in ("compact", "spread"):
        for recs in osu_records("c5n.18xlarge", {1: {"latency": [2.0, 3.0]}}):
            recs = [r.model_copy(update={"group": f"{r.group}-{placement}",
                                         "metadata": {**r.metadata, "placement": placement}})
                    for r in recs]
            store.write_group("r1", recs[0].group, recs)
    configs = set(_data.frame(store.read())["config"])
    assert {c.rsplit(" · ", 1)[-1] for c in configs} == {"placement=compact", "placement=spread"}
    assert len(configs) == 2
