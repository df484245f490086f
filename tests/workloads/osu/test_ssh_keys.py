"""Keys reach the OSU members as variables or as files in SPOTBENCH_SSH_DIR (GCP cloud-init)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workloads.osu.ssh import _key, launcher_client_from_env


def test_key_from_variable_or_ssh_dir(tmp_path: Path) -> None:
    (tmp_path / "id_ed25519").write_text("FILE-KEY\n")
    env = {"SPOTBENCH_SSH_DIR": str(tmp_path)}
    assert _key(env, "SPOTBENCH_SSH_PRIVATE_KEY", "id_ed25519") == "FILE-KEY"
    assert _key({**env, "SPOTBENCH_SSH_PRIVATE_KEY": "VAR-KEY"}, "SPOTBENCH_SSH_PRIVATE_KEY",
                "id_ed25519") == "VAR-KEY"
    assert _key(env, "SPOTBENCH_SSH_AUTHORIZED_KEYS", "authorized_keys") == ""


def test_launcher_reads_its_identity_from_the_mounted_dir(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "id_ed25519").write_text("PRIVATE\n")
    work = tmp_path / "work"
    work.mkdir()
    launcher_client_from_env(work, {"peer": ("10.0.0.2", 2222)}, env={"SPOTBENCH_SSH_DIR": str(keys)})
    assert (work / "id_ed25519").read_text().strip() == "PRIVATE"
    with pytest.raises(RuntimeError, match="SPOTBENCH_SSH_PRIVATE_KEY is not set"):
        launcher_client_from_env(work, {"peer": ("10.0.0.2", 2222)}, env={})
