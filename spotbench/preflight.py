"""`spotbench preflight SPEC`: will `pulumi up` and the first run work? Asked of the cloud.

Before anything is created, the sweep's provider checks with the cloud's own APIs that the
credentials work, the APIs are enabled, the machine types and accelerators exist where the
spec puts them, and the spot quota covers the sweep's largest concurrent footprint (the
`concurrency` biggest groups at once); then the guardrails (spotbench/policy.py) and the
budget (one run priced at its deadline must fit). Every problem is one `Problem` line:
what is wrong and the command or change that fixes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from spotbench.clouds import get_provider
from spotbench.costs import load_catalog
from spotbench.estimate import estimate
from spotbench.interfaces import Problem
from spotbench.policy import PolicyError, effective
from spotbench.spec import SweepSpec

__all__ = ["Problem", "budget_problems", "preflight"]


def budget_problems(spec: SweepSpec, prices: Path | str | None = None) -> list[Problem]:
    """One run priced with every group until its deadline must fit in `budget`."""
    if spec.budget is None:
        return []
    try:
        est = estimate(spec, load_catalog(prices), records=[])
    except (KeyError, LookupError, ValueError) as exc:
        return [Problem("budget", f"cannot price one run: {exc}",
                        "add the missing price rows with SPOTBENCH_PRICES=prices.csv")]
    one_run = sum(g.deadline_usd for g in est.groups) + est.total(
        [line for line in est.per_tick if line.item not in ("compute", "GPU")])
    if one_run > spec.budget:
        return [Problem("budget", f"budget ${spec.budget:.2f} does not cover one run "
                        f"(${one_run:.2f} if every group runs until its deadline)",
                        "raise `budget`, shorten `deadline` or drop matrix values")]
    return []


def preflight(spec: SweepSpec, spec_path: Path | None = None,
              env: Mapping[str, str] | None = None) -> list[Problem]:  # fmt: skip
    """Every problem found, in check order; [] means go ahead."""
    problems: list[Problem] = []
    try:
        _, broken = effective(spec, spec_path, env)
        problems += [Problem("policy", line, "change the spec, or ask the policy's owner")
                     for line in broken]
    except PolicyError as exc:
        problems.append(Problem("policy", str(exc), "fix spotbench-policy.yaml"))
    problems += get_provider(spec.cloud).preflight(spec, env)
    problems += budget_problems(spec, (env or {}).get("SPOTBENCH_PRICES") or None)
    return problems
