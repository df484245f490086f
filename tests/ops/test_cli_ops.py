"""The operations commands end to end on a local sweep: status (JSON), schedule pause/resume
via the CLI, teardown dry run then --yes, and exec over a real sshd with --host overrides."""

from __future__ import annotations

import getpass
import json
import sys
from datetime import UTC, datetime

import pytest
import yaml
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.clouds import State
from spotbench.clouds.local.cloud import LocalCloud, LocalInstanceSpec
from spotbench.clouds.local.state import LocalState
from spotbench.results import Result, ResultStore
from spotbench.spec import load_spec
from tests.ops._sshd import Sshd, known_hosts_line
from tests.ops.conftest import free_port

SLEEP = [sys.executable, "-c", "import time; time.sleep(300)"]


@pytest.fixture
def sweep(tmp_path, monkeypatch):
    monkeypatch.setenv("SPOTBENCH_STATE_ROOT", str(tmp_path / "state"))
    monkeypatch.setenv("SPOTBENCH_GRACE_S", "2")
    spec_file = tmp_path / "osu.yaml"
    spec_file.write_text(yaml.safe_dump({
        "name": "osu", "cloud": "local", "workload": {"name": "osu"}, "trials": 2,
        "schedule": {"cron": "0 3 * * *"}, "deadline": "10m", "results": str(tmp_path / "results"),
    }))
    spec = load_spec(spec_file)
    state = LocalState("osu", root=tmp_path / "state")
    cloud = LocalCloud(state.db_path, grace_s=2, log_dir=state.dir / "logs")
    first = spec.plan()[0]
    cloud.deploy([LocalInstanceSpec(m.name, first.member_labels(m), SLEEP) for m in first.members])
    cloud.start(first.labels)
    cloud.wait(first.labels, {State.RUNNING}, timeout=60)
    yield spec_file, spec, cloud
    cloud.terminate({})


def _cli(*args: str):
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result


def test_status_json_shows_groups_results_and_schedule(sweep):
    spec_file, spec, _ = sweep
    store = ResultStore(spec.results_url())
    run = store.open_run().run
    g = spec.plan()[1].id
    now = datetime.now(UTC)
    store.write_group(run, g, [Result(sweep="osu", run=run, group=g, trial=2, workload="osu",
                                      metric="latency_0B", value=1.5, unit="us", cloud="local",
                                      machine_type="local", started_at=now, ended_at=now)])
    out = _cli("status", str(spec_file), "--json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    groups = {grp["id"]: grp for grp in data["groups"]}
    first, second = spec.plan()[0].id, spec.plan()[1].id
    assert groups[first]["state"] == "RUNNING"
    assert [m["state"] for m in groups[first]["members"]] == ["RUNNING", "RUNNING"]
    assert groups[second]["state"] == "MISSING"
    assert groups[second]["last_result"] == "latency_0B=1.5 µs"  # one unit in every command (#39)
    assert data["schedule"]["paused"] is False and data["schedule"]["next_start"].endswith("03:00:00+00:00")

    assert _cli("schedule", "pause", str(spec_file)).exit_code == 0
    assert json.loads(_cli("status", str(spec_file), "--json").output)["schedule"]["paused"] is True
    assert _cli("schedule", "resume", str(spec_file)).exit_code == 0
    assert json.loads(_cli("status", str(spec_file), "--json").output)["schedule"]["paused"] is False
    table = _cli("status", str(spec_file))
    assert "RUNNING" in table.output and "schedule:" in table.output and "spend:" in table.output


def test_schedule_run_now_without_server_explains(sweep):
    out = CliRunner().invoke(app, ["schedule", "run-now", str(sweep[0])])
    assert out.exit_code == 1 and "--on-schedule" in out.output


def test_teardown_dry_run_then_yes(sweep):
    spec_file, spec, cloud = sweep
    dry = _cli("teardown", str(spec_file))
    assert dry.exit_code == 0 and "would delete" in dry.output and "dry run: 2" in dry.output
    assert all(i.state == State.RUNNING for i in cloud.query({}))
    done = _cli("teardown", str(spec_file), "--yes")
    assert done.exit_code == 0, done.output
    assert "removed 2 resource(s), none left behind" in done.output
    assert cloud.query({}) == []


def test_exec_over_sshd_with_host_overrides(sweep, tmp_path):
    spec_file, spec, _ = sweep
    server = Sshd(tmp_path / "sshd", free_port()).start()
    try:
        kh = tmp_path / "known_hosts"
        kh.write_text(known_hosts_line(server.port, server.dir / "host_key.pub"))
        g = spec.plan()[0]
        dead = free_port()
        out = CliRunner().invoke(app, [
            "exec", "--spec", str(spec_file), "--known-hosts", str(kh), "--user", getpass.getuser(),
            "--key", str(server.user_key), "--host", f"{g.members[0].name}=127.0.0.1:{server.port}",
            "--host", f"{g.members[1].name}=127.0.0.1:{dead}", g.id, "--", "echo", "hi there",
        ])
        assert f"{g.members[0].name}: hi there" in out.output
        assert g.members[1].name in out.output and out.exit_code == 1  # unreachable, reported
    finally:
        server.stop()


def test_scripts_teardown_twin_runs_as_a_program(sweep, tmp_path):
    import os
    import subprocess
    from pathlib import Path

    spec_file, _, cloud = sweep
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "scripts" / "teardown.py"), str(spec_file), "--yes"],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "removed 2 resource(s), none left behind" in out.stdout
    assert cloud.query({}) == []


def test_status_of_an_aws_spec_without_results_says_what_to_pass(tmp_path, monkeypatch):
    """An aws bucket's name is chosen at deploy: status must not read a local folder instead."""
    monkeypatch.delenv("SPOTBENCH_RESULTS_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    spec_file = tmp_path / "ax.yaml"
    spec_file.write_text(yaml.safe_dump({
        "name": "ax", "cloud": "aws", "region": "eu-west-1", "zone": "eu-west-1a",
        "workload": {"name": "osu"}, "matrix": {"machine_type": ["c5n.large"]}}))
    out = CliRunner().invoke(app, ["status", str(spec_file), "--json"])
    assert out.exit_code == 2, out.output
    assert "--results s3://BUCKET/ax" in out.output and "pulumi stack output bucket_url" in out.output
    assert not (tmp_path / "results").exists()


def test_first_hour_status_last_result_is_the_key_number(sweep):
    """`status` shows the number the report ranks by (OSU latency at 8 B, in µs), not the
    first record of the attempt (the 0-byte latency) (#39)."""
    spec_file, spec, _ = sweep
    store = ResultStore(spec.results_url())
    run = store.open_run().run
    g = spec.plan()[1].id
    now = datetime.now(UTC)
    store.write_group(run, g, [
        Result(sweep="osu", run=run, group=g, trial=2, workload="osu", metric="latency", value=v,
               unit="us", cloud="local", machine_type="local", started_at=now, ended_at=now,
               metadata={"size_bytes": size})
        for size, v in ((0, 1.5), (8, 2.25), (1 << 20, 25_000.0))])
    data = json.loads(_cli("status", str(spec_file), "--json").output)
    groups = {grp["id"]: grp for grp in data["groups"]}
    assert groups[g]["last_result"] == "OSU latency @ 8 B = 2.25 µs"
