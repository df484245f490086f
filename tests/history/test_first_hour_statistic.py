"""One statistic for a key number in `report`, `history` and the ranking (#39): the median
of the latest run's complete trials, in the same unit."""

from __future__ import annotations

from spotbench.history.catalog import Catalog
from spotbench.history.trends import history
from spotbench.report import data, ranking, summary
from spotbench.results import ResultStore
from tests.report.conftest import rec


def test_first_hour_history_and_report_show_the_same_median(tmp_path):
    store = ResultStore(f"file://{tmp_path}/results")
    for run in ("r1", "r2"):
        for trial, v in ((1, 10.0), (2, 11.0), (3, 30.0)):  # mean 17, median 11
            g = f"osu-x-t{trial}"
            store.write_group(run, g, [rec(run=run, group=g, trial=trial, value=v,
                                           metadata={"size_bytes": 8})])
    with Catalog(store.url) as cat:
        hist = history(cat)
    [series] = [s for s in hist.series if s.metric == "latency" and s.size == 8]
    assert series.values == [11.0, 11.0]
    df = data.frame(store.read())
    assert summary.key_numbers(df).iloc[0]["OSU latency @ 8 B"] == "11 µs"
    [r] = ranking.rank(df)
    assert r.table["metric"].iloc[0] == 11.0 and r.value_text(r.table.index[0]).startswith("11 µs")
