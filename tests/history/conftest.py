"""Stores with a known history, written in the layout a sweep writes, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from spotbench.cli import app


def spec_for(tmp_path: Path, results: Path, name: str = "synthetic") -> Path:
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(yaml.safe_dump({"name": name, "cloud": "local", "workload": {"name": "osu"},
                                    "results": str(results)}))
    return spec


def run_cli(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


def cli_json(*args: str, code: int = 0):
    result = CliRunner().invoke(app, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)  # warnings (e.g. a spec without schedule) go to stderr


@pytest.fixture
def cli():
    return run_cli
