"""`spotbench query` and `spotbench compact` over generated stores (local and fsspec)."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import fsspec

from spotbench.history.catalog import Catalog
from spotbench.history.synthetic import SyntheticSweep
from spotbench.results import Result, ResultStore
from tests.history.conftest import cli_json, run_cli, spec_for

PER_RUN = "SELECT run, count(*) AS n, sum(value) AS total FROM records GROUP BY run ORDER BY run"


def expected_per_run(root: Path) -> dict[str, tuple[int, float]]:
    """What the files hold, read without DuckDB."""
    out: dict[str, tuple[int, float]] = {}
    for path in root.glob("runs/*/*.jsonl"):
        for line in path.read_text().splitlines():
            r = Result.model_validate_json(line)
            n, total = out.get(r.run, (0, 0.0))
            out[r.run] = (n + 1, total + r.value)
    return out


def test_query_answers_over_every_run_as_json_and_csv(tmp_path: Path) -> None:
    root = tmp_path / "results"
    runs = SyntheticSweep(runs=30, groups=4, preempted_every=7).write(root)
    spec = spec_for(tmp_path, root)
    want = expected_per_run(root)
    rows = cli_json("query", str(spec), PER_RUN)
    assert [r["run"] for r in rows] == runs
    for r in rows:
        assert (r["n"], round(r["total"], 6)) == (want[r["run"]][0], round(want[r["run"]][1], 6))
    text = run_cli("query", str(spec), PER_RUN, "--csv")
    table = list(csv.DictReader(io.StringIO(text)))
    assert [t["run"] for t in table] == runs and int(table[0]["n"]) == want[runs[0]][0]
    # attempts: one row per stored file, preempted ones flagged; runs: the ledger
    att = cli_json("query", str(spec), "SELECT count(*) AS n, count(*) FILTER (WHERE preempted) AS p, "
                   "min(attempt) AS a1, max(attempt) AS a2 FROM attempts")[0]
    files = list(root.glob("runs/*/*.jsonl"))
    assert att["n"] == len(files) and att["p"] == sum(f.name.endswith(".2.jsonl") for f in files) > 0
    assert (att["a1"], att["a2"]) == (1, 2)
    ledger = cli_json("query", str(spec), "SELECT count(*) AS n, min(opened_at) AS first FROM runs")[0]
    assert ledger == {"n": 30, "first": "2026-01-01 03:00:00"}
    # metadata is JSON: users cut by message size
    sized = cli_json("query", str(spec), "SELECT count(*) AS n FROM records WHERE metadata->>'size_bytes' = '8'")
    assert sized[0]["n"] == sum(1 for f in files for line in f.read_text().splitlines()
                                if json.loads(line)["metadata"]["size_bytes"] == 8)


def test_bad_sql_exits_2_with_duckdbs_words(tmp_path: Path) -> None:
    root = tmp_path / "results"
    SyntheticSweep(runs=2, groups=1).write(root)
    out = run_cli("query", str(spec_for(tmp_path, root)), "SELECT nonsense FROM records", code=2)
    assert "query failed" in out and "nonsense" in out
    out = run_cli("query", str(spec_for(tmp_path, root)), "SELECT 1", "--json", "--csv", code=2)
    assert "--json" in out and "--csv" in out


def test_compaction_keeps_answers_and_sees_late_attempts(tmp_path: Path) -> None:
    root = tmp_path / "results"
    runs = SyntheticSweep(runs=6, groups=3, preempted_every=4).write(root)
    spec = spec_for(tmp_path, root)
    before = cli_json("query", str(spec), PER_RUN)
    out = run_cli("compact", str(spec))
    assert "6 compacted now" in out
    assert sorted(p.parent.name for p in root.glob("runs/*/records.parquet")) == runs
    assert len(list(root.glob("runs/*/*.jsonl"))) == 6 * 3 + sum(1 for _ in root.glob("runs/*/*.2.jsonl"))
    assert cli_json("query", str(spec), PER_RUN) == before
    with Catalog(f"file://{root}") as cat:  # read from the Parquet files now
        paths = {p for (p,) in cat.query("SELECT DISTINCT path FROM records").rows}
        assert cat.compacted_runs() == set(runs)
    assert len(paths) == len(list(root.glob("runs/*/*.jsonl")))
    moved = tmp_path / "moved"  # paths are relative to the store: a copied store reads the same
    shutil.copytree(root, moved)
    assert cli_json("query", str(spec), PER_RUN, "--results", str(moved)) == before
    # an attempt stored after compaction is not lost
    late = Result.model_validate_json((root / "runs" / runs[0] / "g000-t1.1.jsonl").read_text().splitlines()[0])
    ResultStore(f"file://{root}").write_group(runs[0], "g000-t1", [late.model_copy(update={"value": 1000.0})])
    after = {r["run"]: r for r in cli_json("query", str(spec), PER_RUN)}
    assert after[runs[0]]["n"] == before[0]["n"] + 1
    assert round(after[runs[0]]["total"] - before[0]["total"], 6) == 1000.0
    assert "0 compacted now, 6 before" in run_cli("compact", str(spec))


def test_catalogue_reads_through_fsspec(tmp_path: Path) -> None:
    """gs:// and s3:// go through fsspec, as memory:// does here: same rows as on disk."""
    root = tmp_path / "results"
    SyntheticSweep(runs=3, groups=2, preempted_every=3).write(root)
    mem = fsspec.filesystem("memory")
    for path in root.rglob("*"):
        if path.is_file():
            mem.pipe_file(f"/hist/{path.relative_to(root)}", path.read_bytes())
    with Catalog(f"file://{root}") as disk, Catalog("memory://hist") as remote:
        assert disk.query(PER_RUN).rows == remote.query(PER_RUN).rows
        remote.compact(remote.query("SELECT min(run) FROM runs").rows[0][0])
    with Catalog("memory://hist") as remote:
        assert len(remote.compacted_runs()) == 1
        with Catalog(f"file://{root}") as disk:
            assert disk.query(PER_RUN).rows == remote.query(PER_RUN).rows
    mem.rm("/hist", recursive=True)


def test_empty_store_has_the_tables(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, tmp_path / "nothing")
    assert cli_json("query", str(spec), "SELECT count(*) AS n FROM records") == [{"n": 0}]
    assert cli_json("query", str(spec), "SELECT count(*) AS n FROM runs") == [{"n": 0}]


def test_records_that_disagree_with_their_path_are_rejected(tmp_path: Path) -> None:
    """As ResultStore.read: a group may write only under its own name (bucket IAM on the path)."""
    root = tmp_path / "results"
    runs = SyntheticSweep(runs=2, groups=2).write(root)
    honest = (root / "runs" / runs[1] / "g001-t1.1.jsonl").read_text()
    forged = honest.replace('"g001-t1"', '"g000-t1"')
    assert forged != honest
    (root / "runs" / runs[1] / "g001-t1.2.jsonl").write_text(forged)  # g001 claims g000's result
    spec = spec_for(tmp_path, root)
    rows = cli_json("query", str(spec), "SELECT path, count(*) AS n FROM records WHERE run = '"
                    + runs[1] + "' GROUP BY path ORDER BY path")
    assert [r["path"] for r in rows] == [f"runs/{runs[1]}/g000-t1.1.jsonl", f"runs/{runs[1]}/g001-t1.1.jsonl"]
