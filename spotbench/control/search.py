"""A search's loop, inside every control call (start tick, the local runner's kick, done,
a group's stop): tell, prune, then ask as slots free.

    settle   trials whose groups all stored a complete result are told their objective
             (read from their records as control reads them; `cost` from control's own
             ledger); a failed command, or a group given up, is told FAIL (never a value, and
             never RUNNING forever: optuna#1641)
    prune    each running trial's new intermediate values (the attempt's intermediate
             records, `runs/<run>/<group>.<n>/intermediate.jsonl`, written with the group's
             own grant: `WorkloadRun.intermediate`, the one progress path) go to the pruner; a pruned trial's groups
             are stopped in this very call, told PRUNED, and what the stop saved is noted
             (`runs/<run>/pruned/<group>.json`, control's own: no grant reaches it)
    ask      a pending group's trial is asked only when it is about to start (after the
             budget admitted it): a design's point, or the adaptive sampler's next one,
             written to the run's ledger entry (`assigned`) for the member to read at boot

A trial that is finished in the study (complete, failed, pruned) counts as done for the
launch pass, in every later run too: it is never run twice. A preempted group is retried
by control as any group is, with the same trial and parameters (the study answers `ask`
with what it asked before), so repeated ticks and `done` calls never make a second trial.
The study is in the results store (`spotbench.search.journal`).
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from spotbench.clouds.base import ACTIVE, Instance
from spotbench.control.sweep import Sweep
from spotbench.failures import is_failure
from spotbench.ledger import launches_of, note_ends
from spotbench.plan import RunGroup
from spotbench.results import Result, StoreError, utcnow
from spotbench.search.spec import COST, SearchSpec

if TYPE_CHECKING:
    from spotbench.search.study import SearchStudy

log = logging.getLogger("spotbench.control")



@dataclass
class SearchLoop:
    """The loop of one control call (one study read per call)."""

    sweep: Sweep
    run: str
    now: datetime | None = None
    study: SearchStudy | None = None
    settled: set[str] = field(default_factory=set)  # groups of finished trials
    pruned: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, sweep: Sweep, run: str, now: datetime | None) -> SearchLoop | None:
        """The loop of a sweep whose search has an objective (else None: its trials are
        plain groups, run like a matrix's)."""
        search = sweep.spec.search
        if search is None or not search.objectives:
            return None
        return cls(sweep, run, now, open_study(sweep))

    @property
    def search(self) -> SearchSpec:
        assert self.sweep.spec.search is not None
        return self.sweep.spec.search

    def trial_groups(self) -> dict[int, list[RunGroup]]:
        out: dict[int, list[RunGroup]] = {}
        for g in self.sweep.groups:
            out.setdefault(g.trial, []).append(g)
        return out

    # ---- settle --------------------------------------------------------------------
    def settle(self, completed: set[str], exhausted: set[str]) -> set[str]:
        """Tell every running trial whose groups are all over; the groups of finished trials."""
        assert self.study is not None
        for k, groups in sorted(self.trial_groups().items()):
            state = self.study.state(k)
            if state is None or state.is_finished():
                continue
            ids = {g.id for g in groups}
            if ids & exhausted:
                log.warning("search: trial %d given up (%s): told FAIL", k, ", ".join(sorted(ids & exhausted)))
                self.study.tell(k, None)
            elif ids <= completed:
                self._report_all(k, groups)  # its curve, for the pruner's later comparisons
                self.study.tell(k, self.values(groups))
        self.settled = {g.id for k, groups in self.trial_groups().items()
                        if (s := self.study.state(k)) is not None and s.is_finished() for g in groups}
        return self.settled

    def _report_all(self, k: int, groups: list[RunGroup]) -> None:
        assert self.study is not None
        if self.search.pruner is None:
            return
        for step, value in read_progress(self.sweep, self.run, groups, self.search.objectives[0].metric):
            self.study.report(k, step, value)

    def values(self, groups: list[RunGroup]) -> list[float] | None:
        """The trial's objective values (the mean over its repeats), None when it failed or
        recorded no objective."""
        records = [r for g in groups for r in complete_records(self.sweep, self.run, g.id)]
        if not records or any(is_failure(r.metadata) for r in records):
            return None
        out = []
        for objective in self.search.objectives:
            if objective.metric == COST:
                cost = trial_cost_usd(self.sweep, groups, self.now)
                if cost is None:
                    return None
                out.append(cost)
                continue
            per_group = [objective_value(records, g.id, objective.metric) for g in groups]
            if any(v is None for v in per_group):
                log.warning("search: %s recorded no %s: told FAIL", groups[0].id, objective.metric)
                return None
            out.append(statistics.fmean(v for v in per_group if v is not None))
        return out

    # ---- prune ---------------------------------------------------------------------
    def prune(self, states: dict[str, list[Instance]]) -> list[str]:
        """Report new intermediate values; stop and tell PRUNED the trials the pruner stops.
        The groups stopped."""
        assert self.study is not None
        if self.search.pruner is None:
            return []
        metric = self.search.objectives[0].metric
        stopped: list[str] = []
        for k, groups in sorted(self.trial_groups().items()):
            if self.study.state(k) is None or self.study.state(k).is_finished():  # type: ignore[union-attr]
                continue
            running = [g for g in groups if any(i.state in ACTIVE for i in states.get(g.id, []))]
            steps = read_progress(self.sweep, self.run, running, metric)
            if not any(self.study.report(k, step, value) for step, value in steps):
                continue
            for group in running:
                saved = self._stop_pruned(group, states, max((s for s, _ in steps), default=0))
                log.warning("search: trial %d pruned: %s stopped (saved ≈ %.4f USD)", k, group.id, saved)
                stopped.append(group.id)
            self.study.prune(k)
        self.pruned = stopped
        return stopped

    def _stop_pruned(self, group: RunGroup, states: dict[str, list[Instance]], step: int) -> float:
        after = self.sweep.cloud.stop(group.labels)
        names = {i.name for i in after}
        states[group.id] = [*after, *(i for i in states.get(group.id, []) if i.name not in names)]
        note_ends(self.sweep.store, self.run, {group.id}, self.now)
        return note_pruned(self.sweep, self.run, group, step, self.now)

    # ---- ask -----------------------------------------------------------------------
    def ask(self, group: RunGroup) -> None:
        """Ask `group`'s trial (once; again: the same parameters); an adaptive trial's
        parameters go to the run's ledger entry for its members."""
        assert self.study is not None
        params = self.study.ask(group.trial)
        if self.search.method == "adaptive":
            point = {**self.search.fixed(), **params}
            spec = self.sweep.spec
            own = spec.params_for(point).model_dump(mode="json")
            extra = {k: v for k, v in point.items() if k not in own}
            self.sweep.store.assign(self.run, group.id, {**own, **extra})


def open_study(sweep: Sweep) -> SearchStudy:
    """The sweep's study, resumed from the results store (created the first time). Optuna
    is imported here: a sweep without a search never loads it (the functions' cold start)."""
    from spotbench.search.journal import journal_backend
    from spotbench.search.study import SearchStudy, study_name

    search = sweep.spec.search
    assert search is not None
    name = study_name(sweep.spec.name, search)
    store = sweep.store
    backend = journal_backend(store.fs, store.path("search", f"{name}.journal"),
                              store.conditional_objects())
    return SearchStudy(search, name, backend, sweep.spec.points())


def complete_records(sweep: Sweep, run: str, group: str) -> list[Result]:
    """The records of `group`'s complete attempts in `run` (neither preempted nor flagged),
    as control reads them (bounded, checked against their path)."""
    flags = sweep.store.flags(run)
    out = []
    for path in sweep.store.group_files(run, group):
        key = path.rsplit("/", 1)[-1].removesuffix(".jsonl")
        records = sweep.store.load_attempt(path) or []
        if key in flags or any(r.preempted for r in records):
            continue
        out.extend(records)
    return out


def objective_value(records: list[Result], group: str, metric: str) -> float | None:
    """`metric` of one group: the mean of its final values (records without a `step`
    label), else its last step's value; None when it recorded none."""
    mine = [r for r in records if r.group == group and r.metric == metric]
    final = [r.value for r in mine if "step" not in (r.metadata.get("labels") or {})]
    if final:
        return statistics.fmean(final)
    if mine:
        return max(mine, key=lambda r: r.metadata.get("labels", {}).get("step", 0)).value
    return None


def trial_cost_usd(sweep: Sweep, groups: list[RunGroup], now: datetime | None = None) -> float | None:
    """What the trial's groups cost: every launch of theirs in control's own ledger
    (launch → end), at the groups' price — never what a VM wrote. None (logged) when the
    catalog has no price for them: the trial is then told FAIL, not a made-up cost."""
    from spotbench.costs import MissingPrice, billed_seconds, load_catalog
    from spotbench.estimate import group_hourly

    ids = {g.id: g for g in groups}
    now = sweep_now(now)
    total = 0.0
    try:
        catalog = load_catalog(sweep.prices)
        for launch in launches_of(sweep.store):
            group = ids.get(launch.group)
            if group is None:
                continue
            machine, gpu = group_hourly(sweep.spec, group, catalog)
            total += (machine + gpu) * billed_seconds((launch.end(now) - launch.at).total_seconds()) / 3600
    except MissingPrice as exc:
        log.warning("search: no price for %s, its cost objective is unknown: %s", groups[0].id, exc)
        return None
    return total


def sweep_now(now: datetime | None) -> datetime:
    return now or utcnow()


def read_progress(sweep: Sweep, run: str, groups: list[RunGroup], metric: str) -> list[tuple[int, float]]:
    """(step, value) of `metric` the groups' members reported (their latest attempt's
    intermediate records, bounded and checked against their group by the store), in step
    order (a step reported by several repeats: their mean). Unusable records are skipped."""
    by_step: dict[int, list[float]] = {}
    for group in groups:
        try:
            records = sweep.store.intermediate(run, group.id)
        except StoreError:
            continue
        for record in records:
            step = pruner_step(record.metadata)
            if record.metric == metric and step is not None:
                by_step.setdefault(step, []).append(float(record.value))
    return [(step, statistics.fmean(v)) for step, v in sorted(by_step.items())]


def pruner_step(metadata: dict[str, Any]) -> int | None:
    """The pruner's step of an intermediate value: a whole `epoch` when the workload gives
    epochs (a mid-epoch value, a resumed attempt's last, is none), else an integer `step`."""
    def whole(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_PROGRESS_STEPS

    if "epoch" in metadata:
        epoch = metadata["epoch"]
        return epoch if whole(epoch) else None
    return metadata["step"] if whole(metadata.get("step")) else None


MAX_PROGRESS_STEPS = 10_000  # a member's steps per group the pruner takes


def note_pruned(sweep: Sweep, run: str, group: RunGroup, step: int, now: datetime | None) -> float:
    """Note a pruned group and the dollars its stop saved: its price per hour × what it
    would still have run (the median run of the complete trials' launches, else its
    deadline) beyond what it ran. Best effort: returns the saving (0 when unpriced)."""
    from spotbench.costs import MissingPrice, load_catalog
    from spotbench.estimate import group_hourly

    now = sweep_now(now)
    launches = launches_of(sweep.store, run)
    mine = [x for x in launches if x.group == group.id]
    ran = (now - mine[-1].at).total_seconds() if mine else 0.0
    pruned = sweep.store.pruned_groups(run)
    full = [(x.end(now) - x.at).total_seconds() for x in launches
            if x.ended is not None and x.group != group.id and x.group not in pruned]
    expected = statistics.median(full) if full else sweep.spec.deadline.total_seconds()
    try:
        machine, gpu = group_hourly(sweep.spec, group, load_catalog(sweep.prices))
    except MissingPrice:
        machine, gpu = 0.0, 0.0
    saved = max(0.0, expected - ran) * (machine + gpu) / 3600
    body = {"group": group.id, "trial": group.trial, "at": now.isoformat(), "step": step,
            "ran_s": ran, "expected_s": expected, "hourly_usd": machine + gpu, "saved_usd": saved}
    try:
        sweep.store.note_pruned(run, group.id, body)
    except StoreError as exc:
        log.warning("pruned %s not noted: %s", group.id, exc)
    return saved


def pruning_savings(sweep_store: Any, run: str | None = None) -> list[dict[str, Any]]:
    """Every pruned group's note (what the report shows as the dollars pruning saved)."""
    return list(sweep_store.pruning_notes(run))
