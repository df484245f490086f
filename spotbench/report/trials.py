"""A search's (or a matrix's) trials, read from the stored records, ranked by an objective.

A trial is what a search asked for once: its records carry the trial's parameters in
`params` and its number in `trial` (a matrix point × trial index is one too). Repeats of a
trial (same number, same parameters) are one trial. Per trial and metric the value is the
median over its complete attempts (an attempt's own records of one metric averaged first);
attempts cut short, contaminated or failed are never in it. The cost is every stored
attempt's (cut short ones too: they were paid for), plus a month of keeping its artifacts
(`storage_usd_month`, spotbench.costs); an objective named `cost` (or `cost_usd`) is it.

    objectives = parse_objectives("val_accuracy:max")      # or the spec's search.objective
    ranked = rank(trials(records), objectives[0])          # best first, unscored last

The objective comes from whoever asks: `--metric`/`--objective`, else the spec's
`search.objective` (`objectives_of_spec`, read with getattr: a spec without a search has none).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from spotbench.costs import group_costs
from spotbench.failures import is_failure
from spotbench.results import Result

_DIRECTIONS = {"max": "maximize", "maximize": "maximize", "higher": "maximize",
               "min": "minimize", "minimize": "minimize", "lower": "minimize"}
COST_METRICS = ("cost", "cost_usd")  # objective names that mean the trial's cost
# parameters that never tell trials apart (the workload's name, where its data come from)
_IGNORED = {"name", "dataset_url"}


@dataclass(frozen=True)
class Objective:
    metric: str
    direction: str = "maximize"  # maximize | minimize

    @property
    def sign(self) -> float:
        return 1.0 if self.direction == "maximize" else -1.0

    def better(self, a: float, b: float) -> bool:
        return a * self.sign > b * self.sign

    def __str__(self) -> str:
        return f"{self.metric} ({'higher' if self.direction == 'maximize' else 'lower'} is better)"


def _objective(item: Any) -> Objective:
    """`"metric[:max|min]"`, `{metric, direction}` or an object with those attributes."""
    if isinstance(item, Objective):
        return item
    if isinstance(item, str):
        metric, _, direction = item.partition(":")
        raw: dict[str, Any] = {"metric": metric, "direction": direction or "max"}
    elif isinstance(item, dict):
        raw = item
    else:
        raw = {"metric": getattr(item, "metric", None), "direction": getattr(item, "direction", "max")}
    metric, direction = raw.get("metric"), str(raw.get("direction") or "max").lower()
    if not isinstance(metric, str) or not metric.strip():
        raise ValueError(f"objective {item!r}: give a metric name, e.g. val_accuracy:max")
    if direction not in _DIRECTIONS:
        raise ValueError(f"objective {metric}: direction {direction!r} is not one of "
                         "max, min (maximize, minimize)")
    return Objective(metric.strip(), _DIRECTIONS[direction])


def parse_objectives(given: Any) -> list[Objective]:
    """One objective, or a list of them (a Pareto front when there are several)."""
    if given is None:
        return []
    items = given if isinstance(given, list | tuple) else [given]
    return [_objective(i) for i in items]


def objectives_of_spec(spec: Any) -> list[Objective]:
    """The spec's `search.objective` ([] when the spec has no search)."""
    search = getattr(spec, "search", None)
    return parse_objectives(getattr(search, "objective", None)) if search is not None else []


