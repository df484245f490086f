"""`pip install spotbench[gcp]` can preview and tear down: infra/ ships inside the package.

Installs the project (no dependencies: they come from this venv) into a temporary folder and
runs the CLI from elsewhere, with only that install on the path: no source checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                    str(target), str(ROOT)], check=True, capture_output=True, timeout=300)
    return target


def run_cli(installed: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(installed), "SPOTBENCH_STATE_ROOT": str(cwd / "state")}
    return subprocess.run([sys.executable, "-m", "spotbench.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_installed_package_holds_the_program(installed: Path):
    assert (installed / "infra" / "__main__.py").is_file()
    assert (installed / "infra" / "gcp" / "vms.py").is_file()
    assert not (installed / "Pulumi.yaml").exists()  # nothing of the checkout came along


def test_preview_and_teardown_run_from_the_installed_package(installed: Path, tmp_path: Path):
    spec = tmp_path / "s.yaml"
    spec.write_text((ROOT / "examples" / "gcp-osu.yaml").read_text())
    done = run_cli(installed, tmp_path, "preview", str(spec), "--json")
    assert done.returncode == 0, done.stderr
    declared = json.loads(done.stdout[done.stdout.index("["):])
    assert any(d["type"] == "gcp:compute/instance:Instance" for d in declared)
    # the program that ran is the installed one, not this checkout's
    where = subprocess.run(
        [sys.executable, "-c", "import spotbench, infra; print(spotbench.PROJECT_ROOT, infra.__file__)"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(installed)}, capture_output=True, text=True)
    assert where.stdout.split()[0] == str(installed.resolve())
    assert where.stdout.split()[1].startswith(str(installed.resolve()))
    local = tmp_path / "local.yaml"
    local.write_text((ROOT / "examples" / "osu-local.yaml").read_text())
    down = run_cli(installed, tmp_path, "teardown", str(local))
    assert down.returncode == 0, down.stdout + down.stderr
    assert "dry run" in down.stdout


def test_teardowns_pulumi_program_is_the_installed_one(installed: Path, tmp_path: Path):
    """Without a checkout, `pulumi destroy` gets the installed program inline (no Pulumi CLI
    here: the program it would hand over runs under the preview's mocks instead)."""
    spec = tmp_path / "s.yaml"
    spec.write_text((ROOT / "examples" / "gcp-osu.yaml").read_text())
    code = (
        "import pulumi\n"
        "from infra.preview import RecordingMocks, install, run_declarations\n"
        "from infra import destroy as teardown\n"
        "mocks = RecordingMocks(); install(mocks)\n"
        f"pulumi.runtime.set_all_config({{'spotbench:spec': {str(spec)!r}, 'gcp:project': 'p'}})\n"
        "run_declarations(teardown.installed_program)\n"
        "print(teardown.PROJECT_ROOT, len(mocks.of_type('gcp:compute/instance:Instance')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(installed)}, timeout=300)
    assert done.returncode == 0, done.stderr
    root, instances = done.stdout.split()[-2:]
    assert root == str(installed.resolve()) and int(instances) > 0
