"""Does `adaptive` beat `random` at the same number of trials? (issue #35)

A synthetic objective with a known optimum, run as a `container` command on the local
cloud by `spotbench run` (the real path: control asks and tells the study in the results
folder, two trials in flight):

    score = -((x - 1.5)² + (y + 2)² + (z - 0.5)² + (k - 3)²)      x, y, z ∈ [-5, 5], k ∈ 0…8

so the best possible score is 0. Each (method, seed) is one search of `--n` trials; its
regret is 0 - the best score it found. Prints JSON: per method the regret of every seed and
their median, and `adaptive_beats_random` (the adaptive median regret is below random's).

    python bench/search_adaptive.py                     # tpe vs random, n 24, seeds 1-5
    python bench/search_adaptive.py --sampler gp --n 16 --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
COMMAND = ("print('score=%f' % -(((${x}) - 1.5) ** 2 + ((${y}) + 2) ** 2 + ((${z}) - 0.5) ** 2"
           " + ((${k}) - 3) ** 2))")
SPACE = {"x": {"uniform": [-5, 5]}, "y": {"uniform": [-5, 5]}, "z": {"uniform": [-5, 5]},
         "k": {"int": [0, 8]}}
OPTIMUM = 0.0


def spec(folder: Path, method: str, sampler: str | None, n: int, seed: int, parallel: int) -> Path:
    search: dict = {"space": SPACE, "method": method, "n": n, "seed": seed, "parallel": parallel,
                    "objective": {"metric": "score", "direction": "maximize"}}
    if sampler:
        search["sampler"] = sampler
    data = {"name": f"bench-{method[:5]}-{seed}", "cloud": "local", "deadline": "1m",
            "results": str(folder / "results"),
            "workload": {"name": "container", "command": [sys.executable, "-c", COMMAND]},
            "search": search}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def best_score(results: Path) -> float:
    """The best objective the search's study holds (the records say the same)."""
    import optuna

    journal = next((results / "search").glob("*.journal"))
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))
    study = optuna.load_study(study_name=journal.stem, storage=storage)
    return float(study.best_value)


def one(method: str, sampler: str | None, n: int, seed: int, parallel: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="spotbench-bench-search-") as tmp:
        folder = Path(tmp)
        path = spec(folder, method, sampler, n, seed, parallel)
        env = {**os.environ, "SPOTBENCH_STATE_ROOT": str(folder / "state"),
               "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        began = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "spotbench.cli", "run", str(path), "--no-report"],
                              env=env, cwd=folder, capture_output=True, text=True, timeout=1800)
        took = time.monotonic() - began
        if done.returncode != 0:
            raise SystemExit(f"{method} seed {seed}: spotbench run exited {done.returncode}:\n"
                             f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
        best = best_score(folder / "results")
    return {"seed": seed, "best": best, "regret": OPTIMUM - best, "run_s": round(took, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=24, help="trials per search")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--sampler", default="tpe", choices=["tpe", "gp", "cmaes", "nsga2"])
    ap.add_argument("--parallel", type=int, default=2)
    args = ap.parse_args(argv)
    out: dict = {"objective": COMMAND, "optimum": OPTIMUM, "n": args.n, "parallel": args.parallel,
                 "load_avg_start": os.getloadavg()[0], "methods": {}}
    for method, sampler in (("random", None), ("adaptive", args.sampler)):
        runs = [one(method, sampler, args.n, seed, args.parallel) for seed in args.seeds]
        label = method if sampler is None else f"adaptive-{sampler}"
        out["methods"][label] = {"runs": runs,
                                 "median_regret": statistics.median(r["regret"] for r in runs)}
    random_regret = out["methods"]["random"]["median_regret"]
    adaptive_regret = out["methods"][f"adaptive-{args.sampler}"]["median_regret"]
    out["adaptive_beats_random"] = adaptive_regret < random_regret
    out["load_avg_end"] = os.getloadavg()[0]
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
