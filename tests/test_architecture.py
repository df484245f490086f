"""The import contracts of docs/architecture.md, enforced by import-linter in `make test`.

Contracts live in pyproject.toml ([tool.importlinter]): spotbench's layers, each cloud's
package independent of the others, only infra/ imports Pulumi, only spotbench.cli calls into
infra/ (and infra/ never imports the CLI), only spotbench.clouds imports cloud SDKs. Every
import counts, function-local and TYPE_CHECKING ones too. These tests run `lint-imports`,
check that every spotbench module is covered, so a new module cannot slip past them, and
that no import cycle exists among the project's packages.
"""

from __future__ import annotations

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
