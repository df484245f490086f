"""The study of one search, kept by control in the results store (`journal`): Optuna's
ask/tell, one Optuna trial per search trial (its number in the user attribute
`spotbench_trial`), so a repeated call finds the trial it asked before instead of asking
another.

- `ask(k, point)`: trial k's parameters: the design's point (enqueued, then asked, so the
  study records it with its distributions), or the adaptive sampler's; the same answer
  every time it is asked again.
- `tell(k, values | None)`: COMPLETE with the values, FAIL without; a trial already
  finished is left as it is (Optuna's `skip_if_finished`: repeated `done` calls).
- `report(k, step, value)` → whether the pruner stops trial k; `prune(k)` tells PRUNED.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution,
)
from optuna.storages import JournalStorage
from optuna.storages.journal import BaseJournalBackend
from optuna.trial import FrozenTrial, Trial, TrialState

from spotbench.search.design import distributions, make_pruner, make_sampler
from spotbench.search.spec import SearchSpec

log = logging.getLogger("spotbench.search")

__all__ = ["TRIAL_ATTR", "SearchStudy", "study_name"]

TRIAL_ATTR = "spotbench_trial"


def study_name(sweep: str, search: SearchSpec) -> str:
    """The study of this sweep's search: a changed space, method or objective is a new study
    (n and parallel may change and the study goes on)."""
    what = search.model_dump(mode="json", exclude={"n", "parallel", "repeats"})
    digest = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:8]
    return f"{sweep}-{digest}"


def design_distributions(search: SearchSpec, points: list[dict[str, Any]]) -> dict[str, BaseDistribution]:
    """The distributions a trial's parameters are recorded with: the space's, and for a csv
    design each column's values (numbers: their range; anything else: the choices)."""
    dists = distributions(search)
    if search.method != "csv":
        return dists
    for name in sorted({k for p in points for k in p} - set(search.fixed())):
        values = [p[name] for p in points if name in p]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            dists[name] = IntDistribution(min(values), max(values))
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            dists[name] = FloatDistribution(float(min(values)), float(max(values)))
        else:
            dists[name] = CategoricalDistribution(sorted(set(values), key=repr))
    return dists


class SearchStudy:
    """One search's study over a journal backend (see the module docstring)."""

    def __init__(self, search: SearchSpec, name: str, backend: BaseJournalBackend,
                 points: list[dict[str, Any]]):
        self.search, self.name, self.points = search, name, points
        self.storage = JournalStorage(backend)
        directions = [o.direction for o in search.objectives] or ["maximize"]
        self.study = optuna.create_study(
            study_name=name, storage=self.storage, load_if_exists=True,
            sampler=optuna.samplers.RandomSampler(seed=search.seed),
            pruner=make_pruner(search), directions=directions)
        # each control call builds its sampler afresh: seeded with the search's seed and the
        # trials so far, so the same seed gives the same sequence, never the same draw twice
        self.study.sampler = make_sampler(search, salt=len(self.study.get_trials(deepcopy=False)))
        self.dists = design_distributions(search, points)
        self._trials: dict[int, FrozenTrial] | None = None

    # ---- reading ---------------------------------------------------------------------
    def trials(self) -> dict[int, FrozenTrial]:
        """Search trial number → its Optuna trial (the first, should a crash have made two)."""
        if self._trials is None:
            out: dict[int, FrozenTrial] = {}
            for t in self.study.get_trials(deepcopy=False):
                k = t.user_attrs.get(TRIAL_ATTR)
                if isinstance(k, int) and k not in out and t.state != TrialState.WAITING:
                    out[k] = t
            self._trials = out
        return self._trials

    def state(self, k: int) -> TrialState | None:
        t = self.trials().get(k)
        return None if t is None else t.state

    def _trial(self, k: int) -> Trial:
        frozen = self.trials()[k]
        study_id = self.storage.get_study_id_from_name(self.name)
        return Trial(self.study, self.storage.get_trial_id_from_study_id_trial_number(
            study_id, frozen.number))

    # ---- ask, tell, prune ---------------------------------------------------------------
    def ask(self, k: int) -> dict[str, Any]:
        """Trial k's parameters (searched ones; the fixed values are the spec's): asked once,
        the same answer after."""
        known = self.trials().get(k)
        if known is not None:
            return dict(known.params)
        if self.points:  # a design: its point k, recorded with its distributions
            point = {n: v for n, v in self.points[k - 1].items() if n in self.dists}
            self.study.enqueue_trial(point, user_attrs={TRIAL_ATTR: k})
            trial = self.study.ask(self.dists)
            if trial.user_attrs.get(TRIAL_ATTR) != k:  # someone's stale enqueue came first
                trial.set_user_attr(TRIAL_ATTR, k)
        else:
            trial = self.study.ask(self.dists)
            trial.set_user_attr(TRIAL_ATTR, k)
        self._trials = None
        log.info("search %s: trial %d asked: %s", self.name, k, trial.params)
        return dict(trial.params)

    def tell(self, k: int, values: list[float] | None) -> None:
        """COMPLETE with `values` (one per objective), FAIL with None; a finished trial stays."""
        known = self.trials().get(k)
        if known is None or known.state.is_finished():
            return
        if values is None:
            self.study.tell(known.number, state=TrialState.FAIL, skip_if_finished=True)
        else:
            self.study.tell(known.number, values if len(values) > 1 else values[0],
                            skip_if_finished=True)
        self._trials = None
        log.info("search %s: trial %d told %s", self.name, k, values if values is not None else "FAIL")

    def report(self, k: int, step: int, value: float) -> bool:
        """Note trial k's intermediate value at `step`; whether the pruner stops it now."""
        known = self.trials().get(k)
        if known is None or known.state != TrialState.RUNNING:
            return False
        trial = self._trial(k)
        if step not in known.intermediate_values:
            trial.report(value, step)
            self._trials = None
        return bool(trial.should_prune())

    def prune(self, k: int) -> None:
        known = self.trials().get(k)
        if known is not None and not known.state.is_finished():
            self.study.tell(known.number, state=TrialState.PRUNED, skip_if_finished=True)
            self._trials = None
