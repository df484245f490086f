"""A new workload = its package under `workloads/` + one line in `workloads/registry.py`
(docs/adding-a-workload.md), and nothing outside them names a workload.

The toy in tests/workloads/toy_workload/toy (descriptor, entrypoint, report section) is copied
into a copy of the tree with the one registry line added: the spec accepts it, the plan
names its members, the images table and the firewall port come from its descriptor, and the
report carries its section — no other file changes. Without the line the spec refuses it.
And no module of spotbench/, infra/ or functions/ imports a workload's package or compares
a value with a workload's name (its behaviour would then live outside the package).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from workloads.registry import WORKLOADS

ROOT = Path(__file__).resolve().parents[2]
TOY = Path(__file__).resolve().parent / "toy_workload" / "toy"
REGISTRY = Path("workloads/registry.py")

SCRIPT = """
import json, sys
from spotbench.spec import SpecError, load_spec
try:
    spec = load_spec({"name": "toy-sweep", "cloud": "local", "workload": {"name": "toy", "n": 7},
                      "matrix": {"members": [1, 3]}, "results": sys.argv[1]})
except SpecError as exc:
    print(json.dumps({"refused": str(exc)}))
    raise SystemExit(0)
from pathlib import Path
from spotbench.images import image_name
from spotbench.report import write_report
from spotbench.results import Result, ResultStore, utcnow
from spotbench.workload_registry import get_workload

groups = spec.plan()
store = ResultStore(sys.argv[1])
run = store.open_run().run
for g in groups:
    store.write_group(run, g.id, [Result(sweep=g.sweep, run=run, group=g.id, trial=1,
        params=g.params.model_dump(), workload="toy", metric="counted", value=7.0, unit="items",
        cloud="local", machine_type="local", started_at=utcnow(), ended_at=utcnow())])
paths = write_report(sys.argv[1], Path(sys.argv[2]))
print(json.dumps({
    "members": [[m.name.rsplit("-", 1)[-1] for m in g.members] for g in groups],
    "image": image_name("toy", False),
    "port": get_workload("toy").port,
    "report": paths.markdown.read_text(),
}))
"""


def tree(tmp_path: Path, *, register: bool) -> Path:
    copy = tmp_path / "tree"
    for top in ("spotbench", "functions", "workloads", "infra"):
        shutil.copytree(ROOT / top, copy / top, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(TOY, copy / "workloads" / "toy", ignore=shutil.ignore_patterns("__pycache__"))
    if register:
        registry = copy / REGISTRY
        text = registry.read_text()
        anchor = "WORKLOADS: dict[str, Workload] = {\n"
        assert anchor in text
        registry.write_text(text.replace(anchor, "from workloads.toy.descriptor import WORKLOAD as TOY\n"
                                         + anchor + "    TOY.name: TOY,\n"))
    return copy


def run(copy: Path, tmp_path: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, f"file://{tmp_path}/results", str(tmp_path / "report")],
                          cwd=copy, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_toy_workload_needs_its_package_and_one_registry_line(tmp_path: Path):
    out = run(tree(tmp_path, register=True), tmp_path)
    assert out["members"] == [["n0"], ["n0", "n1", "n2"]]
    assert out["image"] == "toy-cpu" and out["port"] == 4100
    assert "## Toy counts" in out["report"] and "toy counted 14 items" in out["report"]


def test_without_the_registry_line_the_spec_refuses_the_workload(tmp_path: Path):
    out = run(tree(tmp_path, register=False), tmp_path)
    assert "toy" in out["refused"] and "workload" in out["refused"]


def _names_of_workloads() -> tuple[set[str], set[str]]:
    names = set(WORKLOADS)
    packages = {w.module.split(".")[1] for w in WORKLOADS.values()}
    return names, packages


def _findings(path: Path, names: set[str], packages: set[str]) -> list[str]:
    found = []
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for m in modules:
            parts = m.split(".")
            if parts[0] == "workloads" and len(parts) > 1 and parts[1] in packages:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports {m}")
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                for const in ast.walk(side):
                    if isinstance(const, ast.Constant) and const.value in names:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: compares with {const.value!r}")
    return found


def test_nothing_outside_the_workloads_names_one():
    names, packages = _names_of_workloads()
    found = []
    for top in ("spotbench", "infra", "functions"):
        for path in sorted((ROOT / top).rglob("*.py")):
            found += _findings(path, names, packages)
    assert not found, "a workload's behaviour lives in its package (ask its descriptor):\n" + "\n".join(found)


def test_the_check_finds_an_import_and_a_comparison(tmp_path: Path):
    names, packages = _names_of_workloads()
    bad = ROOT / "spotbench" / "_probe_for_test.py"
    try:
        bad.write_text("from workloads.tf_mnist.descriptor import GRPC_PORT\n"
                       "def f(w):\n    return w == 'osu'\n")
        found = _findings(bad, names, packages)
    finally:
        bad.unlink()
    assert any("imports workloads.tf_mnist.descriptor" in f for f in found)
    assert any("compares with 'osu'" in f for f in found)
