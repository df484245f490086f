"""Build spotbench's C OSU harness (`workloads/osu/c/osu_pt2pt.c`) with the venv's `mpicc`.

    python -m workloads.osu.cbuild          # prints the binary's path (make setup runs it)

The binary goes to a cache folder keyed by the source and compiler (`$SPOTBENCH_CACHE` or
`~/.cache/spotbench`), so it is built once per machine, on `make setup` or on first use,
and rebuilt when the source changes. `harness_binary()` returns None when no `mpicc` is
found or the build fails: the launcher then runs the mpi4py harness (same output, slower
per call: it measures Python's call overhead on top of the transport at small sizes).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

log = logging.getLogger("spotbench.osu")

SOURCE = Path(__file__).resolve().parent / "c" / "osu_pt2pt.c"
NAME = "osu_pt2pt"


def mpicc() -> str | None:
    """The mpich wheel's mpicc beside this Python, else one on PATH."""
    beside = Path(sys.executable).with_name("mpicc")
    if beside.exists():
        return str(beside)
    return shutil.which("mpicc")


def cache_dir() -> Path:
    base = os.environ.get("SPOTBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "spotbench")
    return Path(base)


def _key(compiler: str) -> str:
    h = hashlib.sha256(SOURCE.read_bytes())
    h.update(compiler.encode())
    return h.hexdigest()[:16]


def harness_binary(build: bool = True) -> Path | None:
    """The built harness (building it if needed and `build`), or None without a compiler."""
    compiler = mpicc()
    if compiler is None:
        return None
    target = cache_dir() / f"{NAME}-{_key(compiler)}" / NAME
    if target.exists():
        return target
    if not build:
        return None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            out = Path(tmp) / NAME
            proc = subprocess.run([compiler, "-O2", "-o", str(out), str(SOURCE)],
                                  capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                log.warning("building the C OSU harness failed (using mpi4py): %s", proc.stderr[-2000:])
                return None
            os.replace(out, target)  # atomic: concurrent builders leave one good binary
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("building the C OSU harness failed (using mpi4py): %s", exc)
        return None
    return target


def main() -> int:
    path = harness_binary()
    if path is None:
        print("no mpicc (or the build failed): the OSU workload will use the mpi4py harness",
              file=sys.stderr)
        return 0  # not an error: the fallback works everywhere
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
