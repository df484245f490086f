"""`schedule: once` on the local cloud, end to end (issue #39): `spotbench run` deploys,
starts, waits and tears down; afterwards nothing of the sweep stands — no instance rows,
no functions server, no state folder, nothing for `teardown` to find — but the results
and the report (the members' logs beside it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from spotbench.ops.teardown import sweeper_for
from spotbench.results import ResultStore
from spotbench.spec import load_spec
from tests.test_first_hour_walkthrough import cli

pytestmark = pytest.mark.slow
OPS = ["python3", "-c", 'import json; print(json.dumps({"metric": "ops", "value": 5, "unit": "ops/s"}))']


def _spec(tmp_path: Path, schedule) -> Path:
    path = tmp_path / "once.yaml"
    path.write_text(yaml.safe_dump({
        "name": "once", "cloud": "local", "deadline": "1m", "schedule": schedule,
        "results": str(tmp_path / "results" / "once"),
        "workload": {"name": "container", "command": OPS}, "trials": 2}))
    return path


def test_first_hour_once_local_run_leaves_nothing_but_results(tmp_path):
    state = tmp_path / "state"
    env = {**os.environ, "SPOTBENCH_STATE_ROOT": str(state), "COLUMNS": "100"}
    spec_path = _spec(tmp_path, "once")
    run = cli(tmp_path, "run", str(spec_path), "--report-dir", str(tmp_path / "report"), env=env)
    out, _ = run.communicate(timeout=240)
    assert run.returncode == 0, out
    assert "Best ops (higher is better): local: 5 ops/s" in out, out
    assert "nothing left but the results" in out, out
    spec = load_spec(spec_path)
    # the results and the report stay …
    records = ResultStore(spec.results_url()).read()
    assert len({r.group for r in records}) == 2 and all(not r.preempted for r in records)
    assert (tmp_path / "report" / "report.md").exists() and (tmp_path / "report" / "logs").is_dir()
    # … and nothing else: the state folder is gone and the orphan sweep finds nothing
    assert not (state / "once").exists()
    assert sweeper_for("local", spec, root=state).find("once") == []
    status = cli(tmp_path, "teardown", str(spec_path), "--json", env=env)
    text, _ = status.communicate(timeout=60)
    assert status.returncode == 0, text
    assert json.loads(text[text.index("{"):])["found"] == []


def test_first_hour_once_a_cron_run_keeps_its_state_for_the_next_tick(tmp_path):
    """The contrast: the same run on a cron keeps its local state (instances, secret) for
    its next tick, which `teardown` then finds."""
    state = tmp_path / "state"
    env = {**os.environ, "SPOTBENCH_STATE_ROOT": str(state), "COLUMNS": "100"}
    spec_path = _spec(tmp_path, {"cron": "0 3 * * *"})
    run = cli(tmp_path, "run", str(spec_path), "--no-report", env=env)
    out, _ = run.communicate(timeout=240)
    assert run.returncode == 0, out
    assert (state / "once" / "cloud.db").exists()
    assert sweeper_for("local", load_spec(spec_path), root=state).find("once") != []


def test_first_hour_once_refuses_a_stopped_lifecycle_naming_the_fix(tmp_path):
    path = _spec(tmp_path, "once")
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**data, "lifecycle": "stopped"}))
    run = cli(tmp_path, "plan", str(path))
    out, _ = run.communicate(timeout=60)
    assert run.returncode == 2, out
    assert "lifecycle 'stopped' with `schedule: once`" in out and "remove `lifecycle`" in out
