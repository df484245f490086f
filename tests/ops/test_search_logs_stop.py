"""Per-run control of a search: `spotbench logs SPEC GROUP [--follow]` tails a running group
and `spotbench stop SPEC GROUP` stops one group as the user's decision (not preempted, not
retried). On the local cloud end to end; on GCP under FakeGce (serial port 1 through the
real compute client) and on AWS under moto_server (GetConsoleOutput through boto3)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import boto3
import pytest
import yaml

from spotbench import control
from spotbench.auth import Caller
from spotbench.clouds.aws.ec2 import AwsCloud
from spotbench.clouds.base import ConsoleOutput, Instance, State
from spotbench.clouds.gcp.gce import GcpCloud
from spotbench.clouds.local.cloud import LocalCloud
from spotbench.control.actions import USER_STOP
from spotbench.ops.logs import Follower, NoLogs, group_of, new_text, tail
from spotbench.results import ResultStore
from spotbench.spec import load_spec
from tests.clouds.fake_gce import FakeGce
from tests.moto_server import MotoServer
from tests.test_e2e_local import cli

ZONE = "us-central1-a"
OPERATOR = Caller("operator", "alice")
TICK = Caller("scheduler", "scheduler")


# ---- the window of a cloud without offsets (EC2) ------------------------------------------
def test_search_logs_window_prints_only_what_is_new():
    assert new_text("", "a\nb\n") == ("a\nb\n", False)
    assert new_text("a\nb\n", "a\nb\nc\n") == ("c\n", False)
    assert new_text("a\nb\nc\n", "a\nb\nc\n") == ("", False)
    # the window slid: its start dropped, the last text seen is still inside
    assert new_text("x" * 3000 + "tail-1\n", "x" * 2000 + "tail-1\nnew\n") == ("new\n", False)
    # the last text seen fell out of the window: everything, and say output may be missing
    assert new_text("old-1\nold-2\n", "brand new\n") == ("brand new\n", True)
    seen = "".join(f"line {i}\n" for i in range(100))
    later = "".join(f"line {i}\n" for i in range(40, 130))  # 40 lines dropped, 30 new
    assert new_text(seen, later) == ("".join(f"line {i}\n" for i in range(100, 130)), False)


# ---- GCP under FakeGce ----------------------------------------------------------------------
def _gcp_spec():
    return load_spec({"name": "lg", "cloud": "gcp", "zone": ZONE, "gcp": {"project": "proj"},
                      "workload": {"name": "osu"},
                      "matrix": {"machine_type": ["n2-standard-2"]}, "trials": 2,
                      "schedule": {"cron": "0 3 * * *"}, "deadline": "30m"})


@pytest.fixture
def gce():
    fake = FakeGce(project="proj")
    for g in _gcp_spec().plan():
        for m in g.members:
            fake.add(m.name, ZONE, "TERMINATED", g.member_labels(m))
    fake.start()
    yield fake
    fake.stop()


def _gcp(gce: FakeGce) -> GcpCloud:
    return GcpCloud("proj", zones=[ZONE], api_endpoint=gce.url, timeout_s=30, retry_initial_s=0.05,
                    poll_s=0.05)


def test_search_logs_follow_reads_gce_serial_port_from_its_offset(gce):
    spec = _gcp_spec()
    group = spec.plan()[0]
    name = group.members[0].name
    gce.instances[(ZONE, name)]["status"] = "RUNNING"
    gce.write_serial(ZONE, name, "boot\nepoch 1 val_accuracy=0.5\n")
    emitted: list[tuple[str, str]] = []
    polls = []

    def sleep(_s: float) -> None:  # between reads: the VM prints more, then is stopped
        polls.append(1)
        if len(polls) == 1:
            gce.write_serial(ZONE, name, "epoch 2 val_accuracy=0.7\n")
        else:
            gce.write_serial(ZONE, name, "done\n")
            gce.instances[(ZONE, name)]["status"] = "TERMINATED"

    reads = tail(_gcp(gce), group, lambda m, t: emitted.append((m, t)), follow=True, sleep=sleep)
    text = "".join(t for _, t in emitted)
    assert text == "boot\nepoch 1 val_accuracy=0.5\nepoch 2 val_accuracy=0.7\ndone\n"  # each byte once
    assert {m for m, _ in emitted} == {name} and reads == 3
    asked = [p for m, p in gce.calls if p.endswith("/serialPort")]
    assert len(asked) == 3 * len(group.members)  # one getSerialPortOutput per member per read


def test_search_logs_say_when_gce_discarded_output_between_reads(gce):
    spec = _gcp_spec()
    group = spec.plan()[0]
    name = group.members[0].name
    gce.serial_buffer = 16
    gce.write_serial(ZONE, name, "0123456789")
    follower = Follower(_gcp(gce))
    member = Instance(name, State.RUNNING, zone=ZONE)
    assert follower.read(member) == "0123456789"
    gce.write_serial(ZONE, name, "abcdefghijklmnopqrst")  # 30 written, 16 kept: bytes 10-13 never read
    text = follower.read(member)
    assert text == "[… 4 bytes no longer kept by the cloud]\nefghijklmnopqrst"


def test_search_stop_one_group_on_gce_is_not_retried_and_a_deadline_stop_is(gce):
    spec = _gcp_spec()
    cloud = _gcp(gce)
    g0, g1 = (g.id for g in spec.plan())
    sweep = control.Sweep(spec=spec, cloud=cloud, store=ResultStore("memory://searchux-gce-stop"))
    first = control.start(sweep, TICK)
    assert sorted(first["started"]) == [g0, g1]
    run = first["run"]
    answer = control.stop(sweep, OPERATOR, {"groups": [g0], "reason": USER_STOP})
    assert answer["stopped"] == sorted(m.name for m in spec.plan()[0].members)
    assert g0 not in answer.get("started", [])  # not started again in the slot it freed
    assert all(gce.status(ZONE, m.name) == "TERMINATED" for m in spec.plan()[0].members)
    assert sweep.store.user_stopped(run) == {g0: "alice"}
    from spotbench.ops.status import sweep_status

    shown = {g.id: g.last_result for g in sweep_status(spec, cloud, sweep.store).groups}
    assert shown[g0].startswith("STOPPED by alice (not retried)") and shown[g1] is None
    again = control.start(sweep, TICK)  # the next tick: g0 is done for the run
    assert g0 not in again["started"] and sweep.store.launch_count(run, g0) == 1
    assert all(gce.status(ZONE, m.name) == "TERMINATED" for m in spec.plan()[0].members)
    # the same stop for a deadline is a retry: g1 is started again at once
    retried = control.stop(sweep, TICK, {"groups": [g1], "reason": "deadline"})
    assert retried["started"] == [g1] and sweep.store.launch_count(run, g1) == 2


# ---- AWS under moto_server ------------------------------------------------------------------
@pytest.fixture
def aws(moto_url, monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    MotoServer.reset_url(moto_url)
    return moto_url


def _aws_spec():
    return load_spec({"name": "la", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
                      "workload": {"name": "osu"},
                      "matrix": {"machine_type": ["c5n.large"]}, "trials": 2,
                      "results": "s3://bkt/la", "schedule": {"cron": "0 3 * * *"}, "deadline": "30m"})


def _launch_members(ec2, spec) -> None:
    image = MotoServer.any_image(ec2)
    for g in spec.plan():
        for m in g.members:
            tags = {**g.member_labels(m), "Name": m.name}
            out = ec2.run_instances(ImageId=image, InstanceType="c5n.large", MinCount=1, MaxCount=1,
                                    TagSpecifications=[{"ResourceType": "instance", "Tags": [
                                        {"Key": k, "Value": v} for k, v in tags.items()]}])
            ec2.stop_instances(InstanceIds=[out["Instances"][0]["InstanceId"]])


def test_search_logs_and_stop_on_ec2(aws):
    spec = _aws_spec()
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=aws)
    _launch_members(ec2, spec)
    cloud = AwsCloud("us-east-1", endpoint_url=aws, wait_timeout_s=10, poll_s=1)
    g0, g1 = spec.plan()
    sweep = control.Sweep(spec=spec, cloud=cloud, store=ResultStore("memory://searchux-ec2-stop"))
    run = control.start(sweep, TICK)["run"]
    emitted: list[tuple[str, str]] = []
    tail(cloud, g0, lambda m, t: emitted.append((m, t)))
    assert sorted(m for m, _ in emitted) == sorted(m.name for m in g0.members)
    assert all(t.startswith("Linux version") for _, t in emitted)  # moto's console text
    text = emitted[0][1]
    follower = Follower(cloud)  # the same window twice: nothing new the second time
    inst = next(i for i in cloud.query(g0.labels) if i.member == emitted[0][0])
    assert follower.read(inst) == text and follower.read(inst) == ""
    control.stop(sweep, OPERATOR, {"groups": [g0.id], "reason": USER_STOP})
    assert {i.state for i in cloud.query(g0.labels)} <= {State.STOPPING, State.STOPPED}
    control.start(sweep, TICK)
    assert sweep.store.launch_count(run, g0.id) == 1 and sweep.store.user_stopped(run) == {g0.id: "alice"}
    assert {i.state for i in cloud.query(g1.labels)} == {State.RUNNING}


def test_search_logs_of_an_unknown_group_name_the_known_ones():
    groups = _gcp_spec().plan()
    with pytest.raises(NoLogs, match=groups[0].id):
        group_of(groups, "nope")


class _NoConsole:
    name = "toy"

    def query(self, labels):
        return [Instance("x", State.RUNNING, labels=labels)]


def test_search_logs_on_a_driver_without_a_console_is_a_clear_error():
    with pytest.raises(NoLogs, match="cannot read an instance's console"):
        tail(_NoConsole(), _gcp_spec().plan()[0], lambda m, t: None)
    assert ConsoleOutput("t").window is False


# ---- local cloud, end to end through the CLI --------------------------------------------------
LONG = """
import sys, time
for i in range(400):
    print(f"tick {i}", flush=True)
    time.sleep(0.1)
