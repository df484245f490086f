"""End to end on the local cloud: `spotbench run` of a container sweep, its report, self-stop."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from spotbench.clouds.base import State
from spotbench.clouds.local.cloud import LocalCloud
from spotbench.results import ResultStore
from tests.test_e2e_local import cli

pytestmark = pytest.mark.slow

BENCH = """
import json, os, sys
scale = float(sys.argv[1])
with open(os.path.join(os.environ["SPOTBENCH_RESULTS_DIR"], "out.jsonl"), "w") as f:
    for threads in (1, 2):
        f.write(json.dumps({"metric": "ops_per_s", "value": scale * threads, "unit": "ops/s",
                            "labels": {"threads": threads}}) + "\\n")
print(f"setup_time={scale / 10} s")
"""


def test_container_sweep_runs_reports_and_stops_itself(tmp_path: Path) -> None:
    script = tmp_path / "bench.py"
    script.write_text(BENCH)
    spec = {
        "name": "byo", "cloud": "local", "deadline": "2m", "results": str(tmp_path / "results"),
        "workload": {"name": "container", "command": [sys.executable, str(script), "100"]},
        "matrix": {"command": [[sys.executable, str(script), "100"], [sys.executable, str(script), "300"]]},
    }
    path = tmp_path / "byo.yaml"
    path.write_text(yaml.safe_dump(spec))
    started = time.monotonic()
    proc = cli(tmp_path, "run", str(path), "--report-dir", str(tmp_path / "report"))
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert time.monotonic() - started < 60, "groups must stop themselves, not at the 2 min deadline"

    records = ResultStore(f"file://{tmp_path}/results").read()
    got = sorted((r.params["command"][-1], r.metric, r.value, r.unit,
                  r.metadata["labels"].get("threads")) for r in records)
    assert got == [
        ("100", "ops_per_s", 100.0, "ops/s", 1), ("100", "ops_per_s", 200.0, "ops/s", 2),
        ("100", "setup_time", 10.0, "s", None),
        ("300", "ops_per_s", 300.0, "ops/s", 1), ("300", "ops_per_s", 600.0, "ops/s", 2),
        ("300", "setup_time", 30.0, "s", None),
    ]
    assert not any(r.preempted for r in records) and all(r.workload == "container" for r in records)

    # the report: a table and a plot per metric
    report = (tmp_path / "report" / "report.md").read_text()
    assert "Container benchmarks" in report and "### ops_per_s (ops/s)" in report
    for metric in ("ops_per_s", "setup_time"):
        assert (tmp_path / "report" / f"container_{metric}.png").stat().st_size > 1000
    summary = pd.read_csv(tmp_path / "report" / "summary.csv")
    avg = summary[(summary["table"] == "container_ops_per_s") & (summary["column"] == "average")]
    assert sorted(avg["value"]) == [100.0, 200.0, 300.0, 600.0]
    assert set(avg["labels"]) == {"threads=1", "threads=2"}

    cloud = LocalCloud(tmp_path / "state" / "byo" / "cloud.db")
    assert {i.state for i in cloud.query({"spotbench-sweep": "byo"})} == {State.STOPPED}
