"""Attack: another local user pre-creates the OSU exec agent's runtime folder in the shared
temporary folder (`/tmp/spotbench-<uid>`, its name was predictable), so every local OSU run
of the victim refused to start (issue 38). The folder's name now comes from a key in the
victim's home: the planted folders are never used, the agent's key is published and read."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from workloads.osu import agent

pytestmark = pytest.mark.security

NOBODY = 65534


def test_runtime_folder_a_pre_created_one_does_not_block_local_osu_runs(tmp_path: Path, monkeypatch) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir(mode=0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    monkeypatch.setattr(agent, "RUNTIME_KEY", tmp_path / "home" / ".cache" / "spotbench" / "runtime.key")
    planted = [shared / f"spotbench-{os.getuid()}", shared / f"spotbench-{os.getuid()}-0000000000000000"]
    for folder in planted:  # the attacker's, and open to everyone
        folder.mkdir()
        folder.chmod(0o777)
        if os.getuid() == 0:
            os.chown(folder, NOBODY, NOBODY)
    key = agent.publish_key("osu-t1-l0")
    assert agent.read_key("osu-t1-l0") == key
    used = agent.runtime_dir()
    assert used not in planted and used.parent == shared
    st = used.stat()
    assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700
    assert all(not any(f.iterdir()) for f in planted)
    assert agent.runtime_dir() == used  # the launcher finds the agent's folder
