"""exec/collect over fabric against a real sshd on 127.0.0.1: every member served, an
unreachable member reported while the others are served, a changed host key refused."""

from __future__ import annotations

import getpass

import pytest

from spotbench.ops.remote import AccessConfig, Target, collect, run_on_group
from spotbench.results import ResultStore
from tests.ops._sshd import Sshd, keygen, known_hosts_line
from tests.ops.conftest import free_port


@pytest.fixture
def sshd(tmp_path):
    server = Sshd(tmp_path / "sshd", free_port()).start()
    yield server
    server.stop()


@pytest.fixture
def sshd2(tmp_path):
    server = Sshd(tmp_path / "sshd2", free_port()).start()
    yield server
    server.stop()


def _cfg(tmp_path, sshd, known: str) -> AccessConfig:
    path = tmp_path / "known_hosts"
    path.write_text(known)
    return AccessConfig(known_hosts=path, user=getpass.getuser(),
                        key_filename=str(sshd.user_key), connect_timeout=20)


def test_exec_on_all_members_with_one_unreachable(tmp_path, sshd, sshd2):
    (sshd2.dir / "authorized_keys").write_text((sshd.dir / "user_key.pub").read_text())
    cfg = _cfg(tmp_path, sshd, known_hosts_line(sshd.port, sshd.dir / "host_key.pub")
               + known_hosts_line(sshd2.port, sshd2.dir / "host_key.pub"))
    dead = free_port()
    targets = [Target("g-l0", "127.0.0.1", sshd.port), Target("g-p0", "127.0.0.1", sshd2.port),
               Target("g-p1", "127.0.0.1", dead)]
    out = run_on_group(targets, cfg, "echo hello-$((6*7)); exit 3")
    by = {o.member: o for o in out}
    assert by["g-l0"].stdout.strip() == "hello-42" and by["g-l0"].exit_code == 3
    assert not by["g-l0"].ok and by["g-l0"].error == ""  # ran, exited non-zero
    assert by["g-p0"].stdout.strip() == "hello-42"
    assert by["g-p1"].exit_code is None and by["g-p1"].error  # unreachable: reported
    ok = run_on_group(targets[:1], cfg, "true")
    assert ok[0].ok and ok[0].exit_code == 0


def test_changed_or_unknown_host_key_is_refused(tmp_path, sshd):
    other = keygen(tmp_path / "other_key")
    cfg = _cfg(tmp_path, sshd, known_hosts_line(sshd.port, other.with_suffix(".pub")))
    out = run_on_group([Target("g-l0", "127.0.0.1", sshd.port)], cfg, "touch /tmp/never")
    assert out[0].exit_code is None and "mismatch" in out[0].error
    cfg.known_hosts.write_text("")  # not recorded at all → refused too, and not written back
    out = run_on_group([Target("g-l0", "127.0.0.1", sshd.port)], cfg, "true")
    assert out[0].exit_code is None and "known_hosts" in out[0].error
    assert cfg.known_hosts.read_text() == ""


def test_collect_fetches_files_into_the_results_store(tmp_path, sshd):
    cfg = _cfg(tmp_path, sshd, known_hosts_line(sshd.port, sshd.dir / "host_key.pub"))
    logs = tmp_path / "remote-logs"
    (logs / "osu").mkdir(parents=True)
    (logs / "osu" / "latency.txt").write_text("# OSU MPI Latency\n0 1.23\n")
    (logs / "workload.log").write_text("started\n")
    store = ResultStore(f"file://{tmp_path}/results")
    run = store.open_run().run
    targets = [Target("g-l0", "127.0.0.1", sshd.port), Target("g-p0", "127.0.0.1", free_port())]
    out = collect(targets, cfg, store, "g", paths=(str(logs),))
    by = {o.member: o for o in out}
    assert by["g-l0"].ok and len(by["g-l0"].files) == 2
    stored = store.fs.cat_file(next(f for f in by["g-l0"].files if f.endswith("latency.txt")))
    assert stored == b"# OSU MPI Latency\n0 1.23\n"
    assert f"runs/{run}/g.1/collected/g-l0/" in by["g-l0"].files[0]
    assert not by["g-p0"].ok and by["g-p0"].error and by["g-p0"].files == []
