"""What a deploy ships, built as `pulumi up` builds it, and a clean place to run it.

- `zip_of(archive)`: the zip the Pulumi engine makes of a declared `pulumi.AssetArchive`
  (each key a path in the zip; a `FileAsset` the file's bytes, a `StringAsset` its text,
  a nested archive under its key) — what the GCP provider uploads as the functions' source
  object and the AWS provider sends as a Lambda's code. `unpack` extracts it into an empty
  folder, as the platform's build (GCP) or runtime (`/var/task`, AWS) does.
- `runtime_python(version)`: an interpreter of the platform runtime's version (python3.12)
  when this machine has one, else the running one (`mismatch` says so).
- `clean_venv(requirements, python)`: a fresh venv (no system site-packages, nothing of
  the dev venv) holding only `requirements` — what Cloud Functions' Python buildpack
  installs from the archive's requirements.txt. Built once per (requirements, interpreter)
  digest under the user cache (`$SPOTBENCH_CACHE`, else `$XDG_CACHE_HOME/spotbench`, else
  `~/.cache/spotbench`: `deploy-venvs/<digest>`), under a file lock so parallel workers
  build it once; ≈ 25-40 s the first time against this machine's package index, then free.
(The Lambda layer is the program's own build, `infra.aws.layer.ensure`, cached the same way.)
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pulumi

from workloads.osu.cbuild import cache_dir

COMPLETE = ".complete"  # written last: a folder without it is a build that did not finish


def _entries(archive: pulumi.Archive, prefix: str = "") -> Iterator[tuple[str, bytes]]:
    if isinstance(archive, pulumi.FileArchive):
        root = Path(archive.path)
        for path in sorted(root.rglob("*")):
            if path.is_file():
                yield prefix + str(path.relative_to(root)), path.read_bytes()
        return
    if not isinstance(archive, pulumi.AssetArchive):
        raise TypeError(f"cannot build a {type(archive).__name__} (a {archive!r})")
    for key, item in archive.assets.items():
        if isinstance(item, pulumi.FileAsset):
            yield prefix + key, Path(item.path).read_bytes()
        elif isinstance(item, pulumi.StringAsset):
            yield prefix + key, item.text.encode()
        elif isinstance(item, pulumi.Archive):
            yield from _entries(item, prefix + key.rstrip("/") + "/")
        else:
            raise TypeError(f"{key}: cannot build a {type(item).__name__}")


def zip_of(archive: pulumi.Archive) -> bytes:
    """The archive as the engine zips it (entries in the order declared)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for name, data in _entries(archive):
            zf.writestr(name, data)
    return buf.getvalue()


def unpack(data: bytes, dest: Path) -> Path:
    """Extract a zip into `dest`, which must be empty (or absent)."""
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise ValueError(f"{dest} is not empty")
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        zf.extractall(dest)
    return dest


@dataclass(frozen=True)
class Python:
    path: str
    version: str  # "3.12"
    mismatch: bool  # not the runtime's version: the running interpreter stood in


def _version_of(path: str) -> str | None:
    try:
        out = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def runtime_python(version: str) -> Python:
    """An interpreter of `version` (PATH, then pyenv's versions), else this one."""
    candidates = [shutil.which(f"python{version}") or ""]
    pyenv = Path.home() / ".pyenv" / "versions"
    candidates += sorted(str(p) for p in pyenv.glob(f"{version}.*/bin/python{version}"))
    for path in filter(None, candidates):
        if _version_of(path) == version:
            return Python(path, version, False)
    here = "%d.%d" % sys.version_info[:2]
    return Python(sys.executable, here, here != version)


@contextmanager
def _locked(folder: Path, key: str) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{key}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _pip_failed(what: str, out: subprocess.CompletedProcess) -> RuntimeError:
    return RuntimeError(f"{what} failed (exit {out.returncode}): {out.stderr[-3000:]}")


def clean_venv(requirements: str, python: Python) -> Path:
    """A venv holding only `requirements` (cached by digest); returns its folder."""
    key = _digest("venv", requirements, python.path, python.version)
    root = cache_dir() / "deploy-venvs"
    target = root / key
    with _locked(root, key):
        if (target / COMPLETE).exists():
            return target
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run([python.path, "-m", "venv", str(target)], check=True, timeout=300)
        reqs = target / "requirements.txt"
        reqs.write_text(requirements)
        out = subprocess.run([str(target / "bin" / "python"), "-m", "pip", "install", "--quiet",
                              "--disable-pip-version-check", "-r", str(reqs)],
                             capture_output=True, text=True, timeout=900)
        if out.returncode != 0:
            raise _pip_failed(f"pip install into {target}", out)
        (target / COMPLETE).write_text(requirements)
    return target
