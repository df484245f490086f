"""The results store: whole files, nothing overwritten, run ledger, raw output beside."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from spotbench.results import Result, ResultStore, run_id_lengths, utcnow


def rec(group: str, value: float, run: str = "r1", preempted: bool = False) -> Result:
    now = utcnow()
    return Result(sweep="s", run=run, group=group, trial=1, workload="osu", metric="latency",
                  value=value, unit="us", cloud="local", machine_type="local",
                  started_at=now, ended_at=now, preempted=preempted)


@pytest.fixture(params=["file", "memory"])
def store(request, tmp_path: Path) -> ResultStore:
    if request.param == "file":
        return ResultStore(f"file://{tmp_path}/results")
    import fsspec

    fsspec.filesystem("memory").store.clear()
    return ResultStore(f"memory://results-{tmp_path.name}")


def test_a_second_write_never_overwrites(store: ResultStore) -> None:
    first = store.write_group("r1", "g", [rec("g", 1.0, preempted=True)])
    second = store.write_group("r1", "g", [rec("g", 2.0)])
    assert first != second and first.endswith("g.1.jsonl") and second.endswith("g.2.jsonl")
    assert sorted(r.value for r in store.read()) == [1.0, 2.0]
    assert store.completed_groups("r1") == {"g"}
    assert {a.group for a in store.attempts("r1")} == {"g"}


def test_preempted_only_is_not_completed(store: ResultStore) -> None:
    store.write_group("r1", "g", [rec("g", 1.0, preempted=True)])
    assert store.completed_groups("r1") == set()


def test_raw_output_goes_beside_its_attempt(store: ResultStore) -> None:
    path = store.write_group("r1", "g", [rec("g", 1.0)])
    raw = store.write_raw("r1", "g", "osu_latency.txt", "# OSU\n", attempt=1)
    assert raw.rsplit("/", 2)[-2] == Path(path).name.removesuffix(".jsonl")
    assert store.fs.cat_file(raw) == b"# OSU\n"


def test_local_writes_leave_no_temporary_files(tmp_path: Path) -> None:
    store = ResultStore(f"file://{tmp_path}")
    store.write_group("r1", "g", [rec("g", float(i)) for i in range(100)])
    names = [p.name for p in tmp_path.rglob("*") if p.is_file()]
    assert names == ["g.1.jsonl"]
    assert len(store.read("r1")) == 100


def test_run_ledger(store: ResultStore) -> None:
    assert store.current_run() is None
    run = store.open_run()
    assert store.open_run().run == run.run  # a repeated tick reuses the open run
    store.close_run(run.run, "deadline")
    closed = store.runs()[-1]
    assert closed.closed_at is not None and closed.reason == "deadline"
    assert store.current_run() is None
    now = run.opened_at
    again = store.open_run(now=now)  # opened in the same second as the closed one
    assert again.run != run.run  # still a new id
    # what the AWS member policy matches a run segment by (infra/aws/identity.py)
    assert sorted({len(run.run), len(again.run)}) == list(run_id_lengths())
    first, second = now + timedelta(seconds=5), now + timedelta(seconds=20)
    store.record_launch(run.run, "g", first)
    store.record_launch(run.run, "g", second)
    assert store.launch_count(run.run, "g") == 2
    assert store.launches(run.run, "g") == [first, second]  # each attempt's start, in order
    assert store.last_launch(run.run, "g") == second and store.launches(run.run, "h") == []


def test_a_flag_counts_for_the_attempt_its_path_names(store: ResultStore) -> None:
    run = store.open_run().run
    store.flag(run, "a", 1, "ran beside 2 groups (limit 1)")
    assert store.flags(run) == {"a.1": "ran beside 2 groups (limit 1)"}
    # a flag file whose body names another attempt than its path: not believed
    forged = store.path("runs", run, "flags", "a.2.json")
    store.fs.pipe_file(forged, b'{"group": "b", "attempt": 1, "reason": "forged"}')
    assert store.flags(run) == {"a.1": "ran beside 2 groups (limit 1)"}
