"""Attack: a compromised member makes `spotbench collect` write outside the results folder.

`collect` lists a member's files with `find` over ssh and stores each under
`runs/<run>/<group>.<attempt>/collected/<member>/<name>`. The member answers whatever it
likes: here its sshd (real OpenSSH on 127.0.0.1) runs a forced command that prints
`../../../../../../planted` for the listing and serves a file by that name over sftp. The
operator's machine must not get `planted` outside the results folder.
"""

from __future__ import annotations

import getpass
import stat

import pytest

from spotbench.ops.remote import AccessConfig, Target, collect
from spotbench.results import ResultStore
from tests.ops._sshd import Sshd, known_hosts_line
from tests.ops.conftest import free_port

pytestmark = pytest.mark.security

HUGE = 3 << 20  # bytes of a file served by the member (the test lowers the bound to 1 MiB)
EVIL_NAMES = ["../../../../../../planted", "ok/../../../../../../../planted",
              "..", "logs/\x00planted"]


@pytest.fixture
def evil_member(tmp_path):
    vm_root = tmp_path / "vm" / "d1" / "d2" / "d3" / "d4" / "d5" / "d6" / "d7" / "d8"
    vm_root.mkdir(parents=True)
    (tmp_path / "vm" / "d1" / "d2" / "planted").write_text("pwned\n")  # what ../ x6 reaches
    (vm_root / "fine.log").write_text("a real log\n")
    with open(vm_root / "huge.log", "wb") as fh:  # sparse: what a member may serve as one file
        fh.truncate(HUGE)
    listing = tmp_path / "listing"
    listing.write_text("\n".join(["fine.log", "huge.log", *EVIL_NAMES]) + "\n")
    shim = tmp_path / "forced.sh"
    shim.write_text(
        "#!/bin/sh\n"
        'case "$SSH_ORIGINAL_COMMAND" in\n'
        f"  find*) cat {listing} ;;\n"
        f"  internal-sftp|sftp|*sftp-server*) cd {vm_root} && exec /usr/lib/openssh/sftp-server ;;\n"
        '  *) exec /bin/sh -c "$SSH_ORIGINAL_COMMAND" ;;\n'
        "esac\n")
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    server = Sshd(tmp_path / "sshd", free_port())
    server.config.write_text(server.config.read_text().replace(
        "Subsystem sftp internal-sftp\n", "Subsystem sftp /usr/lib/openssh/sftp-server\n")
        + f"ForceCommand {shim}\n")
    server.start()
    yield server
    server.stop()


def _access(tmp_path, member) -> tuple[AccessConfig, ResultStore]:
    """The operator's ssh access to the member, and a results store with an open run."""
    known = tmp_path / "known_hosts"
    known.write_text(known_hosts_line(member.port, member.dir / "host_key.pub"))
    cfg = AccessConfig(known_hosts=known, user=getpass.getuser(),
                       key_filename=str(member.user_key), connect_timeout=20)
    store = ResultStore(f"file://{tmp_path}/results")
    store.open_run()
    return cfg, store


def test_collect_refuses_names_that_leave_the_results_folder(tmp_path, evil_member):
    cfg, store = _access(tmp_path, evil_member)

    out = collect([Target("g-l0", "127.0.0.1", evil_member.port)], cfg, store, "g", paths=("/x",))

    assert not (tmp_path / "planted").exists(), "collect wrote outside the results folder"
    outside = [p for p in tmp_path.rglob("planted") if "vm" not in p.parts]
    assert outside == []
    member = out[0]
    assert [f for f in member.files if f.endswith("fine.log")], member  # the honest file is kept
    assert all(str(tmp_path / "results") in f and ".." not in f for f in member.files)
    assert "refused" in member.error and "planted" in member.error


def test_collect_refuses_a_file_past_its_bound_alone(tmp_path, evil_member, monkeypatch):
    """The member serves a file larger than collect keeps (here 3 MiB over a 1 MiB bound):
    it is fetched no further than the bound and refused; the honest file is kept."""
    from spotbench.ops import remote

    monkeypatch.setattr(remote, "MAX_COLLECT_BYTES", 1 << 20)
    cfg, store = _access(tmp_path, evil_member)
    member = collect([Target("g-l0", "127.0.0.1", evil_member.port)], cfg, store, "g", paths=("/x",))[0]
    assert [f for f in member.files if f.endswith("fine.log")], member
    assert not [f for f in member.files if f.endswith("huge.log")], member
    assert "larger than 1048576 bytes" in member.error and "huge.log" in member.error
