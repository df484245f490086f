"""The Lambda layer: the functions' third-party dependencies, for the Lambda runtime.

Built by the program itself: `infra/aws/functions.py` asks `ensure()` for the layer of the
current requirements (`infra.requirements.requirements_txt("aws")`, derived from
pyproject.toml) when `pulumi up` (or a Pulumi preview) runs it, so no deploy ships functions
without their dependencies. The folder is keyed by the digest of the requirements, the
runtime and the platform, in the user cache (`$SPOTBENCH_CACHE`, else
`$XDG_CACHE_HOME/spotbench`, else `~/.cache/spotbench`: `lambda-layers/<digest>/python`),
built once (≈ 30 s of pip) and reused until pyproject.toml changes; a file lock keeps two
builds apart. Under the offline preview's mocks nothing is built (nothing is deployed).

`python infra/aws/layer.py` (what `make lambda-layer` runs; as a script it needs only the base
install, not Pulumi) builds it ahead and prints the folder. pip installs binary wheels for
`RUNTIME_PYTHON` on x86_64 Linux. boto3 is resolved together with s3fs, so the layer's
boto3/botocore are the versions aiobotocore pins (the runtime's own boto3 would not match the
layer's botocore); the layer comes first on the runtime's `sys.path`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from infra.requirements import requirements_txt

RUNTIME_PYTHON = "3.12"  # infra.aws.functions.RUNTIME = python3.12
PLATFORM = "manylinux2014_x86_64"
BUILD_COMMAND = "make lambda-layer (or: python infra/aws/layer.py)"


class LayerBuildError(RuntimeError):
    """pip could not build the layer: the deploy stops (functions without it fail at import)."""


def pip_args(target: Path, requirements: Path, *, python_version: str | None = RUNTIME_PYTHON) -> list[str]:
    """`pip install` arguments for the layer (`python_version=None`: for this interpreter)."""
    args = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--target", str(target), "--only-binary=:all:", "-r", str(requirements)]
    if python_version:
        args += ["--platform", PLATFORM, "--implementation", "cp",
                 "--python-version", python_version]
    return args


def cache_root() -> Path:
    base = os.environ.get("SPOTBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "spotbench")
    return Path(base) / "lambda-layers"


def folder(requirements: str | None = None, python_version: str = RUNTIME_PYTHON) -> Path:
    """Where the layer of `requirements` lives (its `python/` inside), built or not."""
    reqs = requirements_txt("aws") if requirements is None else requirements
    key = hashlib.sha256("\0".join((reqs, python_version, PLATFORM)).encode()).hexdigest()[:16]
    return cache_root() / key


def _marker(layer: Path) -> Path:
    """Written last, beside the folder (not in the layer): a folder without it is a build
    that did not finish."""
    return layer.parent / f"{layer.name}.complete"


def built(layer: Path) -> bool:
    return _marker(layer).exists()


def ensure(requirements: str | None = None, python_version: str = RUNTIME_PYTHON) -> Path:
    """The layer folder of `requirements`, built now if it is not yet (holds `python/`)."""
    reqs = requirements_txt("aws") if requirements is None else requirements
    layer = folder(reqs, python_version)
    layer.parent.mkdir(parents=True, exist_ok=True)
    with open(layer.parent / f"{layer.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if built(layer):
            return layer
        shutil.rmtree(layer, ignore_errors=True)
        (layer / "python").mkdir(parents=True)
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
            fh.write(reqs)
        try:
            out = subprocess.run(pip_args(layer / "python", Path(fh.name),
                                          python_version=python_version),
                                 capture_output=True, text=True, timeout=1800)
        finally:
            os.unlink(fh.name)
        if out.returncode != 0:
            raise LayerBuildError(
                f"could not build the Lambda layer in {layer} (pip exit {out.returncode}): "
                f"{out.stderr.strip()[-1500:]}\nfix the cause, then run {BUILD_COMMAND} "
                "and `pulumi up` again")
        _marker(layer).write_text(reqs)
    return layer


if __name__ == "__main__":
    print(ensure() / "python")
