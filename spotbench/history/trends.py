"""Per matrix point and metric, the series over runs and its change points.

    with Catalog(spec.results_url()) as cat:
        hist = history(cat, spec)
    hist.regressions(pct=5)     # the latest level of each series, if it is worse by ≥ 5 %

A series is one matrix point (the group id without its trial: `<sweep>-<point hash>`) ×
one tracked metric (× message size for OSU). Its value in a run is the median over the
trials' complete attempts (the report's key numbers and ranking use the same); preempted and partial attempts are excluded (their count is
kept beside the value). `cost_usd` per run counts every attempt, preempted ones included:
that is what the run cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import pandas as pd

from spotbench.history.catalog import Catalog
from spotbench.history.changepoints import DEFAULT_MAX_PVALUE, ChangePoint, detect
from spotbench.spec import MATRIX_MACHINE_KEYS, SweepSpec
from spotbench.workload import Tracked
from spotbench.workload_registry import registry

Better = Literal["lower", "higher"]


def tracked() -> tuple[tuple[str, Tracked], ...]:
    """(workload, metric) pairs followed: each Workload descriptor's `history`."""
    return tuple((w.name, t) for w in registry().values() for t in w.history)


COST = Tracked("cost_usd", "cost per run", "lower")  # every workload: what each run cost


@dataclass
class Series:
    point: str  # <sweep>-<point hash>
    label: str  # what the point is: machine type, accelerator, matrix values
    workload: str
    metric: str
    label_metric: str
    size: int | None
    unit: str
    better: Better
    runs: list[str] = field(default_factory=list)
    dates: list[datetime] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    attempts: list[int] = field(default_factory=list)  # stored attempts of the point in the run
    preempted: list[int] = field(default_factory=list)  # of which preempted/partial (excluded)
    change_points: list[ChangePoint] = field(default_factory=list)

    @property
    def name(self) -> str:
        size = f" @ {size_text(self.size)}" if self.size is not None else ""
        return f"{self.label_metric}{size} · {self.label}"

    def worse(self, rel_change: float) -> bool:
        return rel_change > 0 if self.better == "lower" else rel_change < 0

    def change(self, cp: ChangePoint) -> dict[str, Any]:
        return {
            "series": self.name, "point": self.point, "metric": self.metric, "size_bytes": self.size,
            "unit": self.unit, "run": self.runs[cp.index], "date": self.dates[cp.index].isoformat(),
            "before_mean": cp.mean_before, "after_mean": cp.mean_after,
            "before_runs": cp.n_before, "after_runs": cp.n_after,
            "rel_change": cp.rel_change, "pvalue": cp.pvalue,
            "kind": "regression" if self.worse(cp.rel_change) else "improvement",
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "series": self.name, "point": self.point, "label": self.label, "workload": self.workload,
            "metric": self.metric, "size_bytes": self.size, "unit": self.unit, "better": self.better,
            "runs": [
                {"run": r, "date": d.isoformat(), "value": v, "attempts": a, "excluded_attempts": p}
                for r, d, v, a, p in zip(self.runs, self.dates, self.values, self.attempts,
                                         self.preempted, strict=True)
            ],
            "change_points": [self.change(cp) for cp in self.change_points],
        }


@dataclass
class History:
    sweep: str
    runs: list[str]
    series: list[Series]
    max_pvalue: float
    min_change: float

    def changes(self) -> list[dict[str, Any]]:
        return [s.change(cp) for s in self.series for cp in s.change_points]

    def regressions(self, pct: float, since: str | None = None) -> list[dict[str, Any]]:
        """Regressions of at least `pct` percent: the latest change point of each series (the
        level it is at now), or every change point at or after run `since`."""
        out = []
        for s in self.series:
            cps = [cp for cp in s.change_points if since is None or s.runs[cp.index] >= since]
            if since is None:
                cps = cps[-1:]
            out += [s.change(cp) for cp in cps
                    if s.worse(cp.rel_change) and abs(cp.rel_change) * 100 >= pct]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"sweep": self.sweep, "runs": self.runs, "max_pvalue": self.max_pvalue,
                "min_change": self.min_change, "change_points": self.changes(),
                "series": [s.to_dict() for s in self.series]}


def size_text(n: int) -> str:
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def point_labels(spec: SweepSpec | None) -> dict[str, str]:
    """Point id → label from the spec's plan (machine type, accelerator, matrix values)."""
    if spec is None:
        return {}
    out = {}
    for g in spec.plan():
        point = g.id.rsplit("-t", 1)[0]
        parts = [g.machine_type] + ([g.accelerator] if g.accelerator else [])
        parts += [f"{k}={v}" for k, v in sorted(g.point.items()) if k not in MATRIX_MACHINE_KEYS[:2]]
        out[point] = " · ".join(parts)
    return out


