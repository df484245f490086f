"""The system-package install path of `make setup-dev` (scripts/apt_install.sh, used by
scripts/ensure_sshd.sh and scripts/ensure_boot_tools.sh).

On a developer machine everything is installed and the ensure scripts exit at once, so
only a fresh CI machine would run the install path: here it runs against shims of
`apt-get`, `id` and `sudo` on a PATH without the tools, and the apt-get calls are checked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"


def _shim(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/bash\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def box(tmp_path):
    """A PATH holding only what the scripts need besides the tools they look for."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "dirname"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    log = tmp_path / "calls"
    _shim(bin_dir, "apt-get", f'echo "apt-get $* DEBIAN_FRONTEND=${{DEBIAN_FRONTEND:-}}" >> {log}')

    def run(script: str, *args: str, uid: int = 0, sudo: bool = False):
        _shim(bin_dir, "id", f'[ "$1" = -u ] && echo {uid}')
        _shim(bin_dir, "sudo", f'echo "sudo $*" >> {log}; [ "$1" = -n ] && shift; '
                               f'{"" if sudo else "exit 1; "}"$@"')
        proc = subprocess.run(["/bin/bash", str(SCRIPTS / script), *args], capture_output=True,
                              text=True, timeout=30, env={"PATH": str(bin_dir), "HOME": str(tmp_path)})
        calls = log.read_text().splitlines() if log.exists() else []
        log.unlink(missing_ok=True)
        return proc, calls

    return run


def test_apt_install_as_root_updates_then_installs_noninteractively(box):
    proc, calls = box("apt_install.sh", "who", "pkg-a", "pkg-b")
    assert proc.returncode == 0, proc.stderr
    assert calls == ["apt-get update -qq DEBIAN_FRONTEND=",
                     "apt-get install -y -qq --no-install-recommends pkg-a pkg-b "
                     "DEBIAN_FRONTEND=noninteractive"]
    assert "who: installing pkg-a pkg-b" in proc.stdout


def test_apt_install_without_root_uses_passwordless_sudo_or_says_what_to_run(box):
    proc, calls = box("apt_install.sh", "who", "pkg-a", uid=1000, sudo=True)
    assert proc.returncode == 0, proc.stderr
    assert calls[0] == "sudo -n true" and "sudo -n apt-get update -qq" in calls
    assert calls[-1].startswith("apt-get install -y -qq --no-install-recommends pkg-a")

    proc, calls = box("apt_install.sh", "who", "pkg-a", uid=1000, sudo=False)
    assert proc.returncode == 1 and not any(c.startswith("apt-get") for c in calls)
    assert "who: pkg-a missing" in proc.stderr and "sudo apt-get install -y pkg-a" in proc.stderr


def test_apt_install_with_nothing_to_install_does_nothing(box):
    proc, calls = box("apt_install.sh", "who")
    assert proc.returncode == 0 and calls == []


def test_ensure_boot_tools_installs_what_is_missing(box):
    # nft and ip are found under /usr/sbin when this machine has them; the rest is not on PATH
    missing = ["cloud-init", "shellcheck"]
    missing += [p for p, exe in (("nftables", "/usr/sbin/nft"), ("iproute2", "/usr/sbin/ip"))
                if not os.access(exe, os.X_OK)]
    missing.append("curl")
    proc, calls = box("ensure_boot_tools.sh")
    assert proc.returncode == 0, proc.stderr
    assert calls[-1] == ("apt-get install -y -qq --no-install-recommends " + " ".join(missing)
                         + " DEBIAN_FRONTEND=noninteractive")


def test_ensure_sshd_installs_openssh_server_when_sshd_is_missing(box):
    if os.access("/usr/sbin/sshd", os.X_OK):  # found there whatever PATH says
        proc, calls = box("ensure_sshd.sh")
        assert proc.returncode == 0 and calls == []
        return
    proc, calls = box("ensure_sshd.sh")
    assert proc.returncode == 0, proc.stderr
    assert calls[-1].startswith("apt-get install -y -qq --no-install-recommends openssh-server")
