"""Requests/s and latency of the `done` and `stop` functions on loopback.

Serves the functions with the real functions-framework server over a local sweep whose
groups are deployed but stopped (so every call does the full work: authenticate, query the
cloud, stop the group — a no-op on stopped instances — and answer), then sends a bounded
number of requests from a few client threads. Prints JSON; targets: ≥ 200 req/s, p99 ≤ 50 ms.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from spotbench.auth.local import member_token, scheduler_token
from spotbench.clouds.local.cloud import LocalCloud, LocalInstanceSpec
from spotbench.localrun.server import FunctionsServer
from spotbench.clouds.local.state import LocalState
from spotbench.spec import load_spec

REQUESTS = 400
THREADS = 4


def measure(url: str, body: dict, token: str) -> dict:
    session_by_thread: dict[int, requests.Session] = {}

    def one(_: int) -> float:
        import threading

        session = session_by_thread.setdefault(threading.get_ident(), requests.Session())
        t0 = time.perf_counter()
        resp = session.post(url, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        resp.raise_for_status()
        return time.perf_counter() - t0

    for i in range(20):  # warm-up
        one(i)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        latencies = sorted(pool.map(one, range(REQUESTS)))
    wall = time.perf_counter() - t0
    return {
        "requests": REQUESTS,
        "req_per_s": round(REQUESTS / wall, 1),
        "p50_ms": round(statistics.median(latencies) * 1e3, 2),
        "p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))] * 1e3, 2),
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        spec = load_spec({"name": "bench", "workload": {"name": "osu"}, "trials": 4})
        groups = spec.plan()
        state = LocalState("bench", root)
        cloud = LocalCloud(state.db_path, grace_s=1)
        cloud.deploy([LocalInstanceSpec(name=m.name, labels=g.member_labels(m),
                                        command=[sys.executable, "-c", "pass"], env={})
                      for g in groups for m in g.members])
        env = {"SPOTBENCH_CLOUD": "local", "SPOTBENCH_SPEC": spec.model_dump_json(),
               "SPOTBENCH_RESULTS_URL": f"file://{root}/results", "SPOTBENCH_STATE_DIR": str(state.dir)}
        secret = state.secret()
        with FunctionsServer(env, root / "functions.log") as server:
            member = groups[0].members[0].name
            done = measure(server.url + "/done", {"group": groups[0].id}, member_token(secret, member))
            stop = measure(server.url + "/stop", {"groups": [groups[1].id], "reason": "bench"},
                           scheduler_token(secret))
    print(json.dumps({
        "done": done, "stop": stop,
        "targets": {"req_per_s_min": 200, "p99_ms_max": 50},
        "meets_targets": all(r["req_per_s"] >= 200 and r["p99_ms"] <= 50 for r in (done, stop)),
    }, indent=2))


if __name__ == "__main__":
    main()
