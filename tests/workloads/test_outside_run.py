"""A cloud member started outside an open run (GCE's creation boot, an EC2 capacity
restart) or after its run's deadline exits EXIT_OUTSIDE_RUN at once and writes nothing;
the VM's unit then powers the VM off (tests/fidelity boots that end to end)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from spotbench.member import EXIT_OUTSIDE_RUN, MemberContext, Peer
from spotbench.results import ResultStore, utcnow
from workloads.common import WorkloadRun

ROOT = Path(__file__).resolve().parents[2]


def _ctx(store: ResultStore, workload: str, role: str, params: dict) -> MemberContext:
    members = [Peer(name=f"g-{r}", role=r, index=0, rank=i, host="127.0.0.1", port=1)
               for i, r in enumerate(["launcher", "peer"] if workload == "osu" else ["chief", "ps"])]
    return MemberContext(sweep="s", group="g", trial=1, cloud="gcp", workload=workload,
                         params={"name": workload, **params}, name=f"g-{role}", role=role,
                         index=0, rank=0, members=members, results_url=store.url,
                         done_url="http://127.0.0.1:9/done", deadline_s=1800)


def _start(ctx: MemberContext, module: str) -> tuple[int, float, str]:
    env = {**os.environ, **ctx.to_env(), "PYTHONPATH": str(ROOT)}
    env.pop("SPOTBENCH_RUN", None)
    t = time.monotonic()
    out = subprocess.run([sys.executable, "-m", module], env=env, capture_output=True,
                         text=True, timeout=120)
    return out.returncode, time.monotonic() - t, out.stdout + out.stderr


def _files(store: ResultStore) -> list[Path]:
    return sorted(p for p in Path(store.root).rglob("*") if p.is_file())


@pytest.mark.parametrize("workload, role, module, params", [
    ("osu", "peer", "workloads.osu", {}),
    ("osu", "launcher", "workloads.osu", {}),
    ("tf-mnist", "ps", "workloads.tf_mnist", {"strategy": "parameter_server", "ps": 1, "workers": 0}),
], ids=["osu-peer", "osu-launcher", "tf-ps"])
def test_no_open_run_exits_at_once_writing_nothing(tmp_path, workload, role, module, params):
    store = ResultStore(f"file://{tmp_path / 'results'}")
    old = store.open_run(utcnow() - timedelta(days=1))
    store.close_run(old.run, "deadline")  # a closed run must never be written into
    before = _files(store)
    rc, seconds, out = _start(_ctx(store, workload, role, params), module)
    assert rc == EXIT_OUTSIDE_RUN, out
    assert "no run is open" in out and seconds < 60
    assert _files(store) == before


def test_past_the_deadline_exits_at_once_writing_nothing(tmp_path):
    store = ResultStore(f"file://{tmp_path / 'results'}")
    store.open_run(utcnow() - timedelta(hours=2))  # still open, but 2 h > 30 min deadline
    before = _files(store)
    rc, _, out = _start(_ctx(store, "osu", "peer", {}), "workloads.osu")
    assert rc == EXIT_OUTSIDE_RUN and "past the group's deadline" in out, out
    assert _files(store) == before


def test_a_closed_run_is_never_the_current_one(tmp_path):
    store = ResultStore(f"file://{tmp_path / 'results'}")
    store.close_run(store.open_run().run, "done")
    with pytest.raises(RuntimeError, match="no run is open"):
        WorkloadRun(_ctx(store, "osu", "launcher", {}))
