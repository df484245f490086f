"""The results catalogue at scale: a generated 1,000-run × 50-group store, queried.

Figures (each step in its own process, so peak memory is its own):
1. `jsonl_s`: open the catalogue over the JSONL files (50,000 files, 250,000 values) and
   answer a per-run aggregate, seconds per 1,000 runs. Target: seconds (≤ 30 s here).
2. `compacted_s`: the same after `compact` (one Parquet file per run). Target ≤ 10 s.
3. `baseline_read_s`: the store's own reader (`ResultStore.read`, what the report uses)
   over the same files: the ratio `jsonl_s / baseline_read_s` says what DuckDB buys.
4. `*_peak_mb`: peak resident memory of each step's process.
Prints JSON. The store is written to a temporary folder and removed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS, GROUPS = 1000, 50
QUERY = ("SELECT run, avg(value) FROM records WHERE metric = 'latency' AND NOT preempted "
         "GROUP BY run ORDER BY run")

STEP = r"""
import json, resource, sys, time
what, root = sys.argv[1], sys.argv[2]
t = time.perf_counter()
if what == "baseline":
    from spotbench.results import ResultStore
    n = len(ResultStore("file://" + root).read())
else:
    from spotbench.history.catalog import Catalog
    with Catalog("file://" + root) as cat:
        if what == "compact":
            for (run,) in cat.query("SELECT run FROM runs").rows:
                cat.compact(run)
        n = len(cat.query(sys.argv[3]).rows)
print(json.dumps({"s": time.perf_counter() - t, "rows": n,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def step(what: str, root: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", STEP, what, str(root), QUERY],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    from spotbench.history.synthetic import SyntheticSweep

    with tempfile.TemporaryDirectory(prefix="spotbench-bench-history-") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        SyntheticSweep(runs=RUNS, groups=GROUPS, preempted_every=25).write(root)
        generate_s = time.perf_counter() - t
        files = sum(1 for _ in root.glob("runs/*/*.jsonl"))
        jsonl = step("query", root)
        baseline = step("baseline", root)
        step("compact", root)
        compacted = step("query", root)
    per_1000 = 1000 / RUNS
    print(json.dumps({
        "runs": RUNS, "groups": GROUPS, "files": files, "generate_s": round(generate_s, 2),
        "jsonl_s": round(jsonl["s"] * per_1000, 2), "jsonl_peak_mb": round(jsonl["peak_mb"]),
        "compacted_s": round(compacted["s"] * per_1000, 2),
        "compacted_peak_mb": round(compacted["peak_mb"]),
        "baseline_read_s": round(baseline["s"] * per_1000, 2),
        "baseline_peak_mb": round(baseline["peak_mb"]),
        "jsonl_over_baseline": round(jsonl["s"] / baseline["s"], 2),
        "rows": jsonl["rows"], "same_rows_after_compaction": jsonl["rows"] == compacted["rows"],
    }, indent=2))


if __name__ == "__main__":
    main()
