"""`estimate` answers first: per run, per month, the disks billed while stopped and the
spec's budget lead the output; its tables fit an 80-column terminal without cutting ids."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.costs import load_catalog
from spotbench.estimate import estimate
from spotbench.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
AWS_OSU = ROOT / "examples" / "aws-osu.yaml"


def _head(out: str) -> str:
    """The lines before the first table, as one line (the terminal wraps them)."""
    return " ".join(out.split("\n\n", 1)[0].split())


def _run(*args: str, columns: int = 80) -> str:
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)}, terminal_width=columns)
    assert res.exit_code == 0, res.output
    return res.output


def test_aws_osu_leads_with_run_month_disks_and_budget():
    est = estimate(load_spec(AWS_OSU), load_catalog(), records=[])
    out = _run("estimate", str(AWS_OSU))
    head = _head(out)
    assert "┏" not in head
    run = re.search(r"≈ ([\d,.]+) USD per run, ≈ ([\d,.]+) USD per month", head)
    assert run, head
    assert float(run[1].replace(",", "")) == pytest.approx(est.run_usd, abs=0.005)
    assert float(run[2].replace(",", "")) == pytest.approx(est.month_usd, abs=0.5)
    # 12 disks × 30 GB gp3 (0.08 USD/GB-month) exist all month: stated up front
    assert "28.80 USD a month of it is 12 disks × 30 GB, billed even while the VMs are stopped" in head
    # budget: 30 USD against ≈ 24.11 USD of compute per run and ≈ 799 USD per month (762 + the NAT Gateway and its IP all month, 36.50, + the bucket; #39)
    assert "budget 30 USD covers 1 run" in head
    assert "exceeded by run 2 (day 2 of the schedule)" in head and "a month costs 799 USD" in head


def test_budget_that_lasts_months_and_no_budget(tmp_path):
    spec = yaml.safe_load(AWS_OSU.read_text())
    spec["budget"] = 5000
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(spec))
    est = estimate(load_spec(f), load_catalog(), records=[])
    assert est.budget_runs == int(5000 // est.budgeted_run_usd)
    head = _head(_run("estimate", str(f)))
    assert f"budget 5,000 USD covers {est.budget_runs} runs" in head and "months at this schedule" in head
    del spec["budget"]
    f.write_text(yaml.safe_dump(spec))
    head = _head(_run("estimate", str(f)))
    assert "no budget: nothing caps the spend" in head
    data = json.loads(_run("estimate", str(f), "--json"))
    assert data["summary"]["budget"] is None and data["summary"]["month_usd"] == pytest.approx(
        data["month_total_usd"])


@pytest.mark.parametrize("columns", [80, 100])
def test_estimate_fits_the_terminal_and_keeps_group_ids_whole(columns):
    out = _run("estimate", str(AWS_OSU), columns=columns)
    assert max(len(line.rstrip()) for line in out.splitlines()) <= columns
    assert "…" not in out
    ids = [g.id for g in load_spec(AWS_OSU).plan()]
    for gid in ids:
        assert re.search(rf"│ {re.escape(gid)} +│", out), gid
    if columns == 80:
        assert "not shown at 80 columns" in out


def test_no_earlier_results_gives_no_self_stop_figure_not_float_noise(tmp_path, monkeypatch):
    """With no earlier results every group is priced to its deadline, so self-stop saves
    nothing measurable: say so, never a 1.1e-16 USD 'saving' (what gcp-gpu used to print)."""
    monkeypatch.chdir(tmp_path)  # no ./results of this sweep
    spec = ROOT / "examples" / "gcp-gpu.yaml"
    est = estimate(load_spec(spec), load_catalog(), records=[])
    assert est.self_stop_saving_tick == 0
    out = " ".join(_run("estimate", str(spec)).split())
    assert "self-stop: no saving estimated yet" in out
    assert not re.search(r"\de-\d", out), out
