"""Attack: no record the model accepts breaks a reader (issue 38).

A member may store any record `Result` validates. Hypothesis draws records over the model's
FULL valid range, from the model's own bounds (`MAX_VALUE`, `MIN_VALUE`, `MAX_COST_USD`,
`MAX_BILLED_S`, `MAX_TRIAL`, name lengths, years 1 to 9999 at any UTC offset, any text:
markup, escapes, bidi overrides), stores them as a group would, and runs the CLI readers
over them: `report`, `query` (the catalogue: records, attempts, runs, before and after
`compact` writes each run's Parquet file), `history`, `market`.
Each exits 0 with no traceback; the terminal output holds no control character.

Bounded: 12 examples, no per-example deadline (a loaded machine), the whole test < 60 s of
CPU; count and times printed.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from typer.testing import CliRunner

from spotbench.cli import app
from spotbench.results import (
    MAX_BILLED_S,
    MAX_COST_USD,
    MAX_NAME_LEN,
    MAX_TRIAL,
    MAX_UNIT_LEN,
    MAX_VALUE,
    MIN_VALUE,
    Result,
    ResultStore,
    new_run_id,
    value_problem,
)
from tests.history.conftest import spec_for

pytestmark = pytest.mark.security

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
HOSTILE = ["[bold red]x[/]", "[/]", "[link=file:///etc]y", "\x1b[2J\x1b]0;pwned\x07", "\x9b31m",
           "\u202etxt.exe", ":smile:", "a\rb", "=cmd|'/C calc'!A0", "$\\frac{$", "..", "/", ""]

texts = st.text(max_size=24) | st.sampled_from(HOSTILE)
names = st.text(min_size=1, max_size=MAX_NAME_LEN) | st.sampled_from([h for h in HOSTILE if h])
values = (st.floats(min_value=-MAX_VALUE, max_value=MAX_VALUE, allow_nan=False).filter(
    lambda v: value_problem(v) is None)
    | st.sampled_from([MAX_VALUE, -MAX_VALUE, MIN_VALUE, -MIN_VALUE, 0.0, 1.0]))
offsets = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(
    lambda m: timezone(timedelta(minutes=m)))
times = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999),
                 timezones=st.just(UTC) | offsets | st.none()),
    st.sampled_from([datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
                     datetime(1, 1, 2, 0, 0, tzinfo=timezone(timedelta(hours=23, minutes=59))),
                     datetime(9999, 12, 30, 23, 59, tzinfo=timezone(-timedelta(hours=23, minutes=59)))]),
)
json_leaf = st.none() | st.booleans() | st.integers(min_value=-(1 << 53), max_value=1 << 53) | values | texts
json_values = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(texts, inner, max_size=3), max_leaves=6)
counts = st.integers(min_value=0, max_value=1 << 53)
metadata = st.fixed_dictionaries({}, optional={
    "members": counts, "size_bytes": counts | st.sampled_from([8, 1 << 20]), "cpu_count": counts,
    "host_cores": counts, "accelerator_count": counts,
    "placement": st.text(max_size=MAX_NAME_LEN) | st.sampled_from(HOSTILE),
    "member_types": st.lists(st.text(max_size=MAX_NAME_LEN) | st.sampled_from(HOSTILE), max_size=4),
    "contaminated": texts, "failure": texts, "stderr_tail": texts, "labels": json_values,
    "exit_code": st.integers(min_value=-(1 << 31), max_value=1 << 31), texts: json_values})
records = st.fixed_dictionaries({
    "sweep": texts, "trial": st.integers(min_value=0, max_value=MAX_TRIAL),
    "params": st.dictionaries(texts, json_values, max_size=3),
    "workload": st.sampled_from(["osu", "tf_mnist", "container"]) | texts,
    "metric": st.sampled_from(["latency", "bibw", "steps_per_s", "failed", "preempted"]) | names,
    "value": values, "unit": st.text(max_size=MAX_UNIT_LEN) | st.sampled_from(HOSTILE),
    "cloud": st.sampled_from(["local", "gcp", "aws"]) | texts,
    "machine_type": st.sampled_from(["n1-standard-2", "c5.large", "local"]) | texts,
    "accelerator": st.none() | texts, "zone": st.none() | texts, "spot": st.booleans(),
    "preempted": st.booleans(), "started_at": times, "ended_at": times,
    "billed_s": st.none() | st.floats(min_value=0, max_value=MAX_BILLED_S),
    "cost_usd": st.none() | st.floats(min_value=0, max_value=MAX_COST_USD),
    "metadata": metadata,
})
groups = st.sampled_from(["g-t1", "g-t2", "h-t1"])
run_days = st.integers(min_value=0, max_value=3)
stored = st.lists(st.tuples(run_days, groups, st.lists(records, min_size=1, max_size=4)),
                  min_size=1, max_size=4)


def _valid(run: str, group: str, fields: dict) -> Result | None:
    try:
        return Result.model_validate({**fields, "run": run, "group": group})
    except ValidationError:
        return None


def store_them(root: Path, drawn: list) -> int:
    store = ResultStore(f"file://{root}")
    kept = 0
    for day, group, fields in sorted(drawn, key=lambda d: d[0]):
        opened = datetime(2024, 5, 1, tzinfo=UTC) + timedelta(days=day)
        run = new_run_id(opened)
        valid = [r for r in (_valid(run, group, f) for f in fields) if r is not None]
        if valid:
            if store.current_run() is None or store.current_run().run != run:
                store.close_open_runs("deadline", now=opened)  # closed runs: `compact` takes them
                store.open_run(opened)
            store.write_group(run, group, valid)
            kept += len(valid)
    store.close_open_runs("deadline")
    return kept


def readers(root: Path, folder: Path) -> list[list[str]]:
    spec = spec_for(folder, root)
    return [["report", str(root), "--out", str(folder / "report")],
            ["query", str(spec), "SELECT * FROM records"],
            ["compact", str(spec)],  # the queries below read the runs' Parquet files
            ["query", str(spec), "SELECT * FROM records"],
            ["query", str(spec), "SELECT * FROM attempts"],
            ["query", str(spec), "SELECT * FROM runs"],
            ["query", str(spec), "SELECT * FROM records", "--json"],
            ["history", str(spec)], ["history", str(spec), "--json"],
            ["market", str(spec)], ["market", str(spec), "--json"]]


def test_readers_no_valid_record_breaks_report_query_history_market(tmp_path: Path) -> None:
    count = [0]
    started, cpu = time.monotonic(), time.process_time()

    @settings(max_examples=12, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(drawn=stored)
    def check(drawn: list) -> None:
        folder = Path(tempfile.mkdtemp(dir=tmp_path))
        try:
            if not store_them(folder / "results", drawn):
                return
            for args in readers(folder / "results", folder):
                result = CliRunner().invoke(app, args)
                assert result.exception is None or isinstance(result.exception, SystemExit), (
                    args[0], repr(result.exception))
                assert result.exit_code == 0, (args, result.output[-2000:])
                assert "Traceback" not in result.output, (args, result.output[-2000:])
                assert not CONTROL.search(result.output), (args, result.output[-2000:])
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            count[0] += 1

    check()
    used = time.process_time() - cpu
    print(f"{count[0]} examples in {time.monotonic() - started:.1f} s, {used:.1f} s of CPU")
    assert used < 60, f"the readers' fuzz took {used:.0f} s of CPU"
