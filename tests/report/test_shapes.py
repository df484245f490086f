"""`report` on every shape of real data, with values as OSU prints them.

Only the 0-byte size (`osu_latency -m 0:0`), a single size, a single trial; numbers for
people (four significant digits, thousands separators: issue #27); the spread of the trials (min, median, CV, runs) is shown and
trials that disagree are flagged; the TF core note only where tasks shared a machine.
"""

from __future__ import annotations

import statistics

import pytest

from spotbench.report import write_report
from tests.report.conftest import rec
from tests.report.test_tf_cost_reference import tf_group
from workloads.osu.parse import parse

# `osu_latency -m 0:0` (OSU 7.5): one row, the 0-byte size
ZERO_ONLY = "# OSU MPI Latency Test v7.5\n# Datatype: MPI_CHAR.\n# Size       Avg Latency(us)\n0                       1.12\n"


def _store_osu(store, text: str, trial: int, machine: str = "c5n.18xlarge") -> None:
    out = parse(text)
    recs = [rec(group=f"g-t{trial}", trial=trial, metric=out.benchmark, value=v, unit=out.unit,
                machine_type=machine, metadata={"size_bytes": s}) for s, v in out.rows]
    store.write_group("r1", f"g-t{trial}", recs)


def _row(md: str, start: str) -> list[str]:
    line = next(ln for ln in md.splitlines() if ln.startswith(start))
    return [c.strip() for c in line.strip("|").split("|")]


def test_latency_with_only_the_zero_byte_size(store, tmp_path):
    _store_osu(store, ZERO_ONLY, 1)
    paths = write_report(store.url, tmp_path / "out")
    md = paths.markdown.read_text()
    assert _row(md, "| c5n.18xlarge | 0 B |") == ["c5n.18xlarge", "0 B", "1.12", "1.12", "1.12", "1.12", "—", "1"]
    assert "No latency plot" in md and paths.png == []


def test_single_size_single_trial(store, tmp_path):
    text = "# OSU MPI Bi-Directional Bandwidth Test v7.5\n# Datatype: MPI_CHAR.\n# Size      Bandwidth (MB/s)\n1048576             11076.29\n"
    _store_osu(store, text, 1)
    paths = write_report(store.url, tmp_path / "out")
    md = paths.markdown.read_text()
    # four significant digits, the integer part never rounded, thousands separated (#27)
    assert _row(md, "| c5n.18xlarge | 1 MiB |") == [  # human sizes (#39)
        "c5n.18xlarge", "1 MiB", "11,076", "11,076", "11,076", "11,076", "—", "1"]
    assert [p.name for p in paths.png] == ["osu_bibw.png"]


def test_spread_and_disagreeing_trials_are_flagged(store, tmp_path):
    values = {1: [1.10, 1076.29], 2: [1.12, 1080.00], 3: [1.11, 1500.00]}  # 8 B steady, 8 KiB not
    for trial, (small, big) in values.items():
        text = ("# OSU MPI Latency Test v7.5\n# Size       Avg Latency(us)\n"
                f"8                       {small:.2f}\n8192                 {big:.2f}\n")
        _store_osu(store, text, trial)
    md = write_report(store.url, tmp_path / "out").markdown.read_text()
    header = _row(md, "| instance type |")
    assert header[-5:] == ["average", "min", "median", "CV", "runs"]
    big = [v[1] for v in values.values()]
    cv = statistics.stdev(big) / statistics.mean(big)
    assert _row(md, "| c5n.18xlarge | 8 KiB |") == [
        "c5n.18xlarge", "8 KiB", "1,076", "1,080", "1,500", f"{statistics.mean(big):,.0f}",
        "1,076", "1,080", f"{100 * cv:.3g}% !", "3"]
    small = [v[0] for v in values.values()]
    small_cv = statistics.stdev(small) / statistics.mean(small)
    assert _row(md, "| c5n.18xlarge | 8 B |")[-2:] == [f"{100 * small_cv:.3g}%", "3"]  # not flagged
    assert "Trials disagree" in md and "8 KiB" in md and "c5n.18xlarge 8 B" not in md


def test_tf_training_time_spread(store, tmp_path):
    for trial, t in ((1, 100.0), (2, 150.0)):
        recs = tf_group(2, trial, t)
        store.write_group("r1", recs[0].group, recs)
    md = write_report(store.url, tmp_path / "o").markdown.read_text()
    row = _row(md, "| n1-standard-2 | 2 |")
    cv = statistics.stdev([100.0, 150.0]) / 125.0
    assert row[-4:] == ["100", "125", f"{100 * cv:.3g}% !", "2"]


@pytest.mark.parametrize("cloud, noted", [("local", True), ("gcp", False)])
def test_core_note_only_where_tasks_shared_a_machine(store, tmp_path, cloud, noted):
    # 4 workers + chief + ps = 6 tasks; each VM (or the local host) has 2 cores
    recs = tf_group(4, 1, 100, cloud=cloud, cpu=2, cpu_key="host_cores")
    store.write_group("r1", recs[0].group, recs)
    md = write_report(store.url, tmp_path / "o").markdown.read_text()
    assert ("competed for cores" in md) is noted
