"""A search's design: the points a non-adaptive method draws (the same seed gives the same
points), the Optuna distributions of its space, and the adaptive samplers and pruners.

Every point comes from a library: Optuna's RandomSampler (random), QMCSampler (sobol,
halton: scipy's scrambled sequences), GridSampler (grid), scipy.stats.qmc.LatinHypercube
(lhs, which Optuna has no sampler for), the csv rows as given; adaptive methods ask
TPESampler, GPSampler, CmaEsSampler or NSGAIISampler in control (`spotbench.search.study`).
"""

from __future__ import annotations

import logging
import math
import warnings
from typing import Any

from spotbench.search.spec import Choice, Distribution, IntRange, LogUniform, SearchSpec, Uniform

__all__ = ["search_design", "design_points", "distributions", "make_pruner", "make_sampler", "space_lines"]


def distributions(search: SearchSpec) -> dict[str, Any]:
    """The searched parameters as Optuna distributions, in name order."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    out: dict[str, Any] = {}
    for name, d in search.searched().items():
        if isinstance(d, Uniform):
            out[name] = FloatDistribution(*d.uniform)
        elif isinstance(d, LogUniform):
            out[name] = FloatDistribution(*d.loguniform, log=True)
        elif isinstance(d, IntRange):
            out[name] = IntDistribution(*d.int)
        else:
            out[name] = CategoricalDistribution(list(d.choice))
    return out


def _quiet() -> None:
    import optuna

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("optuna").setLevel(logging.WARNING)


def design_points(search: SearchSpec) -> list[dict[str, Any]]:
    """The trials' parameters of a non-adaptive design, trial 1 first (fixed values in
    every point); adaptive: [] (control asks its sampler as slots free)."""
    fixed = search.fixed()
    if search.method == "adaptive":
        return []
    if search.method == "csv":
        rows = (search.points or [])[: search.n or None]
        return [{**fixed, **row} for row in rows]
    if search.method == "lhs":
        drawn = _latin_hypercube(search)
    else:
        drawn = _optuna_design(search)
    return [{**fixed, **p} for p in drawn]


_DESIGNS: dict[str, list[dict[str, Any]]] = {}


def search_design(search: SearchSpec) -> list[dict[str, Any]]:
    """`design_points(search)`, computed once per search (plan, checks and control ask)."""
    key = search.model_dump_json()
    if key not in _DESIGNS:
        _DESIGNS[key] = design_points(search)
    return [dict(p) for p in _DESIGNS[key]]


def grid_size(search: SearchSpec) -> int:
    return math.prod(len(_grid_values(d)) for d in search.searched().values())


def _grid_values(d: Distribution) -> list[Any]:
    if isinstance(d, IntRange):
        return list(range(d.int[0], d.int[1] + 1))
    assert isinstance(d, Choice)
    return list(d.choice)


def _optuna_design(search: SearchSpec) -> list[dict[str, Any]]:
    """Ask `n` trials of an in-memory study under the method's Optuna sampler."""
    import optuna
    from optuna.trial import create_trial

    _quiet()
    dists = distributions(search)
    n = search.n or 0
    if search.method == "grid":
        n = min(n or grid_size(search), grid_size(search))
        sampler: Any = optuna.samplers.GridSampler(
            {k: _grid_values(d) for k, d in search.searched().items()}, seed=search.seed)
    elif search.method in ("sobol", "halton"):
        sampler = optuna.samplers.QMCSampler(qmc_type=search.method, seed=search.seed, scramble=True)
    else:
        sampler = optuna.samplers.RandomSampler(seed=search.seed)
    study = optuna.create_study(sampler=sampler)
    if search.method in ("sobol", "halton"):
        # QMCSampler takes its space from the first finished trial: a finished trial naming the
        # space (not a design point; the sequence's first sample goes to the first asked trial)
        study.add_trial(create_trial(params={k: _low(d) for k, d in dists.items()},
                                     distributions=dists, value=0.0))
    points = []
    with warnings.catch_warnings():  # Sobol's "balance properties" note for n not a power of 2
        warnings.simplefilter("ignore")
        for i in range(n):
            trial = study.ask(dists)
            points.append(dict(trial.params))
            if i < n - 1:  # the next asks see it finished (GridSampler: visited; after the
                study.tell(trial, 0.0)  # last point it would stop the study)
    return points


def _low(d: Any) -> Any:
    return d.choices[0] if hasattr(d, "choices") else d.low


def _latin_hypercube(search: SearchSpec) -> list[dict[str, Any]]:
    """scipy.stats.qmc.LatinHypercube's `n` points in the unit cube, each coordinate mapped
    onto its parameter (uniform, log-uniform, integers, choices: equal slices)."""
    from scipy.stats import qmc

    space = search.searched()
    unit = qmc.LatinHypercube(d=len(space), seed=search.seed).random(search.n or 0)
    return [{name: _from_unit(d, float(u)) for (name, d), u in zip(space.items(), row, strict=True)}
            for row in unit]


def _from_unit(d: Distribution, u: float) -> Any:
    if isinstance(d, Uniform):
        lo, hi = d.uniform
        return lo + u * (hi - lo)
    if isinstance(d, LogUniform):
        lo, hi = d.loguniform
        return math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
    values = _grid_values(d)
    return values[min(len(values) - 1, int(u * len(values)))]


def make_sampler(search: SearchSpec, salt: int = 0) -> Any:
    """The Optuna sampler control asks: the adaptive method's, else a random one (control
    enqueues a design's points, so it is never consulted for them). `salt`: the trials the
    study has (a sampler is built per control call; see `SearchStudy`)."""
    import optuna

    _quiet()
    s = optuna.samplers
    seed = (search.seed * 1_000_003 + salt) % 2**32
    if search.sampler == "tpe":
        return s.TPESampler(seed=seed, multivariate=True, constant_liar=True,
                            n_startup_trials=max(2, min(10, (search.n or 10) // 4)))
    if search.sampler == "gp":
        return s.GPSampler(seed=seed, n_startup_trials=max(2, min(10, (search.n or 10) // 4)))
    if search.sampler == "cmaes":
        return s.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    if search.sampler == "nsga2":
        return s.NSGAIISampler(seed=seed, population_size=max(2, min(50, search.parallel * 2)))
    return s.RandomSampler(seed=seed)


def make_pruner(search: SearchSpec) -> Any:
    import optuna

    p = optuna.pruners
    if search.pruner == "median":
        return p.MedianPruner(n_startup_trials=2, n_warmup_steps=0)
    if search.pruner == "successive_halving":
        return p.SuccessiveHalvingPruner()
    if search.pruner == "hyperband":
        return p.HyperbandPruner()
    return p.NopPruner()


def space_lines(search: SearchSpec) -> list[str]:
    """The space and method as people read them (plan's output for an adaptive search)."""
    lines = []
    for name, d in sorted(search.space.items()):
        if isinstance(d, Choice):
            lines.append(f"{name}: one of {', '.join(map(str, d.choice))}")
        elif isinstance(d, (Uniform, LogUniform, IntRange)):
            lo, hi = d.bounds()
            lines.append(f"{name}: {d.kind()} {lo} … {hi}")
        else:
            lines.append(f"{name}: {d!r} (fixed)")
    how = f"{search.method}" + (f" ({search.sampler} sampler)" if search.sampler else "")
    lines.append(f"method: {how}, n {search.n}, seed {search.seed}, parallel {search.parallel}"
                 + (f", pruner {search.pruner}" if search.pruner else ""))
    return lines
