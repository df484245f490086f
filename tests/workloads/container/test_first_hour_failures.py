"""A failed group is never counted complete anywhere (issue #39): not on `spotbench run`'s
progress line, not in its summary, not in the report's Summary."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from spotbench.localrun.live import _line
from spotbench.localrun.runner import Progress
from tests.test_e2e_local import cli

EXIT_1 = "import sys; print('fatal: no input.dat', file=sys.stderr); sys.exit(1)"


def test_first_hour_progress_line_counts_no_failed_group_complete():
    p = Progress(total=2, completed={"a", "b"}, failed={"b"}, message="run closed")
    line = _line(p, since=0.0)
    assert "1/2 groups complete · 1 failed · run closed" in line, line


@pytest.mark.slow
def test_first_hour_a_failed_run_says_failed_never_complete(tmp_path: Path) -> None:
    spec = {"name": "onefail", "cloud": "local", "deadline": "1m", "results": str(tmp_path / "results"),
            "workload": {"name": "container", "command": [sys.executable, "-c", EXIT_1]}}
    path = tmp_path / "onefail.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = cli(tmp_path, "run", str(path), "--report-dir", str(tmp_path / "report"),
               stderr=subprocess.STDOUT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 3, out
    assert "1/1 groups complete" not in out, out
    assert "0/1 groups complete · 1 failed" in out, out
    report = (tmp_path / "report" / "report.md").read_text()
    assert "1 group runs: 0 complete, 1 preempted, failed or incomplete" in report
    assert "1 complete" not in report
