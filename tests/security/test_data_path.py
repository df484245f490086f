"""Attack: what a group writes under its own prefix is data, never trusted (issue 24).

A member (or a user's container) may write anything at `runs/<run>/<group>.…`, the paths its
identity may write. Each test writes what an attacker would there, then drives control, the
budget, the store's readers and the catalogue as a sweep does (control over an in-memory
cloud, the real file store): nothing raises into control, the budget stays a cap, other
groups are untouched, and every skipped file or line is named in a warning.
"""

from __future__ import annotations

import json
import logging
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from spotbench import control
from spotbench.auth import Caller
from spotbench.budget import check_budget
from spotbench.costs import load_catalog
from spotbench.history.catalog import Catalog
from spotbench.history.market import market
from spotbench.history.trends import history
from spotbench.results import MAX_RECORDS, Result, ResultStore
from spotbench.spec import load_spec
from tests.test_control import SCHEDULER, MemoryCloud, running_groups
from workloads.container import metrics

pytestmark = pytest.mark.security

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def gcp_sweep(tmp_path: Path, budget: float | None = None, trials: int = 3) -> control.Sweep:
    data = {"name": "dp", "cloud": "gcp", "zone": "us-central1-a", "workload": {"name": "osu"},
            "matrix": {"machine_type": ["n1-standard-2"]}, "trials": trials, "deadline": "9m",
            "spot": False, "concurrency": 1}
    if budget is not None:
        data["budget"] = budget
    spec = load_spec(data)
    groups = spec.plan()
    return control.Sweep(spec=spec, cloud=MemoryCloud(groups), store=ResultStore(f"file://{tmp_path}/res"),
                         groups=groups)


def record(run: str, group: str, **fields) -> dict:
    """One record as JSON, as an honest member stores it, with `fields` changed."""
    now = datetime.now(UTC)
    return json.loads(Result(sweep="dp", run=run, group=group, trial=1, workload="osu",
                             metric="latency", value=1.0, unit="us", cloud="gcp",
                             machine_type="n1-standard-2", started_at=now - timedelta(seconds=10),
                             ended_at=now).model_dump_json()) | fields


def write(sweep: control.Sweep, run: str, name: str, lines: list[str | dict]) -> str:
    """What a group's identity may write: any object named runs/<run>/<group>.…"""
    path = sweep.store.path("runs", run, name)
    body = "".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines)
    sweep.store.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    sweep.store.fs.pipe_file(path, body.encode())
    return path


def done(sweep: control.Sweep, group, now: datetime | None = None) -> dict:
    return control.done(sweep, Caller("member", group.members[0].name), {"group": group.id}, now=now)


# ---- 1. a non-finite value, malformed files: refused where produced, skipped where read ----

def test_a_non_finite_value_is_refused_where_it_is_produced() -> None:
    problems: list[str] = []
    assert metrics.from_stdout("throughput=1e999 ops/s\nlatency=2.5 us\n", problems) == [
        metrics.Metric("latency", 2.5, "us")]
    assert problems and "finite" in problems[0]
    for line in ('{"metric": "x", "value": 1e999}', '{"metric": "x", "value": NaN}',
                 '{"metric": "x", "value": ' + "9" * 400 + "}",
                 '{"metric": "' + "m" * 300 + '", "value": 1}'):
        with pytest.raises(ValueError):
            metrics.from_json_line(line)
    now = datetime.now(UTC)
    base = dict(sweep="s", run="r", group="g", trial=1, workload="w", metric="m", unit="u",
                cloud="local", machine_type="local", started_at=now, ended_at=now)
    for bad in ({"value": float("inf")}, {"value": float("nan")}, {"value": 1.0, "cost_usd": -1.0},
                {"value": 1.0, "cost_usd": float("nan")}, {"value": 1.0, "metric": "m" * 300}):
        with pytest.raises(ValidationError):
            Result(**{**base, **bad})


