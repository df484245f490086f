"""The spec's budget (USD) caps a sweep: `start` refuses a group that could overspend it.

    reason = check_budget(spec, store, active, group, now)   # None = go ahead

spent     = the stored cost of every group run so far (each run counted once);
committed = every instance running now, priced for its whole deadline (its results, and so
            its cost, are not stored yet; we do not know how long it has left, so we take
            the most it can run before the deadline stop);
group     = the group about to start, priced for its whole deadline (the most it can cost).
spent + committed + group > budget → refuse. A missing price also refuses (we cannot
promise not to overspend what we cannot price).
"""

from __future__ import annotations

from datetime import datetime

from spotbench.clouds.base import ACTIVE, Instance
from spotbench.costs import Catalog, MissingPrice, group_costs, load_catalog
from spotbench.estimate import group_cost_usd, group_hourly, member_cost_usd
from spotbench.plan import RunGroup
from spotbench.results import ResultStore
from spotbench.spec import SweepSpec

__all__ = ["check_budget", "budget_status", "spent_usd", "committed_usd"]


def _catalog(prices: Catalog | str | None) -> Catalog:
    return prices if isinstance(prices, Catalog) else load_catalog(prices)


def spent_usd(store: ResultStore) -> tuple[float, int]:
    """(USD spent by stored group runs, how many stored runs have no cost)."""
    costs = group_costs(store.read())
    unknown = sum(1 for c in costs.values() if c is None)
    return sum(c for c in costs.values() if c is not None), unknown


def committed_usd(spec: SweepSpec, active: list[Instance], catalog: Catalog,
                  exclude_group: str | None = None) -> float:
    """Instances running now, each priced for the whole deadline (boot + 1-minute minimum)."""
    by_id = {g.id: g for g in spec.plan()}
    total = 0.0
    for inst in active:
        if inst.state not in ACTIVE:
            continue
        gid = inst.group()
        if gid == exclude_group:
            continue
        group = by_id.get(gid or "")
        if group is None:  # not one of this spec's groups: not this budget's money
            continue
        member = next((m for m in group.members if m.name == inst.name), None)
        if member is None:  # an instance of the group we cannot place: its average share
            total += group_cost_usd(spec, group, catalog, spec.deadline.total_seconds()) / len(group.members)
        else:  # priced at its own role's machine type
            total += member_cost_usd(spec, group, member, catalog, spec.deadline.total_seconds())
    return total


def check_budget(spec: SweepSpec, store: ResultStore, active: list[Instance], group: RunGroup,
                 now: datetime | None = None, prices: Catalog | str | None = None) -> str | None:
    """A refusal reason if starting `group` could take the sweep over `spec.budget`, else None."""
    if spec.budget is None:
        return None
    try:
        catalog = _catalog(prices)
        group_hourly(spec, group, catalog)  # fail early, naming the missing row
        spent, unknown = spent_usd(store)
        committed = committed_usd(spec, active, catalog, exclude_group=group.id)
        this = group_cost_usd(spec, group, catalog, spec.deadline.total_seconds())
    except MissingPrice as exc:
        return f"budget check for {group.id} cannot price it: {exc}"
    total = spent + committed + this
    if total > spec.budget + 1e-9:
        note = f" ({unknown} stored runs have no price and count as 0)" if unknown else ""
        return (
            f"budget {spec.budget:.2f} USD would be exceeded by group {group.id}: spent "
            f"{spent:.4f}{note} + running {committed:.4f} + this group up to its deadline "
            f"{this:.4f} = {total:.4f} USD; it stays queued — raise `budget` in the spec to run it"
        )
    return None


def budget_status(spec: SweepSpec, store: ResultStore, active: list[Instance],
                  prices: Catalog | str | None = None) -> dict[str, float | int | None]:
    """For `spotbench status`: budget, spent, committed (USD) and runs without a price."""
    catalog = _catalog(prices)
    spent, unknown = spent_usd(store)
    try:
        committed: float | None = committed_usd(spec, active, catalog)
    except MissingPrice:
        committed = None
    return {"budget": spec.budget, "spent": spent, "committed": committed, "unpriced_runs": unknown}
