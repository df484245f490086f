"""scripts/ensure_chromium.sh (`make chromium`, part of `make setup-dev`): installs the
Debian package the first-screen report tests render with, only when it is missing."""

from __future__ import annotations

from tests.test_setup_scripts import _shim, box  # noqa: F401 - the fixture

INSTALL = "apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core DEBIAN_FRONTEND=noninteractive"


def test_installs_chromium_when_missing(box):  # noqa: F811
    proc, calls = box("ensure_chromium.sh")
    assert proc.returncode == 0, proc.stderr
    assert calls == ["apt-get update -qq DEBIAN_FRONTEND=", INSTALL]
    assert "ensure_chromium: installing chromium" in proc.stdout


def test_does_nothing_when_chromium_is_there(box, tmp_path):  # noqa: F811
    _shim(tmp_path / "bin", "chromium", "exit 0")
    proc, calls = box("ensure_chromium.sh")
    assert proc.returncode == 0 and calls == []


def test_setup_dev_runs_it():
    from tests.test_setup_scripts import ROOT

    makefile = (ROOT / "Makefile").read_text()
    setup_dev = next(ln for ln in makefile.splitlines() if ln.startswith("setup-dev:"))
    assert "chromium" in setup_dev.split("##")[0]
    assert "scripts/ensure_chromium.sh" in makefile