def _ledger_marker(r) -> bool:
    """The record control writes for a launch that stored nothing valid (its ledger's word)."""
    return r.metric == "preempted" and r.metadata.get("marker") == "from the launch ledger"


def test_a_poisoned_prefix_never_stops_control(tmp_path: Path, caplog) -> None:
    """`1e999` stored as null, `<group>.x.jsonl`, a bad `started_at`, a non-JSON line: with a
    budget, every later start and done still answers, and the readers name what they skip."""
    sweep = gcp_sweep(tmp_path, budget=10.0)
    run = control.start(sweep, SCHEDULER, now=T0)["run"]
    a, b = sweep.groups[0], sweep.groups[1]
    poisoned = [
        write(sweep, run, f"{a.id}.1.jsonl", [record(run, a.id, value=None)]),  # what 1e999 became
        write(sweep, run, f"{a.id}.x.jsonl", [record(run, a.id)]),
        write(sweep, run, f"{a.id}.2.jsonl", [record(run, a.id, started_at="yesterday")]),
        write(sweep, run, f"{a.id}.3.jsonl", ["{not json", record(run, a.id, cost_usd=float("nan"))]),
    ]
    with caplog.at_level(logging.WARNING, logger="spotbench.results"):
        out = done(sweep, a, T0 + timedelta(minutes=1))
        assert out["started"] == [a.id]  # nothing valid stored: a is retried
        assert control.start(sweep, SCHEDULER, {"run": run}, now=T0 + timedelta(minutes=2))
        # nothing the group wrote counts; its launch got the ledger's marker attempt (#28)
        assert all(_ledger_marker(r) for r in sweep.store.read(run))
        assert all(att.preempted for att in sweep.store.attempts(run))
        assert sweep.store.completed_groups(run) == set()
    warned = "\n".join(r.getMessage() for r in caplog.records)
    for path in poisoned:
        assert path in warned, f"{path} skipped without a word"
    # and a's next, honest attempt counts
    write(sweep, run, f"{a.id}.4.jsonl", [record(run, a.id)])
    assert sweep.store.completed_groups(run) == {a.id}


def test_malformed_control_files_are_skipped(tmp_path: Path, caplog) -> None:
    """The run ledger, flags and launches as control reads them: a bad one is skipped."""
    sweep = gcp_sweep(tmp_path)
    run = control.start(sweep, SCHEDULER, now=T0)["run"]
    a = sweep.groups[0]
    write(sweep, run, f"flags/{a.id}.1.json", ["[1, 2]"])
    write(sweep, run, f"launches/{a.id}.2", ["not a time"])
    write(sweep, "20240101T000000Z", "run.json", ["{"])
    with caplog.at_level(logging.WARNING, logger="spotbench.results"):
        assert sweep.store.flags(run) == {}
        assert [r.run for r in sweep.store.runs()] == [run]
        done(sweep, a, T0 + timedelta(minutes=1))
    assert "not a time" in caplog.text and "run.json" in caplog.text


# ---- 2. forged times do not contaminate other groups --------------------------------------

def test_forged_times_do_not_flag_other_groups(tmp_path: Path) -> None:
    sweep = gcp_sweep(tmp_path)
    run = control.start(sweep, SCHEDULER, now=T0)["run"]
    a, b, c = sweep.groups
    epoch, far = datetime(1970, 1, 1, tzinfo=UTC), datetime(2999, 1, 1, tzinfo=UTC)
    write(sweep, run, f"{a.id}.1.jsonl", [record(run, a.id, started_at=epoch.isoformat(),
                                                 ended_at=far.isoformat())])
    assert done(sweep, a, T0 + timedelta(minutes=1))["started"] == [b.id]
    write(sweep, run, f"{b.id}.1.jsonl", [record(run, b.id)])
    assert done(sweep, b, T0 + timedelta(minutes=2))["started"] == [c.id]
    write(sweep, run, f"{c.id}.1.jsonl", [record(run, c.id)])
    done(sweep, c, T0 + timedelta(minutes=3))
    assert sweep.store.flags(run) == {}
    assert sweep.store.completed_groups(run) == {a.id, b.id, c.id}
    assert sweep.store.runs()[-1].reason == "complete"


