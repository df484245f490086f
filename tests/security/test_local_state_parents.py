"""A local sweep's state folder is only as private as every folder above it (issue 24: 9).

Another local user who may write a parent folder (owns it, or it is group/world-writable
without the sticky bit) can swap the state folder — or put a symlink — for one holding their
own `cloud.db`, whose instances are commands the runner executes. Every component from `/`
down is checked when the state is opened, and again before each state file is opened.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

UntrustedPath = PermissionError  # spotbench._private.UntrustedPath is one
from spotbench.clouds.local import db as local_db
from spotbench.clouds.local.state import LocalState

pytestmark = pytest.mark.security
NOBODY = 65534


def _attackers_db(folder: Path) -> Path:
    """A cloud.db another user prepared: one instance whose command is theirs."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "cloud.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE planted (cmd TEXT)")
        conn.execute("INSERT INTO planted VALUES ('touch /tmp/pwned')")
    return db


def test_a_world_writable_parent_without_sticky_bit_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(UntrustedPath, match="writable by other users"):
        LocalState("s", shared / ".spotbench")
    sticky = tmp_path / "sticky"  # like /tmp: others cannot rename what is ours
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    assert LocalState("s", sticky / ".spotbench").dir.is_dir()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a folder to another uid")
def test_a_parent_owned_by_another_user_is_refused(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(UntrustedPath, match=f"belongs to uid {NOBODY}"):
        LocalState("s", theirs / ".spotbench")


def test_a_parent_swapped_for_a_symlink_after_opening_is_refused_at_each_open(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    state = LocalState("s", home / ".spotbench")
    state.secret()
    ours = state.db_path
    with local_db.connect(ours):
        pass
    # the swap: the state's parent moved away, a symlink to the attacker's folder in its place
    planted = _attackers_db(tmp_path / "evil" / "s")
    (home / ".spotbench").rename(tmp_path / "moved")
    (home / ".spotbench").symlink_to(planted.parent.parent)
    with pytest.raises(UntrustedPath, match="symbolic link"):
        state.db_path  # noqa: B018 - the property checks
    with pytest.raises(UntrustedPath, match="symbolic link"):
        local_db.connect(ours)  # the local cloud's every connection
    with pytest.raises(UntrustedPath):
        state.secret()
    with sqlite3.connect(planted) as conn:  # the attacker's database was never opened by us
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert tables == {"planted"}
