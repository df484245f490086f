"""Control's calls over the object-store double while a hostile group floods its own prefix
(issue #38): what `tests/security/test_control_reads.py` asserts and `bench/control_reads.py`
measures.

    figures = run_calls("b", hostile=1000)     # requests and seconds of each control call

A sweep of 3 groups (2 at once) on the in-memory cloud of tests/test_control.py, its results
in `objdouble://<bucket>/hx`: a start tick opens the run and starts g1 and g2; g1 stores its
result honestly; g2 — the attacker, holding its grant — writes `hostile` objects under its own
prefix (`runs/<run>/<g2>.…`, all the grant allows): valid attempt files numbered past its
launches, raw files under its attempt folder, odd top-level names. Then g1's `done`, a second
start tick, g2's `done` and the stop tick are measured: store requests by kind, and seconds
(`latency_s` per request from then on). The first start is measured too, unslowed: with a
budget it sums the history up once (`spent.json`).
`history` closed runs (3 groups, a launch, an end and an attempt each) may precede it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from spotbench import control
from spotbench.auth import Caller
from spotbench.ledger import MAX_LAUNCHES_PER_RUN
from spotbench.results import Result, ResultStore, RunInfo, new_run_id
from spotbench.results.model import SPARE_ATTEMPTS
from spotbench.spec import load_spec
from tests.object_store_double import ObjectStoreDouble, register, requests_of
from tests.test_control import SCHEDULER, MemoryCloud

NOW = datetime(2026, 12, 7, 3, 0, tzinfo=UTC)
TICK = "2026-12-07T03:00:00Z"


class LockedCloud(MemoryCloud):
    """The in-memory cloud with a lock of its own (as the local cloud has), so the figures
    are the store's reads, not the lease's renewals."""

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        yield


def record(run: str, group: str, value: float = 1.0) -> Result:
    return Result(sweep="hx", run=run, group=group, trial=1, workload="osu", metric="latency",
                  value=value, unit="us", cloud="local", machine_type="local",
                  started_at=NOW, ended_at=NOW)


def sweep_on(bucket: str, budget: float | None = None) -> control.Sweep:
    spec = load_spec({"name": "hx", "workload": {"name": "osu"}, "trials": 3, "concurrency": 2,
                      **({"budget": budget} if budget is not None else {})})
    groups = spec.plan()
    store = ResultStore(f"objdouble://{bucket}/hx")
    return control.Sweep(spec=spec, cloud=LockedCloud(groups), store=store, groups=groups)


def write_history(bucket: str, sweep: control.Sweep, runs: int) -> None:
    """`runs` closed nightly runs before NOW, written straight into the double (uncounted)."""
    put = ObjectStoreDouble.put
    for i in range(runs, 0, -1):
        opened = NOW - timedelta(days=i)
        run = new_run_id(opened)
        info = RunInfo(run=run, opened_at=opened, closed_at=opened + timedelta(minutes=30),
                       reason="complete", ticks=[])
        put(bucket, f"hx/runs/{run}/run.json", info.model_dump_json().encode())
        for g in sweep.groups:
            put(bucket, f"hx/runs/{run}/launches/{g.id}.1", opened.isoformat().encode())
            put(bucket, f"hx/runs/{run}/ends/{g.id}.1.json",
                f'{{"at": "{(opened + timedelta(minutes=5)).isoformat()}", "stored": [1]}}'.encode())
            put(bucket, f"hx/runs/{run}/{g.id}.1.jsonl",
                (record(run, g.id).model_dump_json() + "\n").encode())


def flood(bucket: str, run: str, group: str, count: int) -> None:
    """What a hostile group's grant lets it write under `runs/<run>/<group>.`: a third each of
    valid attempt files numbered past what control reads of a group (its launches, at most
    `MAX_LAUNCHES_PER_RUN`, + `SPARE_ATTEMPTS`: within those its files are its own word about
    itself, as its first attempt is), raw files, odd top-level names."""
    line = (record(run, group).model_dump_json() + "\n").encode()
    first = MAX_LAUNCHES_PER_RUN + SPARE_ATTEMPTS + 1
    for k in range(count):
        kind = k % 3
        key = (f"hx/runs/{run}/{group}.{k + first}.jsonl" if kind == 0 else
               f"hx/runs/{run}/{group}.1/raw-{k}" if kind == 1 else
               f"hx/runs/{run}/{group}.z{k}")
        ObjectStoreDouble.put(bucket, key, line)


def _measured(bucket: str, call: Any) -> dict[str, Any]:
    counts = requests_of(bucket)
    counts.clear()
    t0 = time.perf_counter()
    answer = call()
    seconds = time.perf_counter() - t0
    return {"requests": sum(counts.values()), "by_kind": dict(sorted(counts.items())),
            "seconds": round(seconds, 4), "answer": answer}


def run_calls(bucket: str, hostile: int, history: int = 0, latency_s: float = 0.0,
              budget: float | None = None) -> dict[str, dict[str, Any]]:
    """Each measured control call → {requests, by_kind, seconds, answer}."""
    register()
    ObjectStoreDouble.reset(bucket)
    sweep = sweep_on(bucket, budget)
    write_history(bucket, sweep, history)
    g1, g2, _ = (g.id for g in sweep.groups)
    opening = _measured(bucket, lambda: control.start(sweep, SCHEDULER, {"tick": TICK}, now=NOW))
    first = opening["answer"]
    run = first["run"]
    assert sorted(first["started"]) == [g1, g2], first
    sweep.store.write_group(run, g1, [record(run, g1)])
    flood(bucket, run, g2, hostile)
    ObjectStoreDouble.bucket(bucket)["latency_s"] = latency_s
    member = {g.id: Caller("member", g.members[0].name) for g in sweep.groups}
    later = NOW + timedelta(minutes=1)
    out = {
        "first_start": opening,  # unslowed: it also sums the history up once (spent.json)
        "done": _measured(bucket, lambda: control.done(sweep, member[g1], {"group": g1}, now=later)),
        "start": _measured(bucket, lambda: control.start(sweep, SCHEDULER, {"tick": TICK}, now=later)),
        "done_hostile": _measured(bucket, lambda: control.done(sweep, member[g2], {"group": g2},
                                                              now=later)),
        "stop": _measured(bucket, lambda: control.stop(sweep, SCHEDULER, {}, now=later)),
    }
    ObjectStoreDouble.bucket(bucket)["latency_s"] = 0.0
    return out