print("score=1 points")
"""


@pytest.mark.slow
def test_search_logs_follow_and_stop_on_the_local_cloud(tmp_path: Path) -> None:
    script = tmp_path / "long.py"
    script.write_text(LONG)
    spec = {"name": "ls", "cloud": "local", "deadline": "3m", "results": str(tmp_path / "results"),
            "workload": {"name": "container", "command": [sys.executable, str(script)]},
            "matrix": {"command": [[sys.executable, str(script)], [sys.executable, "-c", "print('score=2 points')"]]}}
    path = tmp_path / "ls.yaml"
    path.write_text(yaml.safe_dump(spec))
    g0, g1 = (g.id for g in load_spec(path).plan())
    runner = cli(tmp_path, "run", str(path))
    follow = None
    try:
        cloud = LocalCloud(tmp_path / "state" / "ls" / "cloud.db")
        log = None
        deadline = time.monotonic() + 120
        while log is None or "tick 3" not in log.read_text(errors="replace"):
            assert runner.poll() is None, runner.communicate()[0]
            assert time.monotonic() < deadline, "the long group never printed"
            time.sleep(0.3)
            running = [i for i in cloud.query({"spotbench-group": g0}) if i.state == State.RUNNING] \
                if (tmp_path / "state" / "ls" / "cloud.db").exists() else []
            log = cloud.log_path(running[0].name) if running else None
        follow = cli(tmp_path, "logs", str(path), g0, "--follow", "--interval", "0.3")
        time.sleep(2)
        stop = cli(tmp_path, "stop", str(path), g0)
        out, _ = stop.communicate(timeout=60)
        assert stop.returncode == 0, out
        assert f"stopped {g0} in run" in out and "recorded as stopped by the user, not retried" in out
        followed, _ = follow.communicate(timeout=60)  # ends by itself once the group is off
        assert follow.returncode == 0, followed
        lines = [line for line in followed.splitlines() if line.startswith("[")]
        assert any(line.endswith("] tick 0") for line in lines)  # from the start of the log
        ticks = [int(line.rsplit(" ", 1)[1]) for line in lines if " tick " in line]
        assert ticks == sorted(ticks) and len(ticks) == len(set(ticks))  # in order, each once
        assert 3 < max(ticks) < 399  # it was stopped long before its end
        out, _ = runner.communicate(timeout=120)
    finally:
        for proc in (runner, follow):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
    assert "stopped by user" in out
    store = ResultStore(f"file://{tmp_path}/results")
    run = store.runs()[-1].run
    assert store.user_stopped(run) == {g0: store.user_stopped(run)[g0]}
    assert store.launch_count(run, g0) == 1  # not retried
    assert g1 in store.completed_groups(run)  # the next group ran in the freed slot
    stopped = [r for r in store.read(run) if r.group == g0]
    assert stopped and all(r.preempted for r in stopped)  # what it measured: cut short, kept apart



# ---- the CLI itself under both clouds' doubles -----------------------------------------------
def _follow_then_stop(runner, app, spec_path: Path, spec, group: str, results: str, during) -> str:
    """`spotbench logs SPEC GROUP --follow` in this thread while another one runs `during`
    (the VM prints more) and then stops the group as `spotbench stop` does: the follow ends
    by itself once the group is off. Its output."""
    import threading

    from spotbench.ops.stop_group import stop_group

    def later() -> None:
        time.sleep(1.0)
        during()
        time.sleep(1.0)
        stop_group(spec, group, results=results, who="bob")

    worker = threading.Thread(target=later, daemon=True)
    worker.start()
    res = runner.invoke(app, ["logs", str(spec_path), group, "--follow", "--interval", "0.2"])
    worker.join(timeout=60)
    assert res.exit_code == 0, res.output
    return res.output


def test_search_logs_follow_and_stop_through_the_cli_on_gce(gce, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from spotbench.cli import app

    spec = _gcp_spec()
    path = tmp_path / "lg.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json")))
    monkeypatch.setenv("SPOTBENCH_GCP_API_ENDPOINT", gce.url)
    results = f"file://{tmp_path}/results"
    g0, g1 = spec.plan()
    sweep = control.Sweep(spec=spec, cloud=_gcp(gce), store=ResultStore(results))
    run = control.start(sweep, TICK)["run"]
    name = g0.members[0].name
    gce.write_serial(ZONE, name, "epoch 1 val_accuracy=0.5\n")
    runner = CliRunner()
    out = _follow_then_stop(runner, app, path, spec, g0.id, results,
                            lambda: gce.write_serial(ZONE, name, "epoch 2 val_accuracy=0.4\n"))
    assert out.count(f"[{name}] epoch 1 val_accuracy=0.5") == 1
    assert out.count(f"[{name}] epoch 2 val_accuracy=0.4") == 1  # read while it ran, once
    assert all(gce.status(ZONE, m.name) == "TERMINATED" for m in g0.members)
    res = runner.invoke(app, ["stop", str(path), g1.id, "--results", results])
    assert res.exit_code == 0, res.output
    assert f"stopped {g1.id} in run {run}" in res.output and "not retried" in res.output
    assert all(gce.status(ZONE, m.name) == "TERMINATED" for m in g1.members)
    store = ResultStore(results)
    assert set(store.user_stopped(run)) == {g0.id, g1.id}
    control.start(sweep, TICK)  # the next tick retries neither
    assert store.launch_count(run, g0.id) == 1 and store.launch_count(run, g1.id) == 1


def test_search_logs_follow_and_stop_through_the_cli_on_ec2(aws, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from spotbench.cli import app

    spec = _aws_spec()
    data = spec.model_dump(mode="json")
    results = f"file://{tmp_path}/results"
    path = tmp_path / "la.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("AWS_ENDPOINT_URL", aws)
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=aws)
    _launch_members(ec2, spec)
    cloud = AwsCloud("us-east-1", endpoint_url=aws, wait_timeout_s=10, poll_s=1)
    g0, g1 = spec.plan()
    sweep = control.Sweep(spec=spec, cloud=cloud, store=ResultStore(results))
    run = control.start(sweep, TICK)["run"]
    runner = CliRunner()
    out = _follow_then_stop(runner, app, path, spec, g0.id, results, lambda: None)
    lines = [ln for ln in out.splitlines() if ln.startswith("[")]
    assert {ln.split("]", 1)[0][1:] for ln in lines} == {m.name for m in g0.members}
    assert sum("Linux version" in ln for ln in lines) == len(g0.members)  # each console once, not per read
    assert {i.state for i in cloud.query(g0.labels)} <= {State.STOPPING, State.STOPPED}
    res = runner.invoke(app, ["stop", str(path), g1.id, "--results", results])
    assert res.exit_code == 0, res.output
    assert f"stopped {g1.id} in run {run}" in res.output
    assert {i.state for i in cloud.query(g1.labels)} <= {State.STOPPING, State.STOPPED}
    store = ResultStore(results)
    assert set(store.user_stopped(run)) == {g0.id, g1.id}
