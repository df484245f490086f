"""The type checker in `make test`: mypy, strict on the layers' boundaries ([tool.mypy] in
pyproject.toml lists them: a cloud's facts, the shared types, the registries, the provider
protocol, what plan and the spec checks read of a spec)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def mypy(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_boundaries_type_check():
    done = mypy()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success" in done.stdout


def test_the_boundaries_are_typed_not_any(tmp_path: Path):
    """A caller's mistake at a boundary is caught: the registries and facts give real types."""
    bad = tmp_path / "misuse.py"
    bad.write_text(
        "from spotbench.facts import facts_of\n"
        "from spotbench.workload_registry import get_workload\n"
        "from spotbench.interfaces import Problem\n"
        "zone: int = facts_of('gcp').location_example\n"
        "port: str = get_workload('osu').port\n"
        "Problem('quota', 'x')\n"
    )
    done = mypy("--strict", "--follow-imports=silent", "--ignore-missing-imports", str(bad))
    assert done.returncode == 1, done.stdout
    assert done.stdout.count("error:") == 3, done.stdout
