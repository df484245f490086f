"""`spotbench run` of a sweep whose commands fail: the run says so and exits 3, the report
opens with the failures, nothing is charted from them, and no failed group is retried
(issue #27, item 1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from spotbench.results import ResultStore
from tests.test_e2e_local import cli

pytestmark = pytest.mark.slow

EXIT_1 = "import sys; print('warming up'); print('fatal: no input.dat', file=sys.stderr); sys.exit(1)"


def test_failed_commands_fail_the_run_loudly(tmp_path: Path) -> None:
    ok = [sys.executable, "-c", 'print(\'{"metric": "ops", "value": 5, "unit": "ops/s"}\')']
    spec = {
        "name": "fails", "cloud": "local", "deadline": "1m", "results": str(tmp_path / "results"),
        "workload": {"name": "container", "command": ok},
        "matrix": {"command": [ok, [sys.executable, "-c", EXIT_1], ["/nonexistent/bench"]]},
    }
    path = tmp_path / "fails.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = cli(tmp_path, "run", str(path), "--report-dir", str(tmp_path / "report"), "--json",
               stderr=subprocess.PIPE)
    stdout, out = proc.communicate(timeout=120)  # --json: the outcome on stdout, people's text on stderr
    assert proc.returncode == 3, out
    outcome = json.loads(stdout)
    assert outcome["ok"] is False and sorted(outcome["groups"].values()) == ["complete", "failed", "failed"]
    tails = sorted(f["stderr_tail"] for f in outcome["failures"].values())
    assert "fatal: no input.dat" in tails[1] and "No such file or directory" in tails[0]
    assert outcome["report"]["markdown"].endswith("report.md")
    assert out.count("failed: the command exited with code 1") >= 1, out
    assert "fatal: no input.dat" in out  # the tail of its stderr
    assert "cannot run '/nonexistent/bench'" in out and "No such file or directory" in out
    assert "complete" in out  # the JSON-line command succeeded

    store = ResultStore(f"file://{tmp_path}/results")
    run = store.runs()[-1].run
    groups = [g.id for g in __import__("spotbench.spec", fromlist=["load_spec"]).load_spec(path).plan()]
    assert [store.launch_count(run, g) for g in groups] == [1, 1, 1]  # no retry of a failure
    metrics = {r.metric for r in store.read() if not r.metadata.get("failure")}
    assert metrics == {"ops"}  # the JSON line on stdout counted; no exit_code value

    report = (tmp_path / "report" / "report.md").read_text()
    assert "exit_code" not in report and "127.000" not in report
    banner = report.index("## Failures: 2 group(s) failed")
    assert banner < report.index("Container benchmarks")
    assert "fatal: no input.dat" in report[banner:report.index("Container benchmarks")]
