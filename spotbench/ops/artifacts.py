"""`spotbench artifacts SPEC --best`: the files of a search's best trial (or of a named one).

The trial is picked from the stored records (`report.trials`: median of complete attempts,
by the objective: `--metric`, else the spec's `search.objective`); its files are those of
its newest complete attempt that stored any (`runs/<run>/<group>.<n>/artifacts/…`,
`ResultStore.artifacts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotbench.report.trials import Objective, Trial, best, objectives_of_spec, parse_objectives, trials
from spotbench.results import ResultStore


class NoArtifacts(LookupError):
    """Nothing to download; the message says why and what to do."""


@dataclass
class Download:
    trial: Trial
    run: str
    group: str
    attempt: int
    objective: Objective | None
    files: list[Path] = field(default_factory=list)


def objective_for(spec: Any, metric: str | None, direction: str | None) -> Objective | None:
    """`--metric` (with `--direction`), else the spec's first `search.objective`."""
    if metric:
        return parse_objectives(f"{metric}:{direction or 'max'}")[0]
    found = objectives_of_spec(spec)
    return found[0] if found else None


def pick(found: list[Trial], objective: Objective | None, trial: int | None, group: str | None) -> Trial:
    """The trial asked for: `trial` number, `group`, else the best by `objective`."""
    if trial is not None or group is not None:
        chosen = [t for t in found if (trial is None or t.number == trial) and (group is None or group in t.groups)]
        if not chosen:
            known = ", ".join(str(t.number) for t in found[:20]) or "none"
            raise NoArtifacts(f"no trial {'number ' + str(trial) if trial is not None else ''}"
                              f"{' of group ' + group if group else ''} in the results (trials: {known})")
        if len(chosen) > 1:
            raise NoArtifacts(f"{len(chosen)} trials have number {trial} (a matrix numbers each "
                              "point's trials from 0): add --group GROUP (spotbench status lists them)")
        return chosen[0]
    if objective is None:
        raise NoArtifacts("which trial is best? give --metric METRIC [--direction max|min] "
                          "(the spec has no search.objective), or --trial N")
    top = best(found, objective)
    if top is None:
        raise NoArtifacts(f"no complete trial reported {objective.metric}: check the metric name "
                          f"(these are reported: {', '.join(sorted(_metrics(found))) or 'none'})")
    return top


def _metrics(found: list[Trial]) -> set[str]:
    return set().union(*(t.values for t in found)) if found else set()


def locate(store: ResultStore, chosen: Trial) -> tuple[str, str, int, dict[str, int]]:
    """(run, group, attempt, files) of the trial's newest complete attempt holding files."""
    for run, group in reversed(chosen.where):
        complete = sorted((a.attempt for a in store.attempts(run) if a.group == group and not a.preempted),
                          reverse=True)
        for attempt in complete:
            files = store.artifacts(run, group, attempt)
            if files:
                return run, group, attempt, files
    raise NoArtifacts(f"{chosen.label} (group {', '.join(chosen.groups)}) stored no artifacts: a "
                      "workload stores what it writes to $SPOTBENCH_ARTIFACTS_DIR (tf-mnist: its "
                      "weights); an attempt cut short stores none")


def download(store: ResultStore, out: Path, *, objective: Objective | None, trial: int | None = None,
             group: str | None = None) -> Download:
    found = trials(store.read())
    if not found:
        raise NoArtifacts(f"no results under {store.url} yet: run the sweep first")
    chosen = pick(found, objective, trial, group)
    run, group_id, attempt, _ = locate(store, chosen)
    got = Download(chosen, run, group_id, attempt, objective)
    got.files = store.download_artifacts(run, group_id, attempt, out)
    return got
