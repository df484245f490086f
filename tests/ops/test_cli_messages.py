"""Human output of the operations commands is sentences: a failed group in `status` with
the tail of its stderr, spend as a sentence, no Python reprs (issue #27, items 1 and 6)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import yaml
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.results import Result, ResultStore
from spotbench.spec import load_spec


@pytest.fixture
def local_spec(tmp_path, monkeypatch):
    monkeypatch.setenv("SPOTBENCH_STATE_ROOT", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "byo.yaml"
    path.write_text(yaml.safe_dump({
        "name": "byo", "cloud": "local", "results": str(tmp_path / "results"), "budget": 5,
        "workload": {"name": "container", "command": ["false"]},
    }))
    return path


def _record(run: str, group: str, metric: str, **meta) -> Result:
    now = datetime.now(UTC)
    return Result(sweep="byo", run=run, group=group, trial=1, workload="container", metric=metric,
                  value=1.0, unit="flag", cloud="local", machine_type="local", started_at=now,
                  ended_at=now, metadata=meta)


def test_status_shows_a_failed_group_with_its_stderr_and_spend_as_a_sentence(local_spec):
    spec = load_spec(local_spec)
    store = ResultStore(spec.results_url())
    run = store.open_run().run
    group = spec.plan()[0].id
    store.write_group(run, group, [_record(run, group, "failed", exit_code=1,
                                           failure="the command exited with code 1",
                                           stderr_tail="loading\nfatal: no input.dat")])
    out = CliRunner().invoke(app, ["status", str(local_spec)])
    assert out.exit_code == 0, out.output
    assert "FAILED: the command exited with code 1" in out.output
    assert "last stderr line: fatal: no input.dat" in out.output
    assert "    fatal: no input.dat" in out.output
    spend = next(line for line in out.output.splitlines() if line.startswith("spend:"))
    assert "{" not in spend and "'" not in spend, spend
    assert "budget 5 USD" in spend and "left" in spend
