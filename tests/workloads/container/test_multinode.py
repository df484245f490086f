"""A `container` group of 3 members (`nodes: 3`) on the local cloud: every member runs the
command with its rank, the world size, the leader's address and port and the hostfiles
(workloads/container/nodes.py); a `torchrun` script spans the 3 members (c10d rendezvous
at the leader) and the leader's `mpiexec` runs an mpi4py allreduce over the MPI hostfile.
The leader's metrics are the group's; a follower that fails fails the group."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import yaml

from spotbench.results import ResultStore
from tests.test_e2e_local import cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TORCH_SCRIPT = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
if os.environ["SPOTBENCH_NODE_RANK"] == "0":  # the leader's node (c10d orders nodes its own way)
    print(f"torch_allreduce_sum={t.item():g} sum", flush=True)
    print(f"torch_world_size={dist.get_world_size()} ranks", flush=True)
dist.destroy_process_group()
"""

MPI_SCRIPT = """
from mpi4py import MPI
comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank() + 1)
if comm.Get_rank() == 0:
    print(f"mpi_allreduce_sum={total} sum", flush=True)
    print(f"mpi_world_size={comm.Get_size()} ranks", flush=True)
"""

# what a user writes: every node runs torchrun; rank 0 also starts mpirun over the hostfile
COMMAND = """
set -eu
[ "$(wc -l < "$SPOTBENCH_HOSTFILE")" = "$SPOTBENCH_NUM_NODES" ]
echo "node_rank_seen=$SPOTBENCH_NODE_RANK rank"
"{py}" -m torch.distributed.run --nnodes="$SPOTBENCH_NUM_NODES" --nproc-per-node=1 \\
  --rdzv-backend=c10d --rdzv-endpoint="$SPOTBENCH_LEADER_ADDR:$SPOTBENCH_LEADER_PORT" \\
  --rdzv-id=byo "{torch}"
if [ "$SPOTBENCH_NODE_RANK" = 0 ]; then
  mpiexec -f "$SPOTBENCH_MPI_HOSTFILE" -n "$SPOTBENCH_NUM_NODES" "{py}" "{mpi}"
fi
{tail}
"""


def _spec(tmp_path: Path, tail: str = "") -> Path:
    (tmp_path / "dist.py").write_text(TORCH_SCRIPT)
    (tmp_path / "mpi.py").write_text(MPI_SCRIPT)
    command = COMMAND.format(py=sys.executable, torch=tmp_path / "dist.py", mpi=tmp_path / "mpi.py",
                             tail=tail)
    spec = {"name": "multi", "cloud": "local", "deadline": "3m", "results": str(tmp_path / "results"),
            "workload": {"name": "container", "nodes": 3, "command": ["sh", "-c", command],
                         "env": {"OMP_NUM_THREADS": "1"}}}
    path = tmp_path / "multi.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_container_multinode_torchrun_and_mpi_allreduce_over_three_vms(tmp_path: Path) -> None:
    started = time.monotonic()
    proc = cli(tmp_path, "run", str(_spec(tmp_path)), "--report-dir", str(tmp_path / "report"))
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out
    assert time.monotonic() - started < 170, "the group stops itself when the leader is done"
    records = ResultStore(f"file://{tmp_path}/results").read()
    got = {r.metric: r.value for r in records}
    assert got == {"node_rank_seen": 0.0,  # the leader's metrics decide
                   "torch_allreduce_sum": 6.0, "torch_world_size": 3.0,  # 1 + 2 + 3 over 3 VMs
                   "mpi_allreduce_sum": 6.0, "mpi_world_size": 3.0}, out
    assert not any(r.preempted for r in records)
    logs = tmp_path / "state" / "multi" / "logs"
    members = sorted(p.name for p in logs.glob("multi-*.log"))
    assert len(members) == 3, members  # three local "VMs", each ran the command
    for rank, name in enumerate(members):
        assert f"node_rank_seen={rank} rank" in (logs / name).read_text()


def test_container_multinode_a_failing_follower_fails_the_group(tmp_path: Path) -> None:
    tail = 'if [ "$SPOTBENCH_NODE_RANK" = 2 ]; then echo "boom on node 2" >&2; exit 7; fi\nsleep 120'
    proc = cli(tmp_path, "run", str(_spec(tmp_path, tail)), "--report-dir", str(tmp_path / "report"))
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 3, out  # a failed group
    assert "boom on node 2" in out
    records = ResultStore(f"file://{tmp_path}/results").read()
    failed = [r for r in records if r.metric == "failed"]
    assert failed and failed[0].metadata["exit_code"] == 7


def test_container_multinode_on_a_cloud_vm_is_refused_by_the_runner_check(tmp_path: Path, monkeypatch) -> None:
    """On a cloud VM the runner's `check` runs before the user's image: a `nodes` > 1 group
    is stored as failed with the reason and stopped, the user's image never runs."""
    from spotbench.member import EXIT_OUTSIDE_RUN, MemberContext
    from spotbench.spec import load_spec
    from tests.workloads.tf_mnist.harness import DoneServer
    from workloads.container.__main__ import MULTINODE_ON_CLOUDS, check

    group = load_spec({"name": "m", "cloud": "local", "workload": {
        "name": "container", "nodes": 2, "command": "true"}}).plan()[0]
    url = f"file://{tmp_path}/results"
    store = ResultStore(url)
    run = store.open_run().run
    with DoneServer() as done:
        ctx = MemberContext.for_member(group, group.members[0], cloud="local", results_url=url,
                                       done_url=done.url,
                                       addresses={m.name: ("127.0.0.1", 1) for m in group.members})
        for key, value in ctx.to_env().items():
            monkeypatch.setenv(key, value)
        assert check(tmp_path) == EXIT_OUTSIDE_RUN
        assert [c["group"] for c in done.calls] == [group.id]
    failed = [r for r in store.read(run) if r.metric == "failed"]
    assert failed and failed[0].metadata["failure"] == MULTINODE_ON_CLOUDS
    assert not (tmp_path / "run").exists()  # the user's step is never reached