# ---- 3. the budget does not trust reported costs -------------------------------------------

@pytest.mark.parametrize("cost", [-1000.0, float("nan"), "NaN"])
def test_a_reported_cost_cannot_lift_the_budget(tmp_path: Path, cost) -> None:
    """One group of 2 × n1-standard-2 (0.095 $/h) costs up to 0.0317 USD (9 min + 60 s boot).
    A budget of 0.033 runs a; a's launch (1 minute: 0.0032) + b's most (0.0317) is over."""
    sweep = gcp_sweep(tmp_path, budget=0.033)
    sweep.budget_check = lambda *args: check_budget(*args, prices=load_catalog())
    run = control.start(sweep, SCHEDULER, now=T0)["run"]
    a, b = sweep.groups[0], sweep.groups[1]
    line = json.dumps(record(run, a.id, billed_s=60.0)).replace('"cost_usd": null',
                                                                f'"cost_usd": {json.dumps(cost)}')
    write(sweep, run, f"{a.id}.1.jsonl", [line])
    out = done(sweep, a, T0 + timedelta(seconds=30))
    assert out["started"] == [] and [r["group"] for r in out["refused"]] == [g.id for g in sweep.groups]
    assert "spent 0.0032" in out["refused"][0]["reason"]
    assert running_groups(sweep) == set()


# ---- 7. bounded sizes per attempt -----------------------------------------------------------

def test_an_attempt_of_too_many_lines_is_refused_with_bounded_memory(tmp_path: Path, caplog) -> None:
    sweep = gcp_sweep(tmp_path, budget=10.0)
    sweep.budget_check = lambda *args: check_budget(*args, prices=load_catalog())
    run = control.start(sweep, SCHEDULER, now=T0)["run"]
    a = sweep.groups[0]
    line = json.dumps(record(run, a.id, cost_usd=0.0))
    path = write(sweep, run, f"{a.id}.1.jsonl", [line] * (2 * MAX_RECORDS))
    tracemalloc.start()
    try:
        with caplog.at_level(logging.WARNING, logger="spotbench.results"):
            out = done(sweep, a, T0 + timedelta(minutes=1))
            peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out["started"] == [a.id]  # a's oversized attempt does not count: a is retried
    assert path in caplog.text and "at most" in caplog.text
    assert peak < 64 << 20, f"done took {peak >> 20} MiB for one oversized attempt"
    with Catalog(sweep.store.url) as cat:  # the catalogue skips it too (keeps only the marker)
        assert cat.query("SELECT count(*) FROM records WHERE metric <> 'preempted'").rows == [(0,)]


def member_run(tmp_path: Path, monkeypatch, workload: str = "osu"):
    """A sweep with one run open, and its first group's member recording into the store as
    a member does (`WorkloadRun`): (sweep, run, its WorkloadRun)."""
    from spotbench.member import MemberContext
    from workloads.common import WorkloadRun

    sweep = gcp_sweep(tmp_path, trials=1)
    run = control.start(sweep, SCHEDULER, now=T0)["run"]
    group = sweep.groups[0]
    monkeypatch.setenv("SPOTBENCH_RUN", run)
    ctx = MemberContext(sweep="dp", group=group.id, trial=1, workload=workload, params={},
                        name=group.members[0].name, role=group.members[0].role, index=0, rank=0,
                        cloud="gcp", machine_type="n1-standard-2", results_url=sweep.store.url,
                        members=[])
    return sweep, run, WorkloadRun(ctx, sweep.store)


