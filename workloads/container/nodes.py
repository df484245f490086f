"""What every member of a `container` group of `nodes: N` learns about the group, as its
command's environment (the names follow dstack's DSTACK_* and SkyPilot's SKYPILOT_*):

    SPOTBENCH_NODE_RANK       this member's rank, 0 … N-1 (0: the leader)
    SPOTBENCH_NUM_NODES       N
    SPOTBENCH_NODE_IPS        every member's address, one per line, in rank order
    SPOTBENCH_LEADER_ADDR     the leader's address        (torchrun --rdzv-endpoint, MASTER_ADDR)
    SPOTBENCH_LEADER_PORT     a port free on the leader   (the rendezvous / MASTER_PORT)
    SPOTBENCH_GPUS_PER_NODE   the group's accelerator_count (0 without GPUs)
    SPOTBENCH_HOSTFILE        a file: `ADDR slots=S` per member (Open MPI, DeepSpeed)
    SPOTBENCH_MPI_HOSTFILE    a file: `ADDR:S` per member (MPICH/hydra `mpiexec -f`)

S = GPUs per node, or 1. The command runs on every member (as with dstack and SkyPilot): an
MPI job starts `mpirun` on rank 0 only. The leader's exit code and metrics decide the
result; a follower that exits non-zero fails the group (its `failed` marker is stored and
`done` stops the others); a follower exiting 0 leaves without storing anything.
"""

from __future__ import annotations

from pathlib import Path

from spotbench.member import MemberContext

PREFIX = "SPOTBENCH_"


def leader(ctx: MemberContext):  # noqa: ANN201 - a Peer
    return next(p for p in ctx.members if p.index == 0)


def node_env(ctx: MemberContext, folder: Path) -> dict[str, str]:
    """The environment above; the two hostfiles are written into `folder`."""
    peers = sorted(ctx.members, key=lambda p: p.index)
    gpus = ctx.accelerator_count
    slots = gpus or 1
    hostfile = folder / "hostfile"
    hostfile.write_text("".join(f"{p.host} slots={slots}\n" for p in peers))
    mpi_hostfile = folder / "mpi_hostfile"
    mpi_hostfile.write_text("".join(f"{p.host}:{slots}\n" for p in peers))
    head = leader(ctx)
    return {
        f"{PREFIX}NODE_RANK": str(ctx.index),
        f"{PREFIX}NUM_NODES": str(len(peers)),
        f"{PREFIX}NODE_IPS": "\n".join(p.host for p in peers),
        f"{PREFIX}LEADER_ADDR": head.host,
        f"{PREFIX}LEADER_PORT": str(head.port),
        f"{PREFIX}GPUS_PER_NODE": str(gpus),
        f"{PREFIX}HOSTFILE": str(hostfile),
        f"{PREFIX}MPI_HOSTFILE": str(mpi_hostfile),
    }