@dataclass
class Trial:
    number: int
    params: dict[str, Any]
    groups: list[str] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)  # metric → median of complete attempts
    attempts: int = 0  # stored attempts, any outcome
    complete: int = 0  # complete attempts
    state: str = "running"  # complete | pruned | failed | cut short | running
    cost_usd: float | None = None
    storage_usd_month: float = 0.0
    artifacts_bytes: int = 0
    finished_at: datetime | None = None
    # (run, group) of its complete attempts, newest last: where its artifacts are
    where: list[tuple[str, str]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"trial {self.number}"

    @property
    def total_usd(self) -> float | None:
        return None if self.cost_usd is None else self.cost_usd + self.storage_usd_month


def _key(r: Result) -> tuple[int, str]:
    params = {k: v for k, v in r.params.items() if k not in _IGNORED}
    return r.trial, json.dumps(params, sort_keys=True, default=str)


def _attempt_key(r: Result) -> tuple[str, str, str]:
    return r.run, r.group, f"{r.started_at.isoformat()}/{r.ended_at.isoformat()}"


def _state(states: set[str]) -> str:
    for state in ("complete", "pruned", "failed", "cut short"):
        if state in states:
            return state
    return "running"


def _attempt_state(records: list[Result]) -> str:
    meta = [r.metadata or {} for r in records]
    if any(is_failure(m) for m in meta):
        return "failed"
    if any(m.get("pruned") or str(m.get("stop_reason") or "").startswith("pruned") for m in meta):
        return "pruned"
    if any(r.preempted for r in records):
        return "cut short"
    return "complete"


def trials(records: Iterable[Result]) -> list[Trial]:
    """The trials the records hold, in trial-number order."""
    attempts: dict[tuple[int, str], dict[tuple[str, str, str], list[Result]]] = {}
    for r in records:
        if (r.metadata or {}).get("intermediate"):
            continue
        attempts.setdefault(_key(r), {}).setdefault(_attempt_key(r), []).append(r)
    out = []
    for key, by_attempt in sorted(attempts.items()):
        first = next(iter(by_attempt.values()))[0]
        trial = Trial(number=key[0], params={k: v for k, v in first.params.items() if k not in _IGNORED})
        _fill(trial, by_attempt)
        out.append(trial)
    return out


def _fill(trial: Trial, by_attempt: dict[tuple[str, str, str], list[Result]]) -> None:
    per_metric: dict[str, list[float]] = {}
    states, costs = set(), []
    for (run, group, _), recs in sorted(by_attempt.items(), key=lambda kv: kv[1][0].ended_at):
        trial.attempts += 1
        if group not in trial.groups:
            trial.groups.append(group)
        state = _attempt_state(recs)
        states.add(state)
        costs.extend(group_costs(recs).values())
        meta = recs[0].metadata or {}
        trial.artifacts_bytes += int(meta.get("artifacts_bytes") or 0)
        trial.storage_usd_month += float(meta.get("storage_usd_month") or 0.0)
        if state != "complete":
            continue
        trial.complete += 1
        trial.where.append((run, group))
        ended = max(r.ended_at for r in recs)
        trial.finished_at = max(trial.finished_at, ended) if trial.finished_at else ended
        own: dict[str, list[float]] = {}
        for r in recs:
            own.setdefault(r.metric, []).append(r.value)
        for metric, values in own.items():
            per_metric.setdefault(metric, []).append(statistics.fmean(values))
    trial.values = {m: statistics.median(v) for m, v in per_metric.items()}
    trial.state = _state(states)
    known = [c for c in costs if c is not None]
    trial.cost_usd = sum(known) if known else None
    if trial.complete and trial.total_usd is not None:  # cost as an objective (a Pareto front)
        for name in COST_METRICS:
            trial.values.setdefault(name, trial.total_usd)


def rank(found: list[Trial], objective: Objective) -> list[Trial]:
    """Trials best first by `objective`; those without its value (not complete, or the
    metric missing) after them, in trial order."""
    scored = [t for t in found if objective.metric in t.values]
    scored.sort(key=lambda t: (-objective.sign * t.values[objective.metric], t.number))
    return scored + [t for t in found if objective.metric not in t.values]


def best(found: list[Trial], objective: Objective) -> Trial | None:
    ranked = rank(found, objective)
    return ranked[0] if ranked and objective.metric in ranked[0].values else None


def varying(found: list[Trial]) -> list[str]:
    """The parameters whose value differs between trials (what the search searched)."""
    keys: set[str] = set().union(*(t.params.keys() for t in found)) if found else set()
    return sorted(k for k in keys
                  if len({json.dumps(t.params.get(k), sort_keys=True, default=str) for t in found}) > 1)


def metrics_of(found: list[Trial]) -> set[str]:
    return set().union(*(t.values.keys() for t in found)) if found else set()