def test_the_member_stops_recording_at_the_bound(tmp_path: Path, monkeypatch) -> None:
    sweep, run, wr = member_run(tmp_path, monkeypatch)
    for i in range(MAX_RECORDS + 50):
        wr.record("v", float(i), "us")
    wr.record("inf", float("inf"), "us")
    assert len(wr.records) == MAX_RECORDS and wr.dropped == 51
    wr.finish()
    stored = sweep.store.read(run)
    assert len(stored) == MAX_RECORDS and stored[0].metadata["dropped_records"] == 51


# ---- 9. the catalogue keeps flagged attempts apart --------------------------------------------

def test_history_and_market_leave_flagged_attempts_out(tmp_path: Path) -> None:
    sweep = gcp_sweep(tmp_path, trials=2)
    run = control.start(sweep, SCHEDULER, now=T0)["run"]
    a, b = sweep.groups
    size = {"size_bytes": 8}
    write(sweep, run, f"{a.id}.1.jsonl", [record(run, a.id, value=1000.0, zone="us-central1-a",
                                                 metadata=size)])
    write(sweep, run, f"{b.id}.1.jsonl", [record(run, b.id, value=1.0, zone="us-central1-a",
                                                 metadata=size)])
    sweep.store.flag(run, a.id, 1, "2 groups ran at once (max_concurrency 1)")
    with Catalog(sweep.store.url) as cat:
        (row,) = market(cat)
        hist = history(cat)
        flagged = cat.query("SELECT preempted, contaminated FROM records WHERE \"group\" = ?", [a.id]).rows
    assert flagged == [(True, "2 groups ran at once (max_concurrency 1)")]
    assert row["completed"] == 1 and row["contaminated"] == 1 and row["preempted"] == 0
    latency = [s for s in hist.series if s.metric == "latency"]
    assert latency and all(v == 1.0 for s in latency for v in s.values)


def test_metadata_readers_compute_with_is_typed(tmp_path: Path) -> None:
    """`member_types: 5` or a dict `placement` in a record broke the report and re-pricing
    (TypeError): such a record is not valid, so no reader sees it."""
    from spotbench.costs import annotate
    from spotbench.report.data import frame

    sweep = gcp_sweep(tmp_path, trials=1)
    run = control.start(sweep, SCHEDULER, now=T0)["run"]
    (a,) = sweep.groups
    for meta in ({"member_types": 5}, {"placement": {"x": 1}}, {"members": "many"},
                 {"size_bytes": -1}):
        write(sweep, run, f"{a.id}.1.jsonl", [record(run, a.id, metadata=meta),
                                              record(run, a.id, metadata={"size_bytes": 8})])
        rows = sweep.store.read(run)
        assert [r.metadata for r in rows] == [{"size_bytes": 8}]
        assert len(frame(annotate(rows, load_catalog()))) == 1


def test_one_malformed_line_is_no_duckdb_error_in_query_history_market(tmp_path: Path, caplog) -> None:
    """The CLI over a store where one group wrote one bad line beside good ones."""
    from tests.history.conftest import cli_json, spec_for

    root = tmp_path / "results"
    store = ResultStore(f"file://{root}")
    good = record("r1", "g-t1", metadata={"size_bytes": 8})
    store.fs.makedirs(store.path("runs", "r1"), exist_ok=True)
    for line in ('{"sweep": "synthetic", "value": [1, {"x"', '{"value": 1e999}', "\x00\xff"):
        Path(store.path("runs", "r1", "g-t1.1.jsonl")).write_text(
            json.dumps(good) + "\n" + line + "\n")
        spec = spec_for(tmp_path, root)
        with caplog.at_level(logging.WARNING):
            assert cli_json("query", str(spec), "SELECT metric, value FROM records") == [
                {"metric": "latency", "value": 1.0}]
            cli_json("history", str(spec))
            cli_json("market", str(spec))
        assert "g-t1.1.jsonl:2" in caplog.text
