"""The import contracts of docs/architecture.md, enforced by import-linter in `make test`.

Contracts live in pyproject.toml ([tool.importlinter]): spotbench's layers, only infra/
imports Pulumi, only spotbench.cli calls into infra/ (and infra/ never imports the CLI), only
spotbench.clouds imports cloud SDKs. These tests run `lint-imports`
and check that every spotbench module is covered, so a new module cannot slip past them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
CONTRACTS = {c["id"]: c for c in CONFIG["contracts"]}


def lint_imports(root: Path = ROOT) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([exe, "--no-cache", "--no-logo", "--config", str(root / "pyproject.toml")],
                          cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_import_contracts_are_kept():
    done = lint_imports()
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(CONTRACTS)} kept, 0 broken" in done.stdout  # every contract, none skipped


def test_pulumi_has_no_exceptions():
    """preview's mocks and teardown's `pulumi destroy` live in infra/ (the CLI calls them)."""
    assert not CONTRACTS["pulumi"].get("ignore_imports")


def _top_level() -> set[str]:
    pkg = ROOT / "spotbench"
    names = {p.stem for p in pkg.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in pkg.iterdir() if (p / "__init__.py").exists()}
    return names  # spotbench/prices: the shipped CSVs and the refreshed tables' code


def test_every_spotbench_module_sits_in_a_layer_and_is_kept_from_cloud_sdks():
    layered = {name.strip() for layer in CONTRACTS["layers"]["layers"] for name in layer.split("|")}
    assert _top_level() == layered, "add new spotbench modules to the layers in pyproject.toml"
    sources = set(CONTRACTS["cloud-sdks"]["source_modules"])
    assert {f"spotbench.{n}" for n in _top_level() - {"clouds"}} <= sources
    below_cli = set(CONTRACTS["infra-entry"]["source_modules"])
    assert {f"spotbench.{n}" for n in _top_level() - {"cli"}} <= below_cli


@pytest.mark.parametrize("where, line, contract", [
    ("spotbench/results.py", "import spotbench.plan  # noqa\n", "spotbench layers"),
    ("spotbench/report/cost.py", "import boto3  # noqa\n", "only spotbench.clouds imports cloud SDKs"),
    ("workloads/common.py", "import pulumi  # noqa\n", "only infra/ imports Pulumi"),
    ("spotbench/preview.py", "import pulumi  # noqa\n", "only infra/ imports Pulumi"),
    ("spotbench/ops/teardown.py", "import infra.destroy  # noqa\n", "only spotbench.cli calls into infra/"),
])
def test_a_violation_breaks_the_suite(tmp_path: Path, where: str, line: str, contract: str):
    copy = tmp_path / "tree"
    for top in ("spotbench", "functions", "workloads", "infra"):
        shutil.copytree(ROOT / top, copy / top, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    target = copy / where
    target.write_text(target.read_text() + line)
    done = lint_imports(copy)
    assert done.returncode != 0
    assert f"{contract}" in done.stdout and "BROKEN" in done.stdout, done.stdout
