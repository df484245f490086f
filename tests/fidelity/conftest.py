"""Fixtures of the boot-fidelity tests (marker `fidelity`).

The Pulumi mocks are installed by importing tests/infra/conftest.py's recorder before any
program module; the lab needs root (network namespaces, mounts), `cloud-init` and
`shellcheck` (installed by `make setup-dev` through scripts/ensure_boot_tools.sh).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.infra.conftest import MOCKS  # noqa: F401 - installs the mocks first


def need_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: run `bash scripts/ensure_boot_tools.sh` "
                    "(part of `make setup-dev`)")


@pytest.fixture(scope="module")
def lab_dir() -> Iterator[Path]:
    """A temporary folder the image's uid can traverse (pytest's tmp is 0700 root)."""
    if os.geteuid() != 0:
        pytest.skip("the boot lab needs root (network namespaces, mounts, setpriv)")
    need_tools("ip", "unshare", "setpriv", "nft", "iptables", "iptables-restore")
    path = Path(tempfile.mkdtemp(prefix="spotbench-fidelity-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)
