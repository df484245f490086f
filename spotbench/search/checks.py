"""A `search:` section against the rest of its spec: what its parameters may name, and
what it cannot be combined with (spec.py asks, with its workload's descriptor's facts)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spotbench.search.spec import COST, SearchSpec


def check_search(search: SearchSpec | None, descriptor: Any, allowed: set[str], matrix: dict[str, Any],
                 trials: int, deployed: bool = False) -> None:
    """Raise ValueError (`search_problem`) when `search` cannot run with its spec; `descriptor`:
    the workload's (`spotbench.workload.Workload`: name, templated fields, metrics, user
    image); `deployed`: a stack deploys the VMs (their boot unit is fixed then)."""
    if search is None:
        return
    if deployed and search.method == "adaptive" and descriptor.user_image is not None:
        raise ValueError(
            f"search.method adaptive with workload {descriptor.name}: on a deployed cloud the "
            "VM runs your image's command as fixed at deploy, so a trial's ${name}s cannot be "
            "filled in at its start; use a design (random, sobol, lhs, grid, csv), a built-in "
            "workload, or the local cloud")
    why = search_problem(search, workload=descriptor.name, allowed=allowed,
                         templated=descriptor.templated, metrics=descriptor.metrics,
                         matrix=bool(matrix), trials=trials)
    if why:
        raise ValueError(why)


def search_problem(search: SearchSpec, *, workload: str, allowed: set[str], templated: Sequence[str],
                   metrics: Sequence[str], matrix: bool, trials: int) -> str | None:
    """Why `search` cannot run with the rest of the spec (one sentence naming the field, the
    value and what is allowed), or None."""
    if matrix:
        return ("search: give `matrix` (every combination) or `search`, not both; a grid "
                "search is `search: {method: grid, space: ...}`")
    if trials != 1:
        return f"trials {trials}: a search repeats each trial with `search.repeats`; leave `trials` out"
    where = " or ".join(f"workload.{f}" for f in templated)
    for name in search.names():
        if name not in allowed:
            hint = f", or write ${{{name}}} in {where}" if where else ""
            return (f"search.space.{name} is not a parameter of workload {workload}; allowed: "
                    f"{', '.join(sorted(allowed))}{hint}")
    for objective in search.objectives:
        if objective.metric != COST and metrics and objective.metric not in metrics:
            return (f"search.objective.metric {objective.metric!r}: workload {workload} records "
                    f"{', '.join(metrics)} (or `{COST}`)")
    return None
