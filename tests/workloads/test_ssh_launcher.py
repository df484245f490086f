"""The cross-VM path for real: mpiexec's ssh launcher → a real sshd on 127.0.0.1.

The peer's address is given to hydra as a member-like name (`peer-vm`) that the generated
ssh_config maps to 127.0.0.1:<port> — exactly how the launcher maps member names to
internal IPs on gcp/aws (hydra would fork `localhost`/`127.0.0.1` locally instead of
using ssh, so a plain IP would not exercise ssh here). Keys are made by the test.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from workloads.osu import launch, ssh
from workloads.osu.parse import parse

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not Path(ssh.SSHD).exists(),
                                reason=f"{ssh.SSHD} absent: apt-get install openssh-server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def sshd(tmp_path):
    port = _free_port()
    host_key = ssh.keygen(tmp_path / "host_key", "test-host")
    user_key = ssh.keygen(tmp_path / "user_key", "test-user")
    authorized = tmp_path / "authorized_keys"
    authorized.write_text((tmp_path / "user_key.pub").read_text())
    cfg = ssh.write_sshd_config(tmp_path, port=port, host_key=host_key,
                                authorized_keys=authorized, listen="127.0.0.1")
    log = tmp_path / "sshd.log"
    proc = ssh.start_sshd(cfg, log)
    try:
        assert ssh.wait_port("127.0.0.1", port, 20), log.read_text()
        yield {"port": port, "user_key": user_key, "log": log,
               "host_pub": " ".join((tmp_path / "host_key.pub").read_text().split()[:2])}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.returncode is not None


def test_mpiexec_over_ssh_runs_rank_1_through_sshd(tmp_path, sshd):
    workdir = tmp_path / "client"
    workdir.mkdir()
    wrapper = ssh.write_client(workdir, {"peer-vm": ("127.0.0.1", sshd["port"])},
                               identity=sshd["user_key"], host_public_key=sshd["host_pub"])
    t = launch.Transport("ssh", str(wrapper), ["localhost", "peer-vm"])
    cmd = launch.command(t, [sys.executable, "-m", "workloads.osu.harness", "latency",
                             "-m", "256", "-i", "50", "-x", "5"])
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr + sshd["log"].read_text()

    out = parse(proc.stdout)
    assert out.benchmark == "latency"
    assert [s for s, _ in out.rows] == [0] + [2**k for k in range(9)]
    assert all(v > 0 for _, v in out.rows)
    log = sshd["log"].read_text()
    assert "Accepted publickey" in log and "Starting session: command" in log


def test_a_wrong_host_key_is_refused(tmp_path, sshd):
    """Pinned host keys: a peer presenting another key is not trusted (no silent accept)."""
    other = ssh.keygen(tmp_path / "other_host", "other")
    wrapper = ssh.write_client(tmp_path, {"peer-vm": ("127.0.0.1", sshd["port"])},
                               identity=sshd["user_key"],
                               host_public_key=" ".join(Path(f"{other}.pub").read_text().split()[:2]))
    proc = subprocess.run([str(wrapper), "peer-vm", "true"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 255
    assert "Host key verification failed" in proc.stderr
