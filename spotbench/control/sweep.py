"""What control knows of one sweep (spec, cloud, store, plan, budget check) and the
sweep's control lock: the cloud's own, else the lease in the results store, whose holder is
fenced (it checks it still holds the lease before each action that changes the world)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from spotbench.clouds.base import Cloud, Instance
from spotbench.lease import fenced
from spotbench.plan import RunGroup
from spotbench.results import ResultStore
from spotbench.spec import SweepSpec

BudgetCheck = Callable[[SweepSpec, ResultStore, list[Instance], RunGroup, datetime], "str | None"]


@dataclass
class Sweep:
    """Everything the control logic needs about one sweep."""

    spec: SweepSpec
    cloud: Cloud
    store: ResultStore
    groups: list[RunGroup] = field(default_factory=list)
    budget_check: BudgetCheck | None = None
    prices: str | None = None  # a CSV of price rows overriding the catalog (SPOTBENCH_PRICES)

    def __post_init__(self) -> None:
        if not self.groups:
            self.groups = self.spec.plan()
        if self.budget_check is None and self.spec.budget is not None:
            from spotbench.budget import check_budget

            self.budget_check = functools.partial(check_budget, prices=self.prices)

    @contextlib.contextmanager
    def lock(self, action: str) -> Iterator[None]:
        """The sweep's control lock: the cloud's own when it has one (the local cloud: a file
        lock beside its database), else the lease `control.lock` in the results store."""
        lock = getattr(self.cloud, "lock", None)
        once = getattr(self.store, "listed_once", contextlib.nullcontext)  # runs/ listed once
        with lock() if lock is not None else self.store.lease("control", holder=action) as held, \
                once():
            check = getattr(held, "check", None)
            if check is None:  # an OS lock: its holder cannot lose it while alive
                yield
                return
            cloud, store = self.cloud, self.store  # fenced: a holder that lost the lease stops
            self.cloud = fenced(cloud, check, CLOUD_ACTIONS)
            self.store = fenced(store, check, STORE_ACTIONS)
            try:
                yield
            finally:
                self.cloud, self.store = cloud, store


# what changes the world: a lease holder checks it still holds the lease before each
CLOUD_ACTIONS = frozenset({"start", "stop", "terminate", "delete"})
STORE_ACTIONS = frozenset({"open_run", "close_run", "close_open_runs", "flag", "record_start",
                           "record_launch", "forget_launch", "write_spent_summary",
                           "record_user_stop",
                           "assign", "note_pruned"})
