"""The Lambda layer resolves for the runtime (python3.12, x86_64) and, installed with the
same requirements, is all the handler needs: it imports with nothing but the layer and the
function archive's code on the path (no venv, no site-packages)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from infra.aws.layer import pip_args
from infra.function_source import SOURCE_DIRS
from spotbench import PROJECT_ROOT
from infra.requirements import requirements_txt

pytestmark = pytest.mark.fidelity


def _names(requirements: list[str]) -> set[str]:
    return {r.split(";")[0].split("[")[0].split(">")[0].split("<")[0].split("=")[0].strip().lower()
            for r in requirements}


def test_aws_extra_and_layer_carry_s3fs():
    extras = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert {"boto3", "s3fs"} <= _names(extras["aws"])  # s3:// results on a member VM
    assert {"boto3", "s3fs"} <= _names(requirements_txt("aws").split())


@pytest.fixture(scope="module")
def resolved(tmp_path_factory) -> dict[str, str]:
    """What pip resolves for the layer (`make lambda-layer`'s arguments, dry run): name →
    version. The one step here that needs the package index (~30 s)."""
    tmp = tmp_path_factory.mktemp("layer")
    reqs = tmp / "requirements.txt"
    reqs.write_text(requirements_txt("aws"))
    report = tmp / "report.json"
    out = subprocess.run([*pip_args(tmp / "layer", reqs), "--dry-run", "--report", str(report)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return {_norm(i["metadata"]["name"]): i["metadata"]["version"]
            for i in json.loads(report.read_text())["install"]}


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def test_aws_layer_resolves_for_the_lambda_runtime(resolved):
    assert {"boto3", "botocore", "s3fs", "aiobotocore", "pydantic-core"} <= set(resolved)
    # one botocore for boto3 and aiobotocore: the pair pip chose is the pair aiobotocore pins
    assert resolved["boto3"].split(".")[:2] == resolved["botocore"].split(".")[:2]


def test_aws_layer_packages_are_all_the_handler_needs(resolved, tmp_path):
    """The resolved distributions (as installed here, for this interpreter) linked into a
    layer folder; the handler and the s3 filesystem import with only that folder and the
    function archive's code on the path."""
    layer = tmp_path / "layer" / "python"
    layer.mkdir(parents=True)
    for name in resolved:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{name} (in the layer) is not installed here: cannot check imports")
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            link = layer / top
            if not link.exists():
                link.symlink_to(Path(dist.locate_file(top)))
    code = tmp_path / "code"  # what the function archive holds
    for top in SOURCE_DIRS:
        shutil.copytree(PROJECT_ROOT / top, code / top,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    probe = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
             "import functions.lambda_handler, s3fs, boto3, fsspec\n"
             "fs = fsspec.filesystem('s3', anon=True)\n"
             "print(functions.lambda_handler.__file__)\n")
    # -S: no site-packages (the venv's packages are invisible), -I: no PYTHONPATH/user site
    ran = subprocess.run([sys.executable, "-S", "-I", "-c", probe, str(code), str(layer)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.strip().startswith(str(code))