_POINT = "regexp_replace(\"group\", '-t[0-9]+$', '')"


def series_frame(cat: Catalog, sizes: dict[str, tuple[int, ...]] | None = None):
    """One row per (point, metric, size, run): the median over its complete attempts (each
    the mean of its values there) — the report's statistic (#39) — n attempts, date."""
    conds = []
    for workload, t in tracked():
        chosen = (sizes or {}).get(t.metric, t.sizes)
        size_cond = (f" AND TRY_CAST(json_extract(metadata, '$.size_bytes') AS BIGINT) IN "
                     f"({', '.join(map(str, chosen))})") if chosen else ""
        conds.append(f"(workload = '{workload}' AND metric = '{t.metric}'{size_cond})")
    where = " OR ".join(conds) or "false"
    return cat.frame(f"""
        WITH t AS (
            SELECT run, "group", attempt, {_POINT} AS point, workload, metric, any_value(unit) AS unit,
                   TRY_CAST(json_extract(metadata, '$.size_bytes') AS BIGINT) AS size,
                   avg(value) AS value, min(started_at) AS started
            FROM records WHERE NOT preempted AND json_extract(metadata, '$.failure') IS NULL
                 AND ({where}) GROUP BY ALL
        ), v AS (
            SELECT run, point, workload, metric, any_value(unit) AS unit, size,
                   median(value) AS value, count(*) AS n, min(started) AS started
            FROM t GROUP BY run, point, workload, metric, size
        ), c AS (
            SELECT run, {_POINT} AS point, any_value(workload) AS workload, 'cost_usd' AS metric,
                   'USD' AS unit, NULL::BIGINT AS size, sum(cost) AS value, count(*) AS n,
                   min(started) AS started
            FROM (SELECT run, "group", attempt, any_value(workload) AS workload,
                         max(cost_usd) AS cost, min(started_at) AS started
                  FROM records GROUP BY run, "group", attempt)
            GROUP BY run, point HAVING count(cost) = count(*)
        ), a AS (
            SELECT run, {_POINT} AS point, count(*) AS attempts, count(*) FILTER (WHERE p) AS excluded
            FROM (SELECT run, "group", attempt, bool_or(preempted) AS p FROM records GROUP BY ALL)
            GROUP BY ALL
        )
        SELECT s.*, a.attempts, a.excluded, coalesce(r.opened_at, s.started) AS date
        FROM (SELECT * FROM v UNION ALL SELECT * FROM c) s
        JOIN a USING (run, point) LEFT JOIN runs r USING (run)
        ORDER BY point, metric, size, run
    """)


def history(cat: Catalog, spec: SweepSpec | None = None, *, sizes: dict[str, tuple[int, ...]] | None = None,
            max_pvalue: float = DEFAULT_MAX_PVALUE, min_change: float = 0.0,
            labels: dict[str, str] | None = None) -> History:
    """Series and change points of every tracked metric. Points are labelled from `labels`,
    else from the spec's plan, else by their id."""
    frame = series_frame(cat, sizes=sizes)
    labels = {**point_labels(spec), **(labels or {})}
    by_metric = {(w, t.metric): t for w, t in tracked()}
    out: list[Series] = []
    if not frame.empty:
        keys = ["point", "metric", "size"]
        for (point, metric, size), sub in frame.groupby(keys, sort=True, dropna=False):
            workload = str(sub["workload"].iloc[0])
            t = by_metric.get((workload, metric), COST)
            s = Series(
                point=point, label=labels.get(point, point), workload=workload,
                metric=metric, label_metric=t.label, size=None if pd.isna(size) else int(size),
                unit=str(sub["unit"].iloc[0]), better=t.better,
                runs=list(sub["run"]), dates=[d.to_pydatetime() for d in sub["date"]],
                values=[float(v) for v in sub["value"]], attempts=[int(a) for a in sub["attempts"]],
                preempted=[int(p) for p in sub["excluded"]],
            )
            s.change_points = detect(s.values, max_pvalue=max_pvalue, min_change=min_change)
            out.append(s)
    runs = [r for (r,) in cat.query("SELECT DISTINCT run FROM records ORDER BY run").rows]
    sweep = spec.name if spec else (cat.query("SELECT any_value(sweep) FROM records").rows[0][0] or "")
    return History(sweep=sweep, runs=runs, series=out, max_pvalue=max_pvalue, min_change=min_change)

