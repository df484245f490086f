"""`schedule: once` (issue #39): one run and nothing standing after it but the results.

On the local cloud `spotbench run SPEC` drives it: the run (`localrun`), then — whatever
way the run ended, Ctrl-C included — the sweep's teardown with `--yes`: the stack destroyed (its results bucket is
`retain_on_delete`, infra/once.py) and the orphan sweep, which never lists results. On the
local cloud the teardown removes every instance row and the functions server, then the
sweep's state folder (its secret, cloud.db, schedule); the members' logs move beside the
report first. What is left: the results store and the report. (On gcp/aws the stack
declares no scheduler and keeps its bucket, infra/once.py; a `spotbench run` that deploys,
starts, waits and tears down there is not built yet: issue #39.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from spotbench.clouds import get_provider
from spotbench.ops._resources import TeardownReport
from spotbench.ops.teardown import StackDestroyer, sweeper_for, teardown
from spotbench.spec import SweepSpec

T = TypeVar("T")
Echo = Callable[[str], None]

__all__ = ["OnceLeftovers", "after_the_run", "run_then_teardown"]


class OnceLeftovers(RuntimeError):
    """The run is over but the teardown could not remove everything: names what is left
    and the command that removes it."""


@dataclass
class Ended:
    """What the teardown after a run-once did: its report, and where the logs went."""

    report: TeardownReport
    logs: Path | None = None


def run_then_teardown(spec: SweepSpec, run: Callable[[], T], *, root: Path | None = None,
                      destroy_stack: StackDestroyer | None = None, logs_to: Path | None = None,
                      echo: Echo = print,
                      spare: tuple[type[BaseException], ...] = ()) -> tuple[T, Ended]:
    """`run()`, then the teardown of everything but the results, even when `run` raised
    (except one of `spare`: e.g. another live run of the sweep, which owns what stands)."""
    try:
        outcome = run()
    except spare:
        raise
    except BaseException:
        after_the_run(spec, root=root, destroy_stack=destroy_stack, logs_to=logs_to, echo=echo)
        raise
    return outcome, after_the_run(spec, root=root, destroy_stack=destroy_stack,
                                  logs_to=logs_to, echo=echo)


def after_the_run(spec: SweepSpec, *, root: Path | None = None,
                  destroy_stack: StackDestroyer | None = None, logs_to: Path | None = None,
                  echo: Echo = print) -> Ended:
    """Tear down what the run stood on (raises `OnceLeftovers` naming what is left)."""
    echo(f"{spec.name}: schedule: once: the run is over; tearing down everything but the results")
    report = teardown(spec.name, sweeper_for(spec.cloud, spec, root=root), yes=True,
                      destroy_stack=destroy_stack, echo=echo)
    failed_stack = [n for n in report.notes if "failed" in n or "not destroyed" in n]
    if report.failed or failed_stack:
        what = [r.describe() for r, _ in report.failed] + failed_stack
        raise OnceLeftovers(f"{spec.name}: the run is over but teardown left {'; '.join(what)}: "
                            f"run `spotbench teardown SPEC --yes`")
    logs = get_provider(spec.cloud).run_state_removed(spec, root, logs_to)
    echo(f"{spec.name}: nothing left but the results: {spec.results_url()}")
    return Ended(report, logs)
