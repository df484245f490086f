"""The search examples (issue #35): `examples/search-local.yaml` runs end to end on the local
cloud in a few minutes; the GCP and AWS examples search on spot GPUs, and `plan`, `preview`
(offline) and `estimate` each say so before anything is deployed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import optuna
import pytest
import yaml
from typer.testing import CliRunner

from spotbench.results import ResultStore
from spotbench.search.study import TRIAL_ATTR
from spotbench.spec import load_spec
from tests.search.test_search_local import max_overlap, run, study

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.mark.slow
def test_search_examples_local_runs_in_a_few_minutes_on_the_local_cloud(tmp_path: Path) -> None:
    data = yaml.safe_load((EXAMPLES / "search-local.yaml").read_text())
    data["results"] = str(tmp_path / "results")  # the example as shipped, its results kept here
    path = tmp_path / "search-local.yaml"
    path.write_text(yaml.safe_dump(data))
    spec = load_spec(path)
    points = spec.points()
    assert len(points) == spec.search.n == 16
    began = time.monotonic()
    done = run(tmp_path, path, timeout=300)
    took = time.monotonic() - began
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert took < 300  # "a few minutes" on a laptop; well under on a quiet machine
    store = ResultStore(f"file://{tmp_path}/results")
    assert max_overlap(store) == 2
    trials = study(tmp_path).trials
    assert sorted(t.user_attrs[TRIAL_ATTR] for t in trials) == list(range(1, 17))  # each once
    states = {t.state for t in trials}
    assert states <= {optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED}
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert complete and all(t.value == pytest.approx(-(t.params["x"] - 3) ** 2 - (t.params["k"] - 2) ** 2)
                            for t in complete)
    asked = sorted((t.user_attrs[TRIAL_ATTR], t.params["x"], t.params["k"]) for t in trials)
    assert asked == [(i, pytest.approx(p["x"]), p["k"]) for i, p in enumerate(points, start=1)]


GPU_EXAMPLES = {
    # example: (trials, members per trial, the instance resource and its count, the GPU)
    "gcp-search-gpu.yaml": (24, 3, "RegionInstanceTemplate", "nvidia-tesla-t4"),
    "aws-search-gpu.yaml": (16, 3, "LaunchTemplate", "g4dn.xlarge"),
}


@pytest.mark.parametrize("example", sorted(GPU_EXAMPLES))
def test_search_examples_on_spot_gpus_plan_preview_and_estimate(example: str, tmp_path: Path) -> None:
    pytest.importorskip("pulumi")
    from spotbench.cli import app

    trials, members, template, gpu = GPU_EXAMPLES[example]
    path = EXAMPLES / example
    spec = load_spec(path)
    assert spec.search is not None and spec.search.n == trials
    assert spec.provisioning == "spot"
    groups = spec.plan()
    assert len(groups) == trials and all(len(g.members) == members for g in groups)
    assert all(gpu in (g.point.get("accelerator"), g.point.get("machine_type")) for g in groups)

    runner = CliRunner()
    env = {"COLUMNS": "200"}
    planned = runner.invoke(app, ["plan", str(path)], env=env, terminal_width=200)
    assert planned.exit_code == 0, planned.output
    assert f"search: {trials} groups = {trials} trials × 1 repeat" in planned.output
    assert f"method: {spec.search.method}" in planned.output

    previewed = runner.invoke(app, ["preview", str(path)], env=env, terminal_width=200)
    assert previewed.exit_code == 0, previewed.output
    assert "(offline preview)" in previewed.output
    line = next(ln for ln in previewed.output.splitlines() if f" {template} " in ln)
    assert f"{trials * members} × " in line  # one VM template per member of every trial

    estimated = runner.invoke(app, ["estimate", str(path), "--json"], env=env)
    assert estimated.exit_code == 0, estimated.output
    est = json.loads(estimated.output)
    assert est["search"]["trials"] == trials and est["search"]["groups"] == trials
    assert est["search"]["usd"] == pytest.approx(est["summary"]["run_usd"])  # the whole search priced
    assert est["search"]["usd_per_trial"] > 0
    assert est["search"]["budget_trials"] <= trials and est["budget"] == spec.budget
    assert any("spot prices" in a for a in est["assumptions"])
