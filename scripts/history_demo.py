"""`make history-demo`: a history with a known slowdown, found by `spotbench history`.

Runs examples/history-local.yaml on the local cloud RUNS_BEFORE times as it is, then
RUNS_AFTER times with `demo_inject_delay_us` (DEMOS AND TESTS ONLY: the peer rank waits
before each reply, so the measured latency really grows), then prints the change point
`spotbench history` detects and the path of the report that plots it. Its results folder
(results/history-local) is the demo's own and is emptied first, so every demo starts fresh.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from spotbench.history.catalog import Catalog
from spotbench.history.trends import history
from spotbench.localrun.runner import run_local
from spotbench.report import write_report
from spotbench.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
RUNS_BEFORE, RUNS_AFTER = 5, 2
DELAY_US = 50_000.0  # +25 ms one way: far above the local latency even on a loaded machine


def main() -> int:
    spec = load_spec(ROOT / "examples" / "history-local.yaml")
    url = spec.results_url()
    shutil.rmtree(url.removeprefix("file://"), ignore_errors=True)
    slowed = spec.model_copy(update={"workload": spec.workload.model_copy(
        update={"demo_inject_delay_us": DELAY_US})})
    total = RUNS_BEFORE + RUNS_AFTER
    for i in range(total):
        this = spec if i < RUNS_BEFORE else slowed
        note = f" with an injected {DELAY_US:g} µs delay (demo only)" if i >= RUNS_BEFORE else ""
        print(f"run {i + 1}/{total}{note} …", flush=True)
        outcome = run_local(this, grace_s=5)
        if outcome.incomplete:
            print(f"  incomplete groups: {', '.join(outcome.incomplete)}; see {outcome.state_dir}/logs")
    with Catalog(url) as cat:
        hist = history(cat, spec)
    changes = hist.changes()
    for s in hist.series:
        print(f"{s.name}: " + ", ".join(f"{v:.1f}" for v in s.values) + f" {s.unit}")
    for c in changes:
        print(f"change point: {c['series']} at run {c['run']} ({c['date'][:19]}): "
              f"{c['before_mean']:.2f} → {c['after_mean']:.2f} {c['unit']} "
              f"({c['rel_change'] * 100:+.0f}%, p = {c['pvalue']:.1e}, {c['kind']})")
    paths = write_report(url, ROOT / "reports" / spec.name)
    print(f"report:   {paths.markdown.resolve()}")
    print(f"html:     {paths.html.resolve()}")
    expected_run = hist.runs[RUNS_BEFORE] if len(hist.runs) > RUNS_BEFORE else None
    if not any(c["run"] == expected_run and c["kind"] == "regression" for c in changes):
        print(f"no regression detected at run {expected_run} (the first slowed run)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
