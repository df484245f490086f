"""Terminal tables fit 80 columns: ids a user copies into `ssh`/`collect` are printed whole,
optional columns are dropped (and named), the rest wrap; nothing is cut with `…`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.cli._common import Column, fit_table
from spotbench.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, columns: int = 80) -> str:
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)}, terminal_width=columns)
    assert res.exit_code == 0, res.output
    return res.output


def _fits(out: str, columns: int) -> None:
    assert max(len(line.rstrip()) for line in out.splitlines()) <= columns, out
    assert "…" not in out


@pytest.fixture
def long_spec(tmp_path) -> Path:
    """A local sweep with the longest name a spec allows (24) and two roles per group."""
    f = tmp_path / "long.yaml"
    f.write_text(yaml.safe_dump({"name": "a-rather-long-sweep-name", "cloud": "local",
                                 "workload": {"name": "osu"}, "matrix": {"machine_type": ["local"]},
                                 "trials": 2, "results": str(tmp_path / "results")}))
    return f


@pytest.mark.parametrize("columns", [60, 80])
def test_plan_keeps_group_ids_whole(long_spec, columns):
    out = _run("plan", str(long_spec), columns=columns)
    _fits(out, columns)
    for g in load_spec(long_spec).plan():
        assert re.search(rf"│ {re.escape(g.id)} +│", out), (g.id, out)
    assert "not shown at" in out or columns == 80


def test_plan_of_a_tf_sweep_at_80_columns():
    spec = ROOT / "examples" / "gcp-tf.yaml"
    out = _run("plan", str(spec))
    _fits(out, 80)
    for g in load_spec(spec).plan():
        assert re.search(rf"│ {re.escape(g.id)} +│", out), g.id


def test_status_keeps_group_ids_whole(long_spec, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the local state folder (.spotbench) of this test
    out = _run("status", str(long_spec))
    _fits(out.split("schedule:", 1)[0], 80)
    for g in load_spec(long_spec).plan():
        assert re.search(rf"│ {re.escape(g.id)} +│", out), (g.id, out)


def test_fit_table_drops_highest_first_and_wraps_the_rest():
    cols = [Column("id", key=True), Column("note"), Column("a", drop=1), Column("b", drop=2)]
    rows = [["x" * 30, "words " * 20, "1" * 10, "2" * 10]]
    table, dropped = fit_table("t", cols, rows, width=60)
    assert dropped == ["b"] and [c.header for c in table.columns] == ["id", "note", "a"]
    table, dropped = fit_table("t", cols, rows, width=45)
    assert sorted(dropped) == ["a", "b"]
