"""A trial's files: what a workload writes to $SPOTBENCH_ARTIFACTS_DIR is stored beside its
attempt (size-capped, priced per month kept), its intermediate values are readable while it
runs, and `spotbench artifacts SPEC --best` downloads the best trial's files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.costs import load_catalog, storage_month
from spotbench.member import MemberContext, Peer
from spotbench.results import ARTIFACTS_ENV, ResultStore, select_artifacts
from workloads.common import WorkloadRun


def _run(store: ResultStore, group: str = "g", params: dict | None = None, trial: int = 1) -> WorkloadRun:
    peers = [Peer(name="m0", role="worker", index=0, rank=0, host="127.0.0.1", port=1)]
    ctx = MemberContext(sweep="s", group=group, trial=trial, cloud="local", workload="container",
                        params=params or {}, name="m0", role="worker", index=0, rank=0,
                        members=peers, results_url=store.url, machine_type="local")
    return WorkloadRun(ctx, store)


@pytest.fixture
def store(tmp_path) -> ResultStore:
    s = ResultStore("file://" + str(tmp_path / "results"))
    s.open_run()
    return s


def test_search_artifacts_are_stored_beside_the_attempt_and_counted(store, tmp_path, monkeypatch):
    folder = tmp_path / "art"
    monkeypatch.setenv(ARTIFACTS_ENV, str(folder))
    run = _run(store)
    assert run.artifacts_dir == str(folder) and os.environ[ARTIFACTS_ENV] == str(folder)
    (folder / "sub").mkdir(parents=True)
    (folder / "weights.bin").write_bytes(b"\x00\x01" * 500)
    (folder / "sub" / "notes.txt").write_text("best so far")
    run.record("val_accuracy", 0.9, "fraction")
    run.finish()
    files = store.artifacts(run.run_id, "g", 1)
    assert files == {"sub/notes.txt": 11, "weights.bin": 1000}
    [record] = store.read(run.run_id)
    assert record.metadata["artifacts_bytes"] == 1011
    assert record.metadata["storage_usd_month"] == 0.0  # the local cloud prices at 0
    out = tmp_path / "down"
    got = store.download_artifacts(run.run_id, "g", 1, out)
    assert sorted(p.relative_to(out).as_posix() for p in got) == ["sub/notes.txt", "weights.bin"]
    assert (out / "weights.bin").read_bytes() == b"\x00\x01" * 500


def test_search_artifacts_cost_a_month_of_the_buckets_storage_price():
    catalog = load_catalog()
    assert storage_month(catalog, "gcp", "us-central1", 5 * 10**9) == pytest.approx(0.10)
    assert storage_month(catalog, "aws", "us-east-1", 10**9) == pytest.approx(0.023)


def test_search_artifacts_over_the_cap_are_left_out_and_the_note_names_the_cap(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"a" * 600)
    (tmp_path / "b.bin").write_bytes(b"b" * 600)
    (tmp_path / "c.txt").write_bytes(b"c" * 10)
    picked = select_artifacts(tmp_path, cap_bytes=1000)
    assert [rel for rel, _, _ in picked.files] == ["a.bin", "c.txt"]
    assert picked.total_bytes == 610
    note = picked.note()
    assert "b.bin (600 bytes) would pass the cap of 1000 bytes per attempt" in note
    assert "MAX_ARTIFACT_BYTES" in note


def test_search_artifacts_a_symlink_out_of_the_folder_is_not_stored(store, tmp_path, monkeypatch):
    """Attack: a workload links a host file (another group's checkpoint, a key) into its
    artifacts folder to have it uploaded as its own: the link is skipped, with a note."""
    secret = tmp_path / "host-secret"
    secret.write_text("TOKEN=do-not-upload")
    folder = tmp_path / "art"
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"m")
    (folder / "stolen").symlink_to(secret)
    (folder / "dir-link").symlink_to(tmp_path)
    monkeypatch.setenv(ARTIFACTS_ENV, str(folder))
    run = _run(store)
    run.record("x", 1.0, "u")
    run.finish()
    assert store.artifacts(run.run_id, "g", 1) == {"model.bin": 1}
    stored = b"".join(p.read_bytes() for p in (tmp_path / "results").rglob("*") if p.is_file())
    assert b"do-not-upload" not in stored
    [record] = store.read(run.run_id)
    assert "stolen is not a regular file" in record.metadata["artifacts_note"]


def test_search_artifacts_download_never_leaves_the_output_folder(tmp_path):
    """Attack: an object named `…/artifacts/../../../../escape` (object stores keep `..` in
    a key; written straight to the bucket) must not make the download write outside --out."""
    store = ResultStore("memory://searchux-traversal")
    run = store.open_run().run
    folder = store.path("runs", run, "g.1", "artifacts")
    store.fs.pipe_file(f"{folder}/ok.bin", b"ok")
    store.fs.pipe_file(f"{folder}/../../../../../escape", b"x")
    out = tmp_path / "a" / "b" / "out"
    written = store.download_artifacts(run, "g", 1, out)
    assert [p.name for p in written] == ["ok.bin"]
    assert not any(p.name == "escape" for p in tmp_path.rglob("*"))
    assert any("leaves the output folder" in s for s in store.skipped)


def test_search_intermediate_values_are_read_while_running_and_foreign_ones_rejected(store):
    run = _run(store)
    run.intermediate("val_accuracy", 0.5, "fraction", step=10, epoch=1)
    run.intermediate("val_accuracy", 0.7, "fraction", step=20, epoch=2)
    seen = store.intermediate(run.run_id, "g")
    assert [(r.value, r.metadata["epoch"], r.metadata["step"]) for r in seen] == [(0.5, 1, 10), (0.7, 2, 20)]
    assert store.next_attempt(run.run_id, "g") == 1
    # forged: group h writes records claiming group g into its own prefix, and into g's
    forged = seen[0].model_copy(update={"group": "h"})
    store.write_intermediate(run.run_id, "g", 1, [*seen, forged])
    assert [r.group for r in store.intermediate(run.run_id, "g")] == ["g", "g"]
    assert any("claims group 'h'" in s for s in store.skipped)
    run.record("val_accuracy", 0.7, "fraction")
    run.finish()  # the attempt file is 1; its intermediate values stay readable
    assert len(store.intermediate(run.run_id, "g", attempt=1)) == 2
    assert store.intermediate(run.run_id, "g", attempt=2) == []
    assert not any(r.metadata.get("intermediate") for r in store.read(run.run_id))


def _trial(store: ResultStore, tmp_path: Path, monkeypatch, group: str, trial: int, filters: int,
           val: float, weights: bytes) -> None:
    folder = tmp_path / f"art-{group}"
    folder.mkdir()
    (folder / "weights.npz").write_bytes(weights)
    monkeypatch.setenv(ARTIFACTS_ENV, str(folder))
    run = _run(store, group, params={"name": "container", "filters": filters}, trial=trial)
    run.record("val_accuracy", val, "fraction")
    run.record("test_accuracy", val - 0.05, "fraction")
    run.finish()


def test_search_artifacts_best_downloads_the_best_trials_weights(store, tmp_path, monkeypatch):
    for i, (filters, val) in enumerate([(16, 0.81), (64, 0.93), (128, 0.88)]):
        _trial(store, tmp_path, monkeypatch, f"s-t{i}", i, filters, val, f"weights of {filters}".encode())
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "s", "cloud": "local", "results": store.url,
                                    "workload": {"name": "container", "command": ["true"]}}))
    runner = CliRunner()
    out = tmp_path / "best"
    res = runner.invoke(app, ["artifacts", str(spec), "--best", "--metric", "val_accuracy", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert (out / "weights.npz").read_bytes() == b"weights of 64"
    assert "trial 1 (group s-t1" in res.output and "val_accuracy = 0.93" in res.output
    # lowest is best: the 16-filter trial
    low = tmp_path / "low"
    res = runner.invoke(app, ["artifacts", str(spec), "--best", "--metric", "val_accuracy",
                              "--direction", "min", "--out", str(low)])
    assert res.exit_code == 0 and (low / "weights.npz").read_bytes() == b"weights of 16"
    # a named trial
    res = runner.invoke(app, ["artifacts", str(spec), "--trial", "2", "--out", str(tmp_path / "t2")])
    assert res.exit_code == 0 and (tmp_path / "t2" / "weights.npz").read_bytes() == b"weights of 128"
    # no objective anywhere: the error says which option to give, no traceback
    res = runner.invoke(app, ["artifacts", str(spec), "--best", "--out", str(tmp_path / "x")])
    assert res.exit_code == 1 and "--metric" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["artifacts", str(spec), "--best", "--metric", "val_acc", "--out", str(tmp_path / "y")])
    assert res.exit_code == 1 and "val_accuracy" in res.output  # names the metrics there are
    res = runner.invoke(app, ["artifacts", str(spec), "--best", "--metric", "val_accuracy",
                              "--direction", "up", "--out", str(tmp_path / "z")])
    assert res.exit_code == 2 and "max, min" in res.output


def test_search_artifacts_best_follows_the_specs_search_objective(store, tmp_path, monkeypatch):
    """After the search core merges, the spec's `search.objective` ranks (read with getattr)."""
    from spotbench.ops.artifacts import download, objective_for

    for i, (filters, val) in enumerate([(16, 0.81), (64, 0.93)]):
        _trial(store, tmp_path, monkeypatch, f"s-t{i}", i, filters, val, f"w{filters}".encode())

    class Search:
        objective = {"metric": "val_accuracy", "direction": "minimize"}

    class Spec:
        search = Search()

    objective = objective_for(Spec(), None, None)
    got = download(store, tmp_path / "o", objective=objective)
    assert got.trial.params["filters"] == 16 and (tmp_path / "o" / "weights.npz").read_bytes() == b"w16"
    assert got.trial.number == 0
    assert objective_for(object(), None, None) is None  # a spec without a search


def test_search_artifacts_of_a_trial_cut_short_are_not_the_best(store, tmp_path, monkeypatch):
    _trial(store, tmp_path, monkeypatch, "s-t0", 0, 16, 0.80, b"complete")
    folder = tmp_path / "art-cut"
    folder.mkdir()
    (folder / "weights.npz").write_bytes(b"cut short")
    monkeypatch.setenv(ARTIFACTS_ENV, str(folder))
    run = _run(store, "s-t1", params={"name": "container", "filters": 64}, trial=1)
    run.record("val_accuracy", 0.99, "fraction")
    run.finish(preempted=True)
    from spotbench.ops.artifacts import download
    from spotbench.report.trials import Objective

    got = download(store, tmp_path / "o", objective=Objective("val_accuracy"))
    assert got.group == "s-t0" and (tmp_path / "o" / "weights.npz").read_bytes() == b"complete"
