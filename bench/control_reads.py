"""Control calls against a hostile group's objects and a long history (issue #38).

Over the object-store double (`tests/object_store_double.py`: S3/GCS-like delimiter listings,
1,000 keys a page, every request counted, `--latency-ms` per request: 20 ms by default, a
function's round trip to its bucket), the scenario of `tests/control_reads.py` — a 3-group
sweep, one group flooding its own prefix with everything its grant allows — is run:

- `hostile`: with 0 (the baseline, same run), 10^3, 10^4 and 10^5 hostile objects: each
  control call's (`done`, `start`, the hostile group's `done`, `stop`) requests and seconds,
  and their ratios to the baseline's;
- `history`: with a budget, after 0 (baseline) and `--runs` (10,000) closed runs of history:
  the same calls, and the first start that sums the history up once (`spent.json`; measured
  unslowed, its requests are the figure).

Prints JSON. Target: every ratio 1.0 (flat).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.control_reads import run_calls  # noqa: E402

CALLS = ("done", "start", "done_hostile", "stop")


def _figures(result: dict) -> dict:
    return {call: {"requests": result[call]["requests"], "seconds": result[call]["seconds"]}
            for call in CALLS}


def _ratios(result: dict, base: dict) -> dict:
    return {call: {"requests": round(result[call]["requests"] / base[call]["requests"], 3),
                   "seconds": round(result[call]["seconds"] / max(base[call]["seconds"], 1e-9), 3)}
            for call in CALLS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--hostile", type=int, nargs="*", default=[1000, 10_000, 100_000])
    parser.add_argument("--runs", type=int, default=10_000)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    latency = args.latency_ms / 1000
    t0 = time.perf_counter()
    base = run_calls("bench-quiet", hostile=0, latency_s=latency)
    hostile = {"0": _figures(base)}
    ratios = {}
    for n in args.hostile:
        result = run_calls(f"bench-hostile-{n}", hostile=n, latency_s=latency)
        hostile[str(n)] = _figures(result)
        ratios[str(n)] = _ratios(result, base)
    short = run_calls("bench-history-0", hostile=0, latency_s=latency, budget=1e6)
    long = run_calls("bench-history", hostile=0, history=args.runs, latency_s=latency, budget=1e6)
    print(json.dumps({
        "latency_ms": args.latency_ms,
        "hostile": {"per_call": hostile, "ratio_to_none": ratios},
        "history": {
            "runs": args.runs, "budget": True,
            "per_call": {"0": _figures(short), str(args.runs): _figures(long)},
            "ratio_to_none": _ratios(long, short),
            "first_start_requests": {"0": short["first_start"]["requests"],
                                     str(args.runs): long["first_start"]["requests"]},
            "first_start_seconds_unslowed": {"0": short["first_start"]["seconds"],
                                             str(args.runs): long["first_start"]["seconds"]},
        },
        "wall_s": round(time.perf_counter() - t0, 1),
        "load_average": os.getloadavg()[0],
    }, indent=1))


if __name__ == "__main__":
    main()
