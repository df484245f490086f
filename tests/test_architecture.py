"""The import contracts of docs/architecture.md, enforced by import-linter in `make test`.

Contracts live in pyproject.toml ([tool.importlinter]): spotbench's layers, each cloud's
package independent of the others, only infra/ imports Pulumi, only spotbench.cli calls into
infra/ (and infra/ never imports the CLI), only spotbench.clouds imports cloud SDKs. Every
import counts, function-local and TYPE_CHECKING ones too. These tests run `lint-imports`,
check that every spotbench module is covered, so a new module cannot slip past them, and
that no import cycle exists among the project's packages.
"""

from __future__ import annotations

import ast
import json
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
    ("spotbench/results/__init__.py", "import spotbench.plan  # noqa\n", "spotbench layers"),
    ("spotbench/report/cost.py", "import boto3  # noqa\n", "only spotbench.clouds imports cloud SDKs"),
    ("workloads/common.py", "import pulumi  # noqa\n", "only infra/ imports Pulumi"),
    ("spotbench/preview.py", "import pulumi  # noqa\n", "only infra/ imports Pulumi"),
    ("spotbench/ops/teardown.py", "import infra.destroy  # noqa\n", "only spotbench.cli calls into infra/"),
    # TYPE_CHECKING and function-local imports count too
    ("spotbench/plan.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import spotbench.spec  # noqa\n",
     "spotbench layers"),
    ("spotbench/member.py", "def _later():\n    import spotbench.clouds  # noqa\n", "spotbench layers"),
    ("spotbench/clouds/gcp/orphans.py", "def _later():\n    import spotbench.clouds.aws.ec2  # noqa\n",
     "each cloud's package imports no other cloud's"),
    ("spotbench/report/data.py", "from spotbench.clouds import get_provider  # noqa\n",
     "report and policy read what a cloud is"),
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


# ---- import cycles ----------------------------------------------------------------------
def import_cycles(root: Path = ROOT) -> list[list[str]]:
    """Every import cycle among the project's packages, as the strongly connected groups of
    modules (grimp's graph: function-local and TYPE_CHECKING imports count, since hoisting
    either turns a cycle into an import error)."""
    code = (
        "import json, grimp\n"
        "g = grimp.build_graph('spotbench', 'functions', 'workloads', 'infra',"
        " exclude_type_checking_imports=False, cache_dir=None)\n"
        "print(json.dumps({m: sorted(g.find_modules_directly_imported_by(m)) for m in g.modules}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    graph: dict[str, list[str]] = json.loads(done.stdout)
    return strongly_connected(graph)


def strongly_connected(graph: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's groups of more than one module (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(graph.get(start, ())))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_strongly_connected_finds_a_cycle_and_nothing_else():
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [], "e": ["e2"], "e2": []}
    assert strongly_connected(graph) == [["a", "b", "c"]]


def test_a_lazy_import_cycle_is_found(tmp_path: Path):
    copy = tmp_path / "tree"
    for top in ("spotbench", "functions", "workloads", "infra"):
        shutil.copytree(ROOT / top, copy / top, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "spotbench" / "facts" / "base.py"
    target.write_text(target.read_text() + "\n\ndef _later():\n    import spotbench.spec  # noqa\n")
    cycles = import_cycles(copy)
    assert any({"spotbench.facts.base", "spotbench.spec"} <= set(c) for c in cycles), cycles


def test_no_import_cycles():
    cycles = import_cycles()
    assert not cycles, "import cycles (break them: facts below, operations above):\n" + "\n".join(
        " ↔ ".join(c) for c in cycles)


# ---- private modules stay in their package -------------------------------------------------
TOPS = ("spotbench", "functions", "workloads", "infra")


def _module_of(root: Path, path: Path) -> tuple[str, str]:
    """(module, the package it sits in) of a source file under `root`."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def _imported(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The dotted names an import statement reaches (`from a import b` reaches a and a.b)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: from the importing module's package up
        anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        base = ".".join(anchor + ([base] if base else []))
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def _owner(root: Path, holder: list[str]) -> str | None:
    """The package a private name belongs to: `holder` (the dotted path before the private
    part) when it is a package, its package when it is a module; None outside the project."""
    if holder[0] not in TOPS:
        return None
    where = root.joinpath(*holder)
    return ".".join(holder if where.is_dir() else holder[:-1])


def private_imports(root: Path = ROOT) -> list[str]:
    """Imports of a private module or name (`_x`, not dunders) from outside the package that
    owns it: another top-level package's, another subpackage's, or a library's (a library's
    private modules are not its API). A package's own `_helpers` used by its modules and
    subpackages are fine, so `spotbench._private` (spotbench's
    own) serves every spotbench module, and no module of functions/, workloads/ or infra/.
    Read with ast: grimp squashes a library to its top-level name, hiding `lib._private`."""
    found = []
    for top in TOPS:
        for path in sorted((root / top).rglob("*.py")):
            module, package = _module_of(root, path)
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                for name in _imported(node, package):
                    parts = name.split(".")
                    private = next((i for i, p in enumerate(parts) if p.startswith("_")
                                    and not p.startswith("__")), None)
                    if private is None or private == 0:
                        continue
                    owner = _owner(root, parts[:private])
                    if owner is None or not (module == owner or module.startswith(owner + ".")):
                        found.append(f"{path.relative_to(root)}:{node.lineno}: {name}")
    return sorted(set(found))


def test_no_module_imports_another_packages_private_module():
    found = private_imports()
    assert not found, ("private modules/names used outside their package (give them a public "
                       "home in the owning package):\n" + "\n".join(found))


@pytest.mark.parametrize("where, line, bad", [
    ("workloads/container/report.py", "from spotbench.report._doc import Para\n", True),
    ("spotbench/ops/status.py", "from spotbench.clouds.gcp._gce_status import short_zone\n", True),
    ("spotbench/localrun/http_server.py", "from functions_framework._http import create_server\n", True),
    ("spotbench/ops/status.py", "import spotbench.report._doc as doc\n", True),
    ("functions/app.py", "from spotbench._private import write_private\n", True),
    # a package's own private helpers, in its modules and subpackages
    ("spotbench/report/tf.py", "from spotbench.report._doc import Para\n", False),
    ("spotbench/report/tf.py", "from ._doc import Para\n", False),
    ("spotbench/clouds/local/db.py", "from spotbench._private import trusted_path\n", False),
    ("workloads/osu/bridge.py", "from workloads.osu.agent import _FRAME\n", False),
])
def test_a_private_import_across_packages_is_found(tmp_path: Path, where: str, line: str, bad: bool):
    for owned in ("spotbench/report/_doc.py", "spotbench/clouds/gcp/_gce_status.py",
                  "spotbench/_private.py", "workloads/osu/agent.py"):
        (tmp_path / owned).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / owned).write_text("")
    for top in TOPS:
        (tmp_path / top).mkdir(exist_ok=True)
    (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / where).write_text(line)
    assert bool(private_imports(tmp_path)) is bad, private_imports(tmp_path)
