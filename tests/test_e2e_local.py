"""End to end on the local cloud: `spotbench run` with real mpiexec, results, report."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from spotbench.clouds.base import State
from spotbench.clouds.local.cloud import LocalCloud
from spotbench.auth.local import scheduler_token
from spotbench.localrun.scheduler import post
from spotbench.clouds.local.state import LocalState
from spotbench.results import ResultStore

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


def write_spec(tmp_path: Path, name: str, trials: int, **workload) -> Path:
    spec = {
        "name": name, "cloud": "local", "trials": trials, "deadline": "3m",
        "results": str(tmp_path / "results"),
        "workload": {"name": "osu", "max_size": 65536, "iterations": 200, "iterations_large": 50,
                     "warmup": 10, "warmup_large": 2, "bw_iterations": 5, "bw_iterations_large": 3,
                     "bw_warmup": 1, "bw_warmup_large": 1, **workload},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def cli(tmp_path: Path, *args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "SPOTBENCH_STATE_ROOT": str(tmp_path / "state"),
           "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "SPOTBENCH_GRACE_S": "5"}
    kw = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, **kw}
    return subprocess.Popen([str(BIN / "spotbench"), *args], env=env, cwd=tmp_path, text=True, **kw)


def test_run_two_member_osu_sweep_and_report(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "e2e", trials=2)
    proc = cli(tmp_path, "run", str(spec), "--report-dir", str(tmp_path / "report"))
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out
    assert "report:" in out

    records = ResultStore(f"file://{tmp_path}/results").read()
    df = pd.DataFrame([{**r.model_dump(), "size": r.metadata["size_bytes"]} for r in records])
    assert set(df["metric"]) == {"latency", "bibw"}
    assert not df["preempted"].any() and (df["value"] > 0).all()
    lat = df[df.metric == "latency"]
    assert sorted(lat["size"].unique()) == [0] + [2**i for i in range(17)]
    assert sorted(df[df.metric == "bibw"]["size"].unique()) == [2**i for i in range(17)]
    assert sorted(df["trial"].unique()) == [1, 2]
    assert df.groupby(["metric", "size", "trial"]).size().max() == 1

    # the report's averages are the mean of the two trials, per size
    summary = pd.read_csv(tmp_path / "report" / "summary.csv")
    expected = lat.groupby("size")["value"].mean()
    rows = summary[(summary["table"] == "osu_latency") & (summary["column"] == "average")]
    report_lat = rows.set_index("size_bytes")["value"]
    for size, mean in expected.items():
        assert report_lat.loc[size] == pytest.approx(mean, rel=1e-3)
    assert (tmp_path / "report" / "osu_latency.png").stat().st_size > 1000
    assert (tmp_path / "report" / "osu_bibw.png").stat().st_size > 1000

    # nothing is left running
    cloud = LocalCloud(tmp_path / "state" / "e2e" / "cloud.db")
    assert {i.state for i in cloud.query({"spotbench-sweep": "e2e"})} == {State.STOPPED}


def test_a_member_killed_mid_run_is_recorded_as_preempted(tmp_path: Path) -> None:
    # a million ping-pongs at 0 B: the peer is surely stopped while latency is measured
    spec = write_spec(tmp_path, "kill", trials=1, iterations=1_000_000, max_size=1)
    proc = cli(tmp_path, "run", str(spec), "--no-report")
    store = ResultStore(f"file://{tmp_path}/results")
    try:
        cloud = LocalCloud(tmp_path / "state" / "kill" / "cloud.db")
        wait_for(lambda: (tmp_path / "state" / "kill" / "cloud.db").exists() and any(
            p.state == State.RUNNING
            for p in cloud.query({"spotbench-sweep": "kill", "spotbench-role": "peer"})))
        wait_for(lambda: _osu_ranks(tmp_path) >= 2)  # mid-run: mpiexec's two ranks measure
        cloud.stop({"spotbench-sweep": "kill", "spotbench-role": "peer"})  # the peer's VM goes
        wait_for(lambda: any(r.preempted for r in store.read()))
        # the group is pending again and restarts; the deadline tick ends the run
        state = LocalState("kill", tmp_path / "state")
        post(state.functions["url"] + "/stop", scheduler_token(state.secret(), state.functions["session"]), {"reason": "deadline"})
        out, _ = proc.communicate(timeout=120)  # the run ends, it does not hang
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, out  # the group ended incomplete: the run says so
    records = store.read()
    first = [r for r in records if r.preempted]
    assert first and {r.group for r in first} == {r.group for r in records}
    assert not any(r.value > 0 and not r.preempted and r.metric == "latency" for r in records)
    assert {i.state for i in cloud.query({"spotbench-sweep": "kill"})} == {State.STOPPED}
    # spot-market statistics (spotbench market, estimate) from this run's own history
    from spotbench.history.catalog import Catalog
    from spotbench.history.market import market

    with Catalog(f"file://{tmp_path}/results") as cat:
        (row,) = market(cat)
    attempts = {(r.group, r.started_at, r.ended_at, r.preempted, r.metadata["members"]) for r in records}
    vm_hours = sum((e - s).total_seconds() * m for _, s, e, _, m in attempts) / 3600
    assert (row["zone"], row["machine_type"], row["accelerator"]) == ("local", "local", None)
    assert row["preempted"] == sum(p for *_, p, _ in attempts) >= 1
    assert row["preemptions_per_vm_hour"] == pytest.approx(row["preempted"] / vm_hours)
    assert row["starts"] >= len(attempts) and row["failed_starts_per_start"] == 0


def _osu_ranks(root: Path) -> int:
    """OSU harness ranks of the sweep under `root` running now (spotbench's C or mpi4py
    harness: `… latency … --large-size`; a local VM's processes carry its instance table's
    path in SPOTBENCH_LOCAL_DB): another test's sweep running beside this one is not counted."""
    import psutil

    from spotbench.clouds.local.db import DB_ENV

    count = 0
    for proc in psutil.process_iter(["cmdline"]):
        line = proc.info["cmdline"] or []
        if "latency" in line and "--large-size" in line:
            try:
                count += proc.environ().get(DB_ENV, "").startswith(str(root))
            except psutil.Error:
                continue
    return count


def wait_for(condition, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.3)
    pytest.fail(f"timed out after {timeout}s waiting for {condition}")


def test_tf_parameter_server_sweep_under_the_local_cloud(tmp_path: Path) -> None:
    """chief + ps + worker as three local instances; done stops the ps, which never exits."""
    spec = tmp_path / "tf.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "tfe2e", "trials": 1, "deadline": "4m", "results": str(tmp_path / "results"),
        "workload": {"name": "tf-mnist", "strategy": "parameter_server", "dataset": "synthetic",
                     "steps": 20, "warmup_steps": 5, "batch_size": 16},
    }))
    proc = cli(tmp_path, "run", str(spec), "--report-dir", str(tmp_path / "report"))
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    values = {r.metric: r for r in ResultStore(f"file://{tmp_path}/results").read()}
    assert values["steps"].value == 20 and values["steps_per_s"].value > 0
    assert 0 <= values["test_accuracy"].value <= 1
    assert not any(r.preempted for r in values.values())
    cloud = LocalCloud(tmp_path / "state" / "tfe2e" / "cloud.db")
    roles = {i.labels["spotbench-role"]: i.state for i in cloud.query({"spotbench-sweep": "tfe2e"})}
    assert roles == {"chief": State.STOPPED, "ps": State.STOPPED, "worker": State.STOPPED}
    assert "speedup vs 1 worker" in (tmp_path / "report" / "report.md").read_text()
