"""Every source file the tests import is one git tracks: a `.gitignore` pattern that hides a
module (as `results/` once hid `spotbench/results/*.py`) passes on the machine that wrote it
and breaks every fresh clone."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ["spotbench", "functions", "workloads", "infra", "tests", "bench", "scripts", "images"]


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="not a git checkout")
def test_no_source_file_is_hidden_by_gitignore():
    out = subprocess.run(
        ["git", "ls-files", "--others", "--ignored", "--exclude-standard", "--", *SOURCES],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()
    hidden = [p for p in out if p.endswith((".py", ".sh", ".c", ".csv", ".yaml", ".json"))
              and "__pycache__" not in p]
    assert hidden == [], f"ignored by .gitignore but part of the source tree: {hidden}"
