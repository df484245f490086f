"""How ranks cross VMs on gcp/aws: the peer runs `sshd` on its service port (2222), the
launcher gives `mpiexec` an ssh wrapper as its launcher.

Keys arrive at boot through the environment (instance metadata → the container's env
file), never baked into the image:

    SPOTBENCH_SSH_AUTHORIZED_KEYS   peer: public key(s) allowed to log in
    SPOTBENCH_SSH_HOST_KEY          peer: private host key (optional; made at boot if absent)
    SPOTBENCH_SSH_PRIVATE_KEY       launcher: private key to log in with
    SPOTBENCH_SSH_HOST_PUBLIC_KEY   launcher: the peer's host public key to pin (optional;
                                    without it the first key seen is accepted, in-VPC only)
    SPOTBENCH_SSH_USER              launcher: remote user (default: the current user)

or, as the GCP cloud-init does, as files in a read-only mount named by `SPOTBENCH_SSH_DIR`
(`authorized_keys`, `id_ed25519`, `ssh_host_ed25519_key[.pub]`); a variable wins.

sshd runs as the container's (non-root) user: port 2222 needs no privilege, `UsePAM no`,
and only that user can log in. Member names are the hosts `mpiexec` sees; the generated
ssh_config maps each to its internal IP and port, and pins host keys by member name.
"""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

SSHD = os.environ.get("SPOTBENCH_SSHD", "/usr/sbin/sshd")


def keygen(path: Path, comment: str = "spotbench") -> Path:
    """An ed25519 key pair without passphrase at `path` (+ `.pub`)."""
    path.unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, capture_output=True)
    return path


def _write_secret(path: Path, text: str) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text.strip() + "\n")
    return path


def write_sshd_config(workdir: Path, *, port: int, host_key: Path, authorized_keys: Path,
                      listen: str = "0.0.0.0") -> Path:
    cfg = workdir / "sshd_config"
    cfg.write_text(
        f"Port {port}\nListenAddress {listen}\nHostKey {host_key}\n"
        f"AuthorizedKeysFile {authorized_keys}\nPidFile {workdir / 'sshd.pid'}\n"
        "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\nX11Forwarding no\n"
        "AllowTcpForwarding no\nPermitUserEnvironment no\nLogLevel VERBOSE\n"
    )
    return cfg


def start_sshd(config: Path, log: Path | None = None) -> subprocess.Popen:
    """`sshd -D -e -f config` in the foreground of a child process (stop it with terminate)."""
    if not Path(SSHD).exists():
        raise FileNotFoundError(f"{SSHD} not found: install openssh-server (apt-get install openssh-server)")
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation dir
    subprocess.run([SSHD, "-t", "-f", str(config)], check=True, capture_output=True)
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - owned by the child
    return subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=out, stderr=out)


def wait_port(host: str, port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=2):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def write_client(workdir: Path, hosts: Mapping[str, tuple[str, int]], *, identity: Path,
                 host_public_key: str | None = None, user: str | None = None) -> Path:
    """ssh_config mapping member names → (ip, port), and the wrapper `mpiexec` runs as its
    launcher (`-launcher ssh -launcher-exec <wrapper>`). Returns the wrapper's path."""
    known = workdir / "known_hosts"
    known.write_text("".join(f"{name} {host_public_key.strip()}\n" for name in hosts)
                     if host_public_key else "")
    lines = []
    for name, (ip, port) in hosts.items():
        lines += [f"Host {name}", f"  HostName {ip}", f"  Port {port}", f"  HostKeyAlias {name}"]
    lines += [
        "Host *", f"  User {user or getpass.getuser()}", f"  IdentityFile {identity}",
        "  IdentitiesOnly yes", "  BatchMode yes", f"  UserKnownHostsFile {known}",
        "  GlobalKnownHostsFile /dev/null",
        f"  StrictHostKeyChecking {'yes' if host_public_key else 'accept-new'}",
        "  ConnectTimeout 10", "  ConnectionAttempts 6", "  ServerAliveInterval 5",
        "  ServerAliveCountMax 3", "  LogLevel ERROR",
    ]
    cfg = workdir / "ssh_config"
    cfg.write_text("\n".join(lines) + "\n")
    wrapper = workdir / "ssh-launcher"
    wrapper.write_text(f'#!/bin/sh\nexec ssh -F "{cfg}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def _key(env: Mapping[str, str], var: str, filename: str) -> str:
    """A key from its variable, else from `$SPOTBENCH_SSH_DIR/<filename>`, else ''."""
    value = env.get(var, "").strip()
    folder = env.get("SPOTBENCH_SSH_DIR")
    if not value and folder and (Path(folder) / filename).is_file():
        value = (Path(folder) / filename).read_text().strip()
    return value


def peer_sshd_from_env(workdir: Path, port: int, env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """Start the peer's sshd with the keys the VM was booted with."""
    env = os.environ if env is None else env
    authorized = _key(env, "SPOTBENCH_SSH_AUTHORIZED_KEYS", "authorized_keys")
    if not authorized:
        raise RuntimeError("SPOTBENCH_SSH_AUTHORIZED_KEYS is not set: the peer cannot accept the "
                           "launcher; the sweep's infra must pass the launcher's public key at boot")
    auth_file = _write_secret(workdir / "authorized_keys", authorized)
    recorded_host_key = _key(env, "SPOTBENCH_SSH_HOST_KEY", "ssh_host_ed25519_key")
    if recorded_host_key:
        host_key = _write_secret(workdir / "ssh_host_ed25519_key", recorded_host_key)
    else:
        host_key = keygen(workdir / "ssh_host_ed25519_key", "spotbench-host")
    cfg = write_sshd_config(workdir, port=port, host_key=host_key, authorized_keys=auth_file)
    return start_sshd(cfg, workdir / "sshd.log")


def launcher_client_from_env(workdir: Path, hosts: Mapping[str, tuple[str, int]],
                             env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    private = _key(env, "SPOTBENCH_SSH_PRIVATE_KEY", "id_ed25519")
    if not private:
        raise RuntimeError("SPOTBENCH_SSH_PRIVATE_KEY is not set: the launcher cannot reach its "
                           "peer over ssh; the sweep's infra must pass the key at boot")
    identity = _write_secret(workdir / "id_ed25519", private)
    return write_client(workdir, hosts, identity=identity,
                        host_public_key=_key(env, "SPOTBENCH_SSH_HOST_PUBLIC_KEY",
                                             "ssh_host_ed25519_key.pub") or None,
                        user=env.get("SPOTBENCH_SSH_USER") or None)
