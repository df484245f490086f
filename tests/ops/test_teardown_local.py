"""Teardown on the local cloud: real processes are killed, rows cleaned, orphans the plan
no longer knows are found, dry run deletes nothing, other sweeps and results untouched."""

from __future__ import annotations

import sqlite3
import sys

import psutil

from spotbench.clouds import State
from spotbench.clouds.local.cloud import LocalCloud, LocalInstanceSpec
from spotbench.clouds.local.state import LocalState
from spotbench.clouds.local.orphans import LocalSweeper
from spotbench.ops.teardown import teardown
from spotbench.results import ResultStore

SLEEP = [sys.executable, "-c", "import time; time.sleep(300)"]


def _deploy(root, sweep: str, groups: list[str]) -> LocalCloud:
    state = LocalState(sweep, root=root)
    cloud = LocalCloud(state.db_path, grace_s=2, log_dir=state.dir / "logs")
    specs = [
        LocalInstanceSpec(f"{g}-m{i}", {"managed-by": "spotbench", "spotbench-sweep": sweep,
                                        "spotbench-group": g}, SLEEP)
        for g in groups for i in range(2)
    ]
    cloud.deploy(specs)
    for g in groups:
        cloud.start({"spotbench-group": g})
    cloud.wait({}, {State.RUNNING}, timeout=60)
    return cloud


def _pids(cloud: LocalCloud) -> list[int]:
    with sqlite3.connect(cloud.db_path) as conn:
        return [pid for (pid,) in conn.execute("SELECT pid FROM instances") if pid]


def _rows(cloud: LocalCloud) -> int:
    with sqlite3.connect(cloud.db_path) as conn:
        return conn.execute("SELECT count(*) FROM instances").fetchone()[0]


def test_teardown_kills_processes_and_cleans_rows(tmp_path):
    root = tmp_path / "state"
    ours = _deploy(root, "osu", ["osu-a-t1", "osu-orphan-t1"])  # the orphan is in no plan
    theirs = _deploy(root, "other", ["other-a-t1"])
    pids = _pids(ours)
    assert len(pids) == 4 and all(psutil.pid_exists(p) for p in pids)
    store = ResultStore(f"file://{tmp_path}/results")
    raw = store.write_raw("r1", "osu-a-t1", "out.txt", "keep me", attempt=1)
    sweeper = LocalSweeper(root, grace_s=2)
    lines: list[str] = []
    try:
        dry = teardown("osu", sweeper, yes=False, echo=lines.append)
        assert sorted(r.id for r in dry.found) == [
            "osu-a-t1-m0", "osu-a-t1-m1", "osu-orphan-t1-m0", "osu-orphan-t1-m1"]
        assert all(psutil.pid_exists(p) for p in pids) and _rows(ours) == 4  # nothing touched

        done = teardown("osu", sweeper, yes=True, echo=lines.append)
        assert not done.failed, done.failed
        assert len(done.removed) == 4
        assert done.summary() == "removed 4 resource(s), none left behind"
        assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids)
        assert _rows(ours) == 0
        assert [i.state for i in theirs.query({})] == [State.RUNNING, State.RUNNING]
        assert store.fs.cat_file(raw) == b"keep me"
        assert teardown("osu", sweeper, yes=True, echo=lines.append).found == []
    finally:
        theirs.terminate({})
        ours.terminate({})


def test_all_sweeps_lists_every_local_sweep(tmp_path):
    root = tmp_path / "state"
    clouds = [_deploy(root, "one", ["one-g"]), _deploy(root, "two", ["two-g"])]
    try:
        report = teardown(None, LocalSweeper(root, grace_s=2), yes=False, echo=lambda _: None)
        assert {r.sweep for r in report.found} == {"one", "two"}
        assert len(report.found) == 4
    finally:
        for cloud in clouds:
            cloud.terminate({})
