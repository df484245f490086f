"""A new cloud = its own folder + one line in the registry (`spotbench.facts.CLOUDS`).

The toy cloud in tests/clouds/toy_cloud (facts, provider, its prices) is copied beside a
copy of the tree, the one registry line is added, and spec, plan and estimate accept a
sweep on it — no other file changes. Without the line, the spec refuses the cloud.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOY = Path(__file__).resolve().parent / "toy_cloud"
REGISTRY = Path("spotbench/facts/__init__.py")
LINE = '    "toy": "toycloud.facts",\n'

SCRIPT = """
import json
from spotbench.clouds import get_provider
from spotbench.costs import load_catalog
from spotbench.estimate import estimate
from spotbench.spec import SpecError, load_spec

try:
    spec = load_spec({"name": "toy-sweep", "cloud": "toy", "region": "toy-east",
                      "workload": {"name": "osu"}, "trials": 2,
                      "matrix": {"machine_type": ["toy.small"]}, "toy": {"disk_gb": 40}})
except SpecError as exc:
    print(json.dumps({"refused": str(exc)}))
    raise SystemExit(0)
groups = spec.plan()
est = estimate(spec, load_catalog("toycloud/prices.csv"), records=[])
print(json.dumps({
    "provider": repr(get_provider("toy")),
    "groups": [g.id for g in groups],
    "members": sum(len(g.members) for g in groups),
    "concurrency": spec.max_concurrency,
    "disk": get_provider("toy").disk(spec),
    "run_usd": est.run_usd,
    "items": sorted({line.item for line in est.per_tick}),
    "new": [get_provider("toy").ssh_vias, get_provider("toy").ssh_proxy(spec, "direct"),
            get_provider("toy").access_options(spec, "direct"), get_provider("toy").pulumi_package,
            get_provider("toy").preview_rules("toy:fw", {}), get_provider("toy").preview_properties("toy:vm", {}),
            get_provider("toy").price_region("toy-east"), get_provider("toy").region_of_zone("toy-east")],
}))
"""


def tree(tmp_path: Path, *, register: bool) -> Path:
    copy = tmp_path / "tree"
    for top in ("spotbench", "functions", "workloads", "infra"):
        shutil.copytree(ROOT / top, copy / top, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(TOY, copy / "toycloud", ignore=shutil.ignore_patterns("__pycache__"))
    if register:
        registry = copy / REGISTRY
        text = registry.read_text()
        anchor = '    "aws": "spotbench.facts.aws",\n'
        assert anchor in text
        registry.write_text(text.replace(anchor, anchor + LINE))
    return copy


def run(copy: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=copy, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_toy_cloud_needs_its_folder_and_one_registry_line(tmp_path: Path):
    out = run(tree(tmp_path, register=True))
    assert out["provider"] == "<toy provider>"
    assert len(out["groups"]) == 2 and out["members"] == 4  # osu: launcher + peer, 2 trials
    assert out["concurrency"] is None  # a real cloud's default: every group at once
    assert out["disk"] == ["toy-disk", 40.0]  # from the toy's own spec section
    assert {"compute", "disk"} <= set(out["items"]), out  # priced from the toy's own rows
    assert 0.1 < out["run_usd"] < 0.3, out  # 4 members at $0.04/h spot, the disks, the calls
    # ssh, preview and region rule: the base's defaults, no edit in ops/cli/preview (issue #37)
    assert out["new"] == [[], None, {}, None, [], {}, "toy-east", "toy-east"], out


def test_without_the_registry_line_the_spec_refuses_the_cloud(tmp_path: Path):
    out = run(tree(tmp_path, register=False))
    assert "cloud" in out["refused"] and "'local', 'gcp' or 'aws'" in out["refused"], out
