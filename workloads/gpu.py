"""A GPU member's check, before it trains, that the NVIDIA driver reaches its container.

A container sees its VM's GPUs only through what the boot hands it: the device nodes
(`/dev/nvidia0`…, `/dev/nvidiactl`, `/dev/nvidia-uvm`: COS's `--device` flags, AWS's
`--gpus all`) and the driver's user-space library `libcuda.so.1` on the loader's path (COS
installs the driver in /var/lib/nvidia, the unit mounts it executable at
/usr/local/nvidia/lib64, which the GPU images put on `LD_LIBRARY_PATH`; the NVIDIA container
toolkit of `--gpus all` puts it in the system's library folder). Without either, PyTorch and
TensorFlow fall back to the CPU without a word: a GPU benchmark that measures a CPU. So a
member of a group with GPUs checks both and fails its attempt naming what is missing
(docs/platform.md, "Running GPUs on Container-Optimized OS").
"""

from __future__ import annotations

import ctypes
import os
import stat
from pathlib import Path

LIBRARY = "libcuda.so.1"
SHARED_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm")


def devices(count: int) -> list[str]:
    """The nodes a container with `count` GPUs needs: one per GPU, then the shared ones."""
    return [f"/dev/nvidia{i}" for i in range(count)] + list(SHARED_DEVICES)


def device_problems(count: int) -> list[str]:
    out = []
    for path in devices(count):
        try:
            mode = os.stat(path).st_mode
        except OSError:
            out.append(f"{path} is missing (the container was not given the device)")
            continue
        if not stat.S_ISCHR(mode):
            out.append(f"{path} is not a character device")
    return out


def library_path() -> str | None:
    """Where this process mapped `libcuda.so.1` from (after `load_library`), else None."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    return next((line.split()[-1] for line in maps.splitlines()
                 if line.rstrip().endswith(f"/{LIBRARY}")), None)


def library_problem() -> str | None:
    """None when the loader finds and maps the driver's library, else why not (a folder
    not on LD_LIBRARY_PATH, a noexec mount: `failed to map segment`)."""
    try:
        ctypes.CDLL(LIBRARY)
    except OSError as exc:
        return (f"{LIBRARY} does not load ({exc}); LD_LIBRARY_PATH="
                f"{os.environ.get('LD_LIBRARY_PATH', '')!r}")
    return None


def check(count: int) -> tuple[list[str], str]:
    """(problems, a line saying what was found) for a member with `count` GPUs."""
    problems = device_problems(count)
    lib = library_problem()
    if lib:
        problems.append(lib)
    found = (f"GPU driver: {LIBRARY} from {library_path() or '-'}, devices "
             f"{' '.join(d for d in devices(count) if os.path.exists(d))}")
    return problems, found
