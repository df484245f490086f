"""The TF cluster of one run group: TF_CONFIG from the members, threads, waiting for peers.

No TensorFlow import here: `TF_CONFIG` and the thread settings must be in place before
TensorFlow starts.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time

from spotbench.member import MemberContext, Peer

ROLES_PS = ("chief", "ps", "worker")
THREADS_ENV = "SPOTBENCH_TF_THREADS"
# which of its VM's worker tasks a process is (0: the member's own process; the member
# starts 1..processes_per_vm-1 with this set, see `tasks.py`)
LOCAL_TASK_ENV = "SPOTBENCH_TF_LOCAL_TASK"


def processes(ctx: MemberContext) -> int:
    """TF worker tasks per worker member (`processes_per_vm`)."""
    return int(ctx.params.get("processes_per_vm", 1))


def local_task() -> int:
    """This process's task among its member's (0 unless started by `tasks.start`)."""
    return int(os.environ.get(LOCAL_TASK_ENV) or 0)


def _addresses(peer: Peer, role: str, per_vm: int) -> list[str]:
    """The "host:port" of each TF task of `peer`: one, or `per_vm` for a worker."""
    if role != "worker":
        return [f"{peer.host}:{peer.port}"]
    ports = (peer.port, *peer.extra_ports)
    if len(ports) < per_vm:
        raise ValueError(f"processes_per_vm {per_vm}: member {peer.name} has {len(ports)} "
                         "service port(s); its cloud must hand it one per task")
    return [f"{peer.host}:{port}" for port in ports[:per_vm]]


def cluster_spec(ctx: MemberContext) -> dict[str, list[str]]:
    """{"chief": [...], "ps": [...], "worker": [...]} with "host:port", ordered by task
    index; a worker member's `processes_per_vm` tasks are indexes member × n … member × n + n-1."""
    strategy = ctx.params.get("strategy", "parameter_server")
    roles = ROLES_PS if strategy == "parameter_server" else ("worker",)
    cluster: dict[str, list[str]] = {}
    for role in roles:
        peers = sorted(ctx.peers(role), key=lambda p: p.index)
        if [p.index for p in peers] != list(range(len(peers))):
            raise ValueError(f"{role} indexes must be 0..n-1, got {[p.index for p in peers]}")
        if peers:
            cluster[role] = [a for p in peers for a in _addresses(p, role, processes(ctx))]
    if strategy == "parameter_server":
        missing = [r for r in ROLES_PS if r not in cluster]
        if missing or len(cluster["chief"]) != 1:
            raise ValueError(
                f"parameter_server needs one chief, ≥1 ps and ≥1 worker; members have {sorted(cluster)}"
            )
    elif "worker" not in cluster:
        raise ValueError("multi_worker_mirrored needs ≥1 worker member")
    unexpected = {p.role for p in ctx.members} - set(roles)
    if unexpected:
        raise ValueError(f"strategy {strategy} has no role(s) {sorted(unexpected)}")
    return cluster


def task_index(ctx: MemberContext, local: int = 0) -> int:
    """The TF task index of this member's `local`-th task."""
    return ctx.index * processes(ctx) + local if ctx.role == "worker" else ctx.index


def task_count(ctx: MemberContext) -> int:
    """Every TF task of the group (chief, ps and workers × processes_per_vm)."""
    return sum(len(addresses) for addresses in cluster_spec(ctx).values())


def tf_config(ctx: MemberContext, local: int | None = None) -> dict:
    """The TF_CONFIG of this process: the whole cluster plus its own task."""
    local = local_task() if local is None else local
    return {"cluster": cluster_spec(ctx), "task": {"type": ctx.role, "index": task_index(ctx, local)}}


def records_results(ctx: MemberContext) -> bool:
    """True for the task that records, finishes and calls done (chief, or worker task 0)."""
    if ctx.params.get("strategy", "parameter_server") == "parameter_server":
        return ctx.role == "chief"
    return ctx.role == "worker" and ctx.index == 0 and local_task() == 0


def threads(ctx: MemberContext) -> tuple[int, int]:
    """(intra-op, inter-op) threads per task: intra 1 on the local cloud (many tasks share few
    cores), 0 (= TensorFlow picks, all cores) on a VM of its own; `SPOTBENCH_TF_THREADS`
    overrides. Inter-op is never below 2: with one inter-op thread the parameter-server
    worker deadlocks (a step waits on a variable read that needs a second thread)."""
    value = os.environ.get(THREADS_ENV)
    intra = int(value) if value else (1 if ctx.shares_host else 0)
    return intra, (max(2, intra) if intra else 0)


def prepare_env(ctx: MemberContext) -> dict:
    """Put TF_CONFIG in the environment (and quiet TF's C++ logs unless asked otherwise)."""
    config = tf_config(ctx)
    os.environ["TF_CONFIG"] = json.dumps(config)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return config


def wait_for_peers(addresses: list[str], timeout: float = 600.0, interval: float = 0.5) -> None:
    """Block until every "host:port" accepts TCP connections (peers' VMs boot at different
    times); raise TimeoutError naming the ones that never answered."""
    deadline = time.monotonic() + timeout
    pending = list(addresses)
    while pending:
        still = []
        for address in pending:
            host, port = address.rsplit(":", 1)
            try:
                with socket.create_connection((host, int(port)), timeout=2):
                    pass
            except OSError:
                still.append(address)
        pending = still
        if pending and time.monotonic() > deadline:
            raise TimeoutError(
                f"TF tasks at {', '.join(pending)} did not start within {timeout:.0f}s: "
                "check those members' logs (firewall on the service port?)"
            )
        if pending:
            time.sleep(interval)


def reclaim_sigterm() -> None:
    """Put Python's SIGTERM disposition back after TensorFlow replaced it.

    With the coordination service (multi-worker strategies) TensorFlow installs its own C++
    SIGTERM handler (its preemption notifier), which swallows the signal: the recording
    task's `preemptible()` handler never runs and the other tasks never exit. Re-installing
    whatever Python has on record (our handler, or the default: exit) undoes that."""
    current = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, current if current is not None else signal.SIG_DFL)
