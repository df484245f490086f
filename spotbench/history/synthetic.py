"""Synthetic result stores with a known history, for bench/history.py and the tests.

Writes the same layout a sweep writes (runs/<run>/run.json, runs/<run>/<group>.<n>.jsonl,
one `Result` per value), with values that follow a known series: a base, a relative noise
and optional steps from a given run on. Nothing here is used by a real sweep.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from spotbench.results import Result, RunInfo, new_run_id

OSU_SIZES = (8, 1024, 65536, 1 << 20)
BASE = {"latency": 2.0, "bibw": 9000.0}  # us at 8 B (scaled by size), MB/s
UNIT = {"latency": "us", "bibw": "MB/s"}


@dataclass(frozen=True)
class Step:
    """From run index `at` on, `metric` values are multiplied by `factor`."""

    metric: str
    at: int
    factor: float


@dataclass
class SyntheticSweep:
    runs: int = 10
    groups: int = 2  # matrix points (machine types m0, m1, …), one trial each
    noise: float = 0.02  # relative standard deviation of each value
    steps: list[Step] = field(default_factory=list)
    preempted_every: int = 0  # every n-th group attempt is preempted first (0: never)
    sizes: tuple[int, ...] = OSU_SIZES
    sweep: str = "synthetic"
    seed: int = 1
    start: datetime = datetime(2026, 1, 1, 3, tzinfo=UTC)
    members: int = 2
    run_s: float = 60.0
    machine_type: str | None = None  # every group's; None: m0, m1, … (one per group)
    zone: str = "local"

    def value(self, rng: random.Random, metric: str, run: int, size: int) -> float:
        base = BASE[metric] * (1 + size / 4096) if metric == "latency" else BASE[metric]
        for step in self.steps:
            if step.metric == metric and run >= step.at:
                base *= step.factor
        return base * (1 + rng.gauss(0, self.noise))

    def write(self, root: Path) -> list[str]:
        """Write the store under the local folder `root`; returns the run ids, oldest first."""
        rng = random.Random(self.seed)
        template = Result(
            sweep=self.sweep, run="", group="", trial=1, params={"name": "osu"}, workload="osu",
            metric="latency", value=0.0, unit="us", cloud="local", machine_type="m0",
            zone=self.zone, spot=True, started_at=self.start, ended_at=self.start,
            billed_s=self.run_s * self.members, cost_usd=0.0, metadata={"members": self.members},
        ).model_dump(mode="json")
        run_ids, n_attempt = [], 0
        for i in range(self.runs):
            opened = self.start + timedelta(days=i)
            run = new_run_id(opened)
            run_ids.append(run)
            folder = root / "runs" / run
            folder.mkdir(parents=True, exist_ok=True)
            closed = opened + timedelta(minutes=30)
            (folder / "run.json").write_text(RunInfo(
                run=run, opened_at=opened, closed_at=closed, reason="complete").model_dump_json())
            for g in range(self.groups):
                group = f"g{g:03d}-t1"
                attempts = [False]
                n_attempt += 1
                if self.preempted_every and n_attempt % self.preempted_every == 0:
                    attempts = [True, False]
                t0 = opened + timedelta(seconds=10)
                for a, preempted in enumerate(attempts, start=1):
                    t1 = t0 + timedelta(seconds=self.run_s / (3 if preempted else 1))
                    lines = []
                    for metric in ("latency", "bibw"):
                        for size in self.sizes if metric == "latency" else (1 << 20,):
                            rec = dict(template, run=run, group=group, machine_type=self.machine_type or f"m{g}",
                                       metric=metric, unit=UNIT[metric],
                                       value=self.value(rng, metric, i, size) * (5 if preempted else 1),
                                       preempted=preempted, started_at=t0.isoformat(),
                                       ended_at=t1.isoformat(), cost_usd=0.001 * self.run_s / 60,
                                       metadata={"members": self.members, "size_bytes": size})
                            lines.append(json.dumps(rec))
                    (folder / f"{group}.{a}.jsonl").write_text("\n".join(lines) + "\n")
                    t0 = t1 + timedelta(seconds=5)
        return run_ids
