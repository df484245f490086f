"""Known inputs for the report tests: records written to a real ResultStore."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from spotbench.results import Result, ResultStore

T0 = datetime(2024, 5, 1, 3, 0, tzinfo=UTC)


def rec(**kw: Any) -> Result:
    base: dict[str, Any] = dict(
        sweep="s", run="r1", group="g", trial=1, params={"name": "osu"}, workload="osu",
        metric="latency", value=1.0, unit="us", cloud="local", machine_type="local",
        started_at=T0, ended_at=T0 + timedelta(seconds=60),
    )
    base.update(kw)
    return Result(**base)


def osu_records(machine: str, values: dict[int, dict[str, list[float]]], preempted_trials=()) -> list[list[Result]]:
    """values[trial][metric] = list of values per size in SIZES; one record list per group."""
    groups = []
    for trial, per_metric in values.items():
        recs = []
        for metric, vals in per_metric.items():
            unit = "us" if metric == "latency" else "MB/s"
            for size, v in zip(SIZES, vals, strict=False):
                recs.append(rec(
                    group=f"{machine.replace('.', '-')}-t{trial}", trial=trial, metric=metric,
                    value=v, unit=unit,
                    machine_type=machine, preempted=trial in preempted_trials,
                    metadata={"size_bytes": size if metric == "latency" else max(size, 1)},
                ))
        groups.append(recs)
    return groups


SIZES = [0, 1, 2, 4]


@pytest.fixture
def store(tmp_path) -> ResultStore:
    return ResultStore("file://" + str(tmp_path / "results"))
