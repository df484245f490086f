"""The Lambda layer: the functions' third-party dependencies, for the Lambda runtime.

`python infra/aws/layer.py [DIR]` (what `make lambda-layer` runs; as a script it needs only
the base install, not Pulumi, which `python -m infra.aws.layer` would import) installs
`infra.requirements.requirements_txt("aws")` (derived from pyproject.toml) into `DIR/python` (default `build/lambda-layer`) as
binary wheels for `RUNTIME` on x86_64 Linux. boto3 is resolved together with s3fs, so the
layer's boto3/botocore are the versions aiobotocore pins (the runtime's own boto3 would not
match the layer's botocore); the layer comes first on the runtime's `sys.path`.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from spotbench import PROJECT_ROOT
from infra.requirements import requirements_txt

RUNTIME_PYTHON = "3.12"  # infra.aws.functions.RUNTIME = python3.12
PLATFORM = "manylinux2014_x86_64"
DEFAULT_DIR = PROJECT_ROOT / "build" / "lambda-layer"


def pip_args(target: Path, requirements: Path, *, python_version: str | None = RUNTIME_PYTHON) -> list[str]:
    """`pip install` arguments for the layer (`python_version=None`: for this interpreter)."""
    args = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--target", str(target), "--only-binary=:all:", "-r", str(requirements)]
    if python_version:
        args += ["--platform", PLATFORM, "--implementation", "cp",
                 "--python-version", python_version]
    return args


def build(layer_dir: Path = DEFAULT_DIR) -> Path:
    """Install the layer into `layer_dir/python`; returns that folder."""
    target = layer_dir / "python"
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write(requirements_txt("aws"))
    subprocess.run([*pip_args(target, Path(fh.name)), "--upgrade"], check=True)
    return target


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR))
