"""Property: whatever a group writes under its own prefix, the sweep goes on (issue 24).

Hypothesis draws files a group's identity may write (`runs/<run>/<group>.…`: attempt files,
odd names, raw folders) holding arbitrary lines: text, bytes, and records with any field
replaced by any JSON value (null, NaN, ±inf, huge integers, nested objects, long names,
another group's name, negative costs, forged times). Then the sweep runs on as a deployed
one would (control over an in-memory cloud, the real file store and control lock):

- `start`, `done`, `stop` never raise (in the functions that is never a 5xx);
- the budget stays a cap: the ledger's spend never exceeds it;
- the other groups' honest results count, unflagged, exactly as they wrote them;
- the store's readers, the catalogue (`query`), `history`, `market` and the report's data
  never raise.

Bounded: 30 examples, and the whole test (examples and report) to 60 s of CPU (one example
is ~0.3 s of CPU; no per-example wall deadline, which a loaded machine would turn flaky). The
count, wall and CPU times are printed. One full report (`write_report`, charts included) is rendered over a store
holding every example's files at the end.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spotbench import control
from spotbench.auth import Caller
from spotbench.budget import check_budget, spent_usd
from spotbench.costs import annotate, load_catalog
from spotbench.history.catalog import Catalog
from spotbench.history.market import market
from spotbench.history.trends import history
from spotbench.report import write_report
from spotbench.report.data import frame
from spotbench.results import Result, ResultStore
from spotbench.spec import load_spec
from tests.test_control import SCHEDULER, MemoryCloud

pytestmark = pytest.mark.security

T0 = datetime(2024, 5, 1, tzinfo=UTC)
CATALOG = load_catalog()
SPEC = load_spec({"name": "pp", "cloud": "gcp", "zone": "us-central1-a", "workload": {"name": "osu"},
                  "matrix": {"machine_type": ["n1-standard-2"]}, "trials": 3, "deadline": "9m",
                  "spot": False, "concurrency": 1})
A, B, C = (g.id for g in SPEC.plan())

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=10**300, max_value=10**400)
    | st.floats() | st.sampled_from([float("inf"), float("-inf"), float("nan"), -1.0, 1e308])
    | st.text(max_size=16) | st.text(min_size=120, max_size=300)
    | st.sampled_from([A, B, C, "1970-01-01T00:00:00+00:00", "2999-01-01T00:00:00Z", "yesterday"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
metadata_keys = st.sampled_from(["members", "member_types", "placement", "size_bytes",
                                 "accelerator_count", "labels", "contaminated"])
overrides = st.dictionaries(
    st.sampled_from([*Result.model_fields, "extra"]),
    json_values | st.dictionaries(metadata_keys, json_values, max_size=3), max_size=4)
lines = st.one_of(
    overrides.map(lambda o: ("record", o)),
    st.text(max_size=120).map(lambda t: ("text", t)),
    st.binary(max_size=120).map(lambda b: ("bytes", b)),
)
names = st.one_of(
    st.integers(min_value=0, max_value=7).map(lambda n: f"{A}.{n}.jsonl"),
    st.sampled_from([f"{A}.x.jsonl", f"{A}.1.jsonl.tmp", f"{A}.-1.jsonl", f"{A}..jsonl",
                     f"{A}.99999999.jsonl", f"{A}.1.1.jsonl", f"{A}.1/stdout.txt",
                     f"{A}.1/x.jsonl", f"{A}.x.1.jsonl"]),
    st.text(st.characters(codec="ascii", exclude_characters="/\x00"), min_size=1, max_size=12)
    .map(lambda t: f"{A}.{t}"),
)
attacks = st.lists(st.tuples(names, st.lists(lines, max_size=5)), min_size=1, max_size=4)


def honest(run: str, group: str, value: float, t0: datetime = T0) -> Result:
    now = t0 + timedelta(seconds=30)
    return Result(sweep="pp", run=run, group=group, trial=1, workload="osu", metric="latency",
                  value=value, unit="us", cloud="gcp", machine_type="n1-standard-2",
                  zone="us-central1-a", started_at=now, ended_at=now + timedelta(seconds=20),
                  metadata={"size_bytes": 8, "members": 2})


def body(run: str, file_lines: list[tuple[str, object]]) -> bytes:
    out = b""
    for kind, line in file_lines:
        if kind == "bytes":
            out += line + b"\n"
        elif kind == "text":
            out += line.encode("utf-8", "surrogatepass") + b"\n"
        else:
            rec = json.loads(honest(run, A, 1.0).model_dump_json()) | line
            out += json.dumps(rec, default=str).encode() + b"\n"
    return out


def play(root: Path, budget: float, files: list[tuple[str, list]], t0: datetime = T0) -> None:
    """One sweep run opened at `t0`: a (the attacker) writes `files`, then the sweep goes on."""
    store = ResultStore(f"file://{root}")
    groups = SPEC.plan()
    spec = SPEC.model_copy(update={"budget": budget})
    sweep = control.Sweep(spec=spec, cloud=MemoryCloud(groups), store=store, groups=groups,
                          budget_check=lambda *args: check_budget(*args, prices=CATALOG))
    members = {g.id: Caller("member", g.members[0].name) for g in groups}
    run = control.start(sweep, SCHEDULER, now=t0)["run"]
    for name, file_lines in files:
        path = Path(store.path("runs", run, name))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body(run, file_lines))
    out = control.done(sweep, members[A], {"group": A}, now=t0 + timedelta(seconds=60))
    honest_values: dict[str, float] = {}
    for step in range(2, 8):  # whichever group runs next stores an honest result (a's retry too)
        if not out.get("started"):
            break
        gid = out["started"][0]
        value = float(step)
        if gid != A:
            honest_values[gid] = value
        store.write_group(run, gid, [honest(run, gid, value, t0)])
        out = control.done(sweep, members[gid], {"group": gid}, now=t0 + timedelta(seconds=60 * step))
    control.start(sweep, SCHEDULER, {"run": run}, now=t0 + timedelta(seconds=500))
    control.stop(sweep, SCHEDULER, {}, now=t0 + timedelta(seconds=520))

    spent, _ = spent_usd(spec, store, CATALOG, [], now=t0 + timedelta(seconds=540))
    assert spent <= budget + 1e-9, f"spent {spent} over the budget {budget}"
    flags = store.flags(run)
    completed = store.completed_groups(run)
    for gid, value in honest_values.items():
        assert gid in completed and f"{gid}.1" not in flags
        assert [r.value for r in store.read(run) if r.group == gid] == [value]
    records = store.read()
    assert all(r.group == r.group.strip() and math.isfinite(r.value) for r in records)
    frame(annotate(records, CATALOG))
    with Catalog(store.url) as cat:
        cat.query("SELECT * FROM records").rows
        cat.query("SELECT * FROM attempts").rows
        market(cat)
        history(cat, spec)


def test_whatever_a_group_writes_the_sweep_goes_on(tmp_path: Path) -> None:
    union = tmp_path / "union"
    count = [0]
    started, cpu = time.monotonic(), time.process_time()

    @settings(max_examples=30, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(budget=st.sampled_from([0.02, 0.033, 0.07, 0.11, 10.0]), files=attacks,
           day=st.integers(min_value=0, max_value=10**5))
    def check(budget: float, files: list, day: int) -> None:
        root = Path(tempfile.mkdtemp(dir=tmp_path))
        try:  # each example's run opens on a day of its own: the report's union keeps them apart
            play(root, budget, files, T0 + timedelta(days=day))
        finally:
            runs = root / "runs"
            if runs.is_dir():  # keep every example's files for the one report at the end
                shutil.copytree(runs, union / "runs", dirs_exist_ok=True)
            shutil.rmtree(root, ignore_errors=True)
            count[0] += 1

    check()
    took = time.monotonic() - started
    paths = write_report(f"file://{union}", tmp_path / "report")
    used = time.process_time() - cpu
    print(f"{count[0]} examples in {took:.1f} s; report over all of them in "
          f"{time.monotonic() - started - took:.1f} s; {used:.1f} s of CPU")
    assert paths.markdown.exists()
    assert used < 60, f"the data-path property took {used:.0f} s of CPU"
