"""How a member starts its VM's training processes: the `torchrun` command and its job.

Every member runs one torchrun agent: `--nnodes` = the group's workers, `--nproc-per-node`
= `processes_per_vm` (0: one per GPU, else 1), c10d rendezvous at the leader's (member 0)
address and port, `is_host` true on the leader only (it serves the rendezvous store),
`--local-addr` this member's own address (what the other nodes reach it at). torchrun then
sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT for each process.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from spotbench.member import MemberContext
from workloads.torch_cifar.descriptor import TorchParams
from workloads.torch_cifar.files import JOB_ENV


def processes(params: TorchParams) -> int:
    """Training processes on this VM: the spec's, else (pipeline) the 2 stages spread over
    the workers, else one per visible GPU, else 1."""
    if params.processes_per_vm:
        return params.processes_per_vm
    if params.mode == "pipeline":
        return max(1, 2 // params.workers)
    return gpus() or 1


def gpus() -> int:
    """This VM's NVIDIA GPUs (the driver's list; `CUDA_VISIBLE_DEVICES` narrows it), without
    importing torch in the member."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def leader(ctx: MemberContext) -> Any:
    return next(p for p in ctx.members if p.index == 0)


def torchrun_command(ctx: MemberContext, params: TorchParams, nproc: int) -> list[str]:
    head = leader(ctx)
    is_host = "true" if ctx.index == 0 else "false"
    return [
        sys.executable, "-m", "torch.distributed.run",
        f"--nnodes={params.workers}", f"--nproc-per-node={nproc}",
        "--rdzv-backend=c10d", f"--rdzv-endpoint={head.host}:{head.port}",
        f"--rdzv-id={ctx.group}", f"--rdzv-conf=is_host={is_host}",
        f"--local-addr={ctx.me.host}", "--max-restarts=0",
        "-m", "workloads.torch_cifar.train",
    ]


def threads_per_process(ctx: MemberContext, nproc: int) -> int:
    """1 on the local cloud (every member shares this machine's cores), else the VM's
    cores split over its processes (torchrun would set OMP_NUM_THREADS=1)."""
    if ctx.shares_host:
        return 1
    return max(1, (os.cpu_count() or 1) // nproc)


def job_env(ctx: MemberContext, params: TorchParams, out: Path, nproc: int,
            resume: Path | None) -> dict[str, str]:
    threads = threads_per_process(ctx, nproc)
    job = {"params": params.model_dump(), "out": str(out), "leader": ctx.index == 0,
           "resume": str(resume) if resume else None, "threads": threads,
           "gpus": ctx.accelerator_count}
    env = {**os.environ, JOB_ENV: json.dumps(job), "OMP_NUM_THREADS": str(threads)}
    if ctx.shares_host:  # every "VM" is a process here: gloo talks over loopback
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return env
