"""What the local control plane costs on top of the benchmark itself.

1. `sweep_over_direct`: wall time of a local sweep (`run_local`: functions server, cron
   tick, start/done chain, per-group processes) divided by the summed wall time of the same
   workload runs launched directly (launcher + peer processes, no control plane), measured
   in the same run, for examples/osu-local.yaml at OSU's default iteration counts; best of
   two alternating rounds each. Target ≤ 1.10.
2. `exit_to_stopped_p95_s`: time from a workload process's exit to its instance reading
   STOPPED in the local cloud, p95 over 20 instances. Target ≤ 1 s.
Prints JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from spotbench.clouds.base import State
from spotbench.clouds.local.cloud import LocalCloud, LocalInstanceSpec
from spotbench.localrun.net import free_ports
from spotbench.localrun.runner import run_local
from spotbench.member import MemberContext
from spotbench.results import ResultStore
from spotbench.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
_DEMO = load_spec(ROOT / "examples" / "osu-local.yaml")
# The demo's sweep with OSU's own iteration counts (the spec defaults): a real measurement,
# not the demo's shortened one, so fixed costs weigh what they weigh in practice.
SPEC = _DEMO.model_copy(update={"workload": type(_DEMO.workload)(max_size=_DEMO.workload.max_size)})


DONE = threading.Event()


class _Ok(BaseHTTPRequestHandler):
    """Answers `done` like the real function and flags it, so the bench stops the pair the
    way the control plane does (SIGTERM right after done) instead of waiting for teardown."""

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        DONE.set()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


def direct_runs(tmp: Path) -> float:
    """Sum of wall times of each trial's launcher+peer run without the control plane."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    store = ResultStore(f"file://{tmp}/direct")
    store.open_run()
    total = 0.0
    bin_dir = str(Path(sys.executable).parent)
    for group in SPEC.plan():
        ports = free_ports(len(group.members))
        addresses = {m.name: ("127.0.0.1", p) for m, p in zip(group.members, ports)}
        procs = []
        DONE.clear()
        t0 = time.perf_counter()
        for member in reversed(group.members):  # peer first, like a VM already booted
            ctx = MemberContext.for_member(group, member, addresses=addresses, cloud="local",
                                           results_url=store.url, token="t", zone="local",
                                           done_url=f"http://127.0.0.1:{server.server_port}/done")
            env = {**os.environ, **ctx.to_env(), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
            procs.append(subprocess.Popen([sys.executable, "-m", "workloads.osu"], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        peer, launcher = procs
        while launcher.poll() is None and not DONE.wait(0.01):
            pass
        for proc in (launcher, peer):
            proc.terminate()
        launcher.wait(timeout=300)
        total += time.perf_counter() - t0
        peer.wait(timeout=30)
    server.shutdown()
    return total


def sweep_run(tmp: Path) -> float:
    spec = SPEC.model_copy(update={"results": f"file://{tmp}/sweep"})
    t0 = time.perf_counter()
    outcome = run_local(spec, state_root=tmp / "state", grace_s=5)
    wall = time.perf_counter() - t0
    if outcome.incomplete:
        raise SystemExit(f"sweep incomplete: {outcome.incomplete}")
    return wall


def exit_to_stopped(tmp: Path, samples: int = 20) -> list[float]:
    cloud = LocalCloud(tmp / "exit.db", grace_s=1, log_dir=tmp / "logs")
    delays = []
    for i in range(samples):
        stamp = tmp / f"exit-{i}"
        code = f"import time; open({str(stamp)!r}, 'w').write(repr(time.time()))"
        labels = {"bench": f"e{i}"}
        cloud.deploy([LocalInstanceSpec(name=f"e{i}", labels=labels,
                                        command=[sys.executable, "-c", code], env={})])
        cloud.start(labels)
        while True:
            inst = cloud.query(labels)[0]
            if inst.state == State.STOPPED and stamp.exists():
                delays.append(max(0.0, time.time() - float(stamp.read_text())))
                break
            if inst.state == State.STOPPED:  # stopped, stamp not yet visible: retry read
                continue
            time.sleep(0.005)
    return sorted(delays)


ROUNDS = 2  # alternate direct and sweep runs; the best of each damps the machine's noise


def main() -> None:
    directs, sweeps = [], []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for i in range(ROUNDS):
            directs.append(direct_runs(tmp / f"d{i}"))
            sweeps.append(sweep_run(tmp / f"s{i}"))
        delays = exit_to_stopped(tmp)
    direct, sweep = min(directs), min(sweeps)
    p95 = delays[int(0.95 * (len(delays) - 1))]
    print(json.dumps({
        "rounds": ROUNDS,
        "direct_sum_s": [round(x, 2) for x in directs],
        "sweep_s": [round(x, 2) for x in sweeps],
        "sweep_over_direct": round(sweep / direct, 3),
        "exit_to_stopped_p95_s": round(p95, 3),
        "exit_to_stopped_max_s": round(delays[-1], 3),
        "targets": {"sweep_over_direct_max": 1.10, "exit_to_stopped_p95_max_s": 1.0},
    }, indent=2))


if __name__ == "__main__":
    main()
