"""The functions' requirements come from pyproject.toml and cover what the functions import."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from infra.requirements import FUNCTION_CORE, dist_name, requirements_txt

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

# what a deployed function loads on each cloud: the adapter, the driver, the caller check
ENTRY = {
    "gcp": ["functions.main", "functions.app", "spotbench.clouds.gcp.gce", "spotbench.clouds.gcp.identity",
            "spotbench.control", "gcsfs"],
    "aws": ["functions.lambda_handler", "functions.app", "spotbench.clouds.aws.ec2",
            "spotbench.clouds.aws.identity", "spotbench.control", "s3fs"],
}

# imported when installed, skipped when not (try/except ImportError in the importer)
OPTIONAL = {
    "jwt": "spotbench.clouds.gcp.identity: PyJWT errors, for JWK-set certificates only (Google serves x509)",
    "grpc_status": "google.api_core.exceptions: rich gRPC errors",
    "wrapt": "opentelemetry instrumentation, loaded by google libraries when present",
    "bcrypt": "cryptography's ssh key loader, for encrypted keys only",
}


def _closure(dists: set[str]) -> set[str]:
    """`dists` and everything they require (installed metadata, extras left out)."""
    seen: set[str] = set()
    todo = list(dists)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [dist_name(r) for r in reqs if "extra ==" not in r]
    return seen


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
def test_requirements_are_pyprojects_lines(cloud: str):
    lines = requirements_txt(cloud).split()
    declared = PROJECT["dependencies"] + PROJECT["optional-dependencies"][cloud]
    assert set(lines) <= set(declared)
    assert set(PROJECT["optional-dependencies"][cloud]) <= set(lines)
    assert {dist_name(x) for x in lines} >= set(FUNCTION_CORE)


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
def test_every_module_a_function_loads_is_installed_by_its_requirements(cloud: str):
    code = (
        "import importlib, json, sys\n"
        f"for m in {ENTRY[cloud]!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    top = set(json.loads(out.stdout.splitlines()[-1]))
    ours = {"spotbench", "functions", "workloads", "infra", "tests"}
    third_party = {m for m in top - ours - set(sys.stdlib_module_names) - set(OPTIONAL)
                   if not m.startswith("_")}
    providers = metadata.packages_distributions()
    installed = _closure({dist_name(r) for r in requirements_txt(cloud).split()})
    missing = sorted(
        m for m in third_party
        if m in providers and not {re.sub(r"[-_.]+", "-", d).lower() for d in providers[m]} & installed
    )
    assert not missing, f"{cloud} functions import {missing}, which requirements.txt does not install"
