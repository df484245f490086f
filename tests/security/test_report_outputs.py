"""Attacks on the report through values a VM (or a user's container) stored: every one is
data, never markup, a formula, a path or a type the report trusts (issue 24: 4, 7, 8)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.report import default_out_dir, write_report
from tests.report.conftest import rec, store  # noqa: F401 - the store fixture

pytestmark = pytest.mark.security

CONTAINER = {"name": "container", "command": ["bench"]}


def _container(**kw) -> dict:
    """A record as a VM writes it: JSON it chose, never checked by spotbench's model."""
    base = dict(workload="container", params=CONTAINER, metric="events_per_s", value=5.0,
                unit="ev/s", group="c-t1")
    hostile = {k: kw.pop(k) for k in ("metric", "unit", "metadata") if k in kw}
    return {**rec(**{**base, **kw}).model_dump(mode="json"), **hostile}


def _store(store, records, group="c-t1"):
    """Write the records' raw JSON lines where the group's identity may write them."""
    folder = f"{store.url.removeprefix('file://').rstrip('/')}/runs/r1"
    store.fs.makedirs(folder, exist_ok=True)
    store.fs.pipe_file(f"{folder}/{group}.1.jsonl",
                       "".join(json.dumps(r) + "\n" for r in records).encode())


def test_a_records_sweep_name_does_not_choose_where_the_report_is_written(store, tmp_path, monkeypatch):
    """`sweep` is an absolute path / `..`: the default output folder is named from the URL."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    victim = tmp_path / "victim"
    for i, sweep in enumerate((str(victim), "../../victim2")):
        _store(store, [_container(sweep=sweep, group=f"c-t{i}")], group=f"c-t{i}")
    out = default_out_dir(store.url)
    assert out == Path("reports") / "results", out
    result = CliRunner().invoke(app, ["report", store.url])
    assert result.exit_code == 0, result.output
    assert not victim.exists() and not (tmp_path / "victim2").exists()
    assert (work / "reports" / "results" / "report.md").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results", "work"]


def test_mathtext_in_a_unit_or_metric_does_not_crash_the_report(store, tmp_path):
    _store(store, [_container(unit=r"$\frac{$", metric=r"m$\sqrt{$")])
    paths = write_report(store.url, tmp_path / "out")
    assert paths.png, "the plot is drawn with the text as it is"


def test_a_300_character_metric_name_gets_a_bounded_file_name(store, tmp_path):
    """A 300-character name is refused by the store's bound (128) and reported; names at the
    bound still get distinct file names of at most 100 characters."""
    long_a, long_b = "a" * 128, "a" * 127 + "b"
    _store(store, [_container(metric=long_a), _container(metric=long_b), _container(metric="../../x"),
                   _container(metric="c" * 300)])
    paths = write_report(store.url, tmp_path / "out")
    assert "ignored 1 malformed" in paths.markdown.read_text().lower()
    assert len(paths.png) == 3 and len({p.name for p in paths.png}) == 3
    for png in paths.png:
        assert png.parent == tmp_path / "out" and len(png.name) <= 100, png


@pytest.mark.parametrize("meta", [{"member_types": 5}, {"member_types": [1, {"a": 2}]},
                                  {"placement": {"a": 1}}, {"placement": ["x"]},
                                  {"members": "x", "size_bytes": {"a": 1}}])
def test_a_wrongly_typed_metadata_value_is_skipped_and_reported(store, tmp_path, meta):
    _store(store, [_container(metadata=meta)])
    _store(store, [_container(value=6.0, group="c-t2", metadata={"placement": "spread"})], group="c-t2")
    prices = tmp_path / "prices.csv"  # re-pricing reads member_types too
    prices.write_text("cloud,region,kind,item,provisioning,unit,usd,bundled_gpu,date,source,note\n"
                      "local,local,machine,local,on-demand,hour,1.0,,2024-06-01,x,\n")
    for kw in ({}, {"prices": prices}):
        md = write_report(store.url, tmp_path / "out", **kw).markdown.read_text()
        assert "events" in md
        assert "ignored" in md.lower() and next(iter(meta)) in md


def test_markdown_injection_from_records_is_escaped(store, tmp_path):
    evil = "<script>alert(1)</script>"
    _store(store, [_container(metric=f"x{evil}\n# Injected heading\n[link](http://e)", unit="ms"),
                   _container(metric="- item", machine_type="<img src=x onerror=alert(1)>")])
    md = write_report(store.url, tmp_path / "out").markdown.read_text()
    assert "<script" not in md and "<img" not in md
    assert not re.search(r"^#+ Injected", md, re.M)
    assert "](http://e)" not in md.replace("\\]", "")
    assert not any(line.startswith("- item") for line in md.splitlines())
    # the text itself is still there, escaped
    assert "&lt;script&gt;" in md and "Injected heading" in md


def test_formula_cells_in_the_csvs_are_neutralised(store, tmp_path):
    formulas = ["=HYPERLINK(\"http://e\",\"x\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)",
                "\t=1", "\r=1"]
    for i, f in enumerate(formulas):
        _store(store, [_container(metric=f, unit=f, value=-1.5, machine_type=f, group=f"c-t{i + 1}")],
               group=f"c-t{i + 1}")
    paths = write_report(store.url, tmp_path / "out")
    for path in (paths.records_csv, paths.csv):
        with open(path, newline="") as fh:
            cells = [c for row in csv.reader(fh) for c in row]
        bad = [c for c in cells if c.startswith(("=", "+", "@", "\t", "\r"))
               or (c.startswith("-") and not _number(c))]
        assert not bad, (path.name, bad)
    with open(paths.records_csv, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["value"] for r in rows} == {"-1.5"}, "numbers stay numbers"
    assert {r["metric"] for r in rows} == {"'" + f for f in formulas}


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def test_report_out_does_not_follow_symlinks_planted_in_a_shared_folder(store, tmp_path):
    """Another user planted `report.md`, `records.csv` and a plot's name in the shared output
    folder as symlinks to the operator's files (issue 38): the report replaces the links,
    the operator's files stay as they were."""
    _store(store, [_container()])
    shared = tmp_path / "shared"
    shared.mkdir()
    first = write_report(store.url, tmp_path / "probe")  # the names a report writes
    victims = {}
    for name in ["report.md", "report.html", "records.csv", "summary.csv", *(p.name for p in first.png)]:
        victim = tmp_path / f"victim-{name}"
        victim.write_text("the operator's own file\n")
        (shared / name).symlink_to(victim)
        victims[name] = victim
    paths = write_report(store.url, shared)
    for name, victim in victims.items():
        assert victim.read_text() == "the operator's own file\n", name
        assert (shared / name).is_file() and not (shared / name).is_symlink(), name
    assert "events_per_s" in paths.markdown.read_text()
