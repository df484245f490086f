"""A real OpenSSH sshd on 127.0.0.1 for the fabric tests: host key, user key, config all
made in a temporary directory; `StrictModes no`; stopped by the test."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def known_hosts_line(port: int, pubkey: Path) -> str:
    kind, key = pubkey.read_text().split()[:2]
    return f"[127.0.0.1]:{port} {kind} {key}\n"


class Sshd:
    def __init__(self, workdir: Path, port: int):
        self.dir, self.port = workdir, port
        workdir.mkdir(parents=True, exist_ok=True)
        self.host_key = keygen(workdir / "host_key")
        self.user_key = keygen(workdir / "user_key")
        (workdir / "authorized_keys").write_text((workdir / "user_key.pub").read_text())
        self.config = workdir / "sshd_config"
        self.config.write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {self.host_key}\n"
            f"AuthorizedKeysFile {workdir / 'authorized_keys'}\nPidFile {workdir / 'sshd.pid'}\n"
            "StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nSubsystem sftp internal-sftp\n"
            f"AllowUsers {getpass.getuser()}\n"
        )
        self.proc: subprocess.Popen | None = None

    def start(self) -> Sshd:
        if not os.path.exists(SSHD):
            pytest.skip("sshd missing: run scripts/ensure_sshd.sh")
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
        self.log = open(self.dir / "sshd.log", "wb")
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.config)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError((self.dir / "sshd.log").read_text())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("sshd did not listen in 30 s")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.log.close()
