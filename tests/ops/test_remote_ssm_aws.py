"""`spotbench exec` on AWS through Session Manager (`--via ssm`), against a real sshd: the
ProxyCommand is `aws ssm start-session --target <instance id> --document-name
AWS-StartSSHSession` in the sweep's region (a stand-in `aws` on PATH records its arguments
and carries the stream to the sshd, as the session-manager plugin does), and the host key
is checked under the instance id, as the stack's known_hosts records it."""

from __future__ import annotations

import getpass
import json
import os
import sys

import pytest

from spotbench.clouds import get_provider
from spotbench.ops.remote import AccessConfig, Target, run_on_group
from spotbench.spec import load_spec
from tests.ops._sshd import Sshd
from tests.ops.conftest import free_port

INSTANCE = "i-0123456789abcdef0"
FAKE_AWS = """#!{python}
import json, os, socket, sys, threading
with open(os.environ["FAKE_SSM_LOG"], "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
sock = socket.create_connection(("127.0.0.1", int(os.environ["FAKE_SSM_PORT"])))
def pump():
    while data := sock.recv(65536):
        os.write(1, data)
    os._exit(0)
threading.Thread(target=pump, daemon=True).start()
while data := os.read(0, 65536):
    sock.sendall(data)
sock.shutdown(socket.SHUT_WR)
threading.Event().wait(10)
"""


@pytest.fixture
def sshd(tmp_path):
    server = Sshd(tmp_path / "sshd", free_port()).start()
    yield server
    server.stop()


@pytest.fixture
def ssm_log(tmp_path, sshd, monkeypatch):
    """A stand-in `aws` first on PATH; the file it records each call's arguments in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "aws"
    fake.write_text(FAKE_AWS.format(python=sys.executable))
    fake.chmod(0o755)
    log = tmp_path / "ssm.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SSM_LOG", str(log))
    monkeypatch.setenv("FAKE_SSM_PORT", str(sshd.port))
    return log


def test_exec_via_ssm_on_aws_reaches_the_instance_in_the_sweeps_region(tmp_path, sshd, ssm_log):

    spec = load_spec({"name": "sx", "cloud": "aws", "region": "eu-west-1",
                      "workload": {"name": "osu"}, "matrix": {"machine_type": ["c5n.large"]}})
    kind, key = (sshd.dir / "host_key.pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"[{INSTANCE}]:{sshd.port} {kind} {key}\n")  # as the stack exports it
    cfg = AccessConfig(known_hosts=known, user=getpass.getuser(), key_filename=str(sshd.user_key),
                       via="ssm", connect_timeout=20,
                       **get_provider("aws").access_options(spec, "ssm"))
    out = run_on_group([Target("sx-g1-l0", INSTANCE, sshd.port)], cfg, "echo via-$((40+2))")
    assert out[0].ok and out[0].stdout.strip() == "via-42", out[0]
    (argv,) = [json.loads(line) for line in ssm_log.read_text().splitlines()]
    assert argv[:4] == ["ssm", "start-session", "--target", INSTANCE]
    assert argv[argv.index("--document-name") + 1] == "AWS-StartSSHSession"
    assert argv[argv.index("--parameters") + 1] == f"portNumber={sshd.port}"
    assert argv[argv.index("--region") + 1] == "eu-west-1"  # the sweep's, not the profile's


def test_exec_via_ssm_through_the_cli_on_an_aws_spec(tmp_path, sshd, ssm_log):
    """The same session through `spotbench exec --via ssm`: the CLI and the provider once both
    passed `aws_region`, so every `ssh|exec|collect --via ssm` on an AWS spec raised TypeError."""
    from typer.testing import CliRunner

    from spotbench.cli import app

    spec_file = tmp_path / "sx.yaml"
    spec_file.write_text("name: sx\ncloud: aws\nregion: eu-west-1\nworkload: {name: osu}\n"
                         "matrix: {machine_type: [c5n.large]}\n")
    group = load_spec(spec_file).plan()[0]
    kind, key = (sshd.dir / "host_key.pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    ids = [f"{INSTANCE[:-1]}{n}" for n in range(len(group.members))]  # one instance a member
    known.write_text("".join(f"[{i}]:{sshd.port} {kind} {key}\n" for i in ids))
    hosts = [a for m, i in zip(group.members, ids) for a in ("--host", f"{m.name}={i}:{sshd.port}")]
    result = CliRunner().invoke(app, [
        "exec", "--spec", str(spec_file), "--via", "ssm", "--known-hosts", str(known),
        "--user", getpass.getuser(), "--key", str(sshd.user_key), *hosts, group.id, "--",
        "echo", "cli-ok"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 0, result.output
    assert result.output.count("cli-ok") == len(ids), result.output
    for line in ssm_log.read_text().splitlines():
        argv = json.loads(line)
        assert argv[3] in ids and argv[argv.index("--region") + 1] == "eu-west-1"


def test_exec_via_ssm_asks_session_manager_in_the_instances_region(tmp_path, sshd, ssm_log,
                                                                    moto_url, monkeypatch):
    """A created group that runs in another candidate region than the sweep's: its
    instances are found there (moto, per region) and each session is opened with `--region`
    of the instance's zone (Session Manager is regional), not the sweep's."""
    import boto3

    from spotbench.clouds.aws.regions import AwsRegions
    from spotbench.ops.remote import targets_for
    from tests.moto_server import MotoServer

    MotoServer.fresh_account(moto_url, monkeypatch, "us-east-1")
    spec = load_spec({"name": "sx", "cloud": "aws", "region": "us-east-1", "lifecycle": "created",
                      "zones": ["us-east-1a", "us-west-2b"], "workload": {"name": "osu"},
                      "matrix": {"machine_type": ["c5n.large"]}})
    group = spec.plan()[0]
    west = boto3.client("ec2", region_name="us-west-2", endpoint_url=moto_url)
    image = MotoServer.any_image(west)
    ids = []
    for m in group.members:
        tags = [{"Key": k, "Value": v} for k, v in {**group.labels, "Name": m.name}.items()]
        ids += [i["InstanceId"] for i in west.run_instances(
            ImageId=image, MinCount=1, MaxCount=1, InstanceType="c5n.large",
            Placement={"AvailabilityZone": "us-west-2b"},
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])["Instances"]]
    cloud = AwsRegions("us-east-1", spec.candidate_regions, endpoint_url=moto_url)
    kind, key = (sshd.dir / "host_key.pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text("".join(f"[{i}]:{sshd.port} {kind} {key}\n" for i in ids))
    cfg = AccessConfig(known_hosts=known, user=getpass.getuser(), key_filename=str(sshd.user_key),
                       via="ssm", port=sshd.port, connect_timeout=20,
                       **get_provider("aws").access_options(spec, "ssm"))
    targets = targets_for(group, cloud, cfg)
    assert sorted(t.host for t in targets) == sorted(ids)
    assert {t.zone for t in targets} == {"us-west-2b"}
    out = run_on_group(targets, cfg, "echo west")
    assert all(o.ok and o.stdout.strip() == "west" for o in out), out
    argvs = [json.loads(line) for line in ssm_log.read_text().splitlines()]
    assert sorted(a[3] for a in argvs) == sorted(ids)
    assert {a[a.index("--region") + 1] for a in argvs} == {"us-west-2"}  # not the sweep's
    # a member named by --host (zone unknown) is asked in the sweep's region
    assert "--region us-east-1" in (cfg.proxy_command(Target("m", ids[0], sshd.port)) or "")
