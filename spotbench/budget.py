"""The spec's budget (USD) caps a sweep: `start` refuses a group that could overspend it.

    reason = check_budget(spec, store, active, group, now)   # None = go ahead

spent     = every launch of the sweep so far, from control's own ledger (launch → the end control
            recorded; no end yet: until now, at most its deadline), × the catalog price of the
            group's machines. Costs inside the stored records are the member's word and are
            never read here (a negative or NaN one would lift the cap), nor are records at all
            (a group writing 10^5 lines cannot make a budget check big);
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
from spotbench.costs import Catalog, MissingPrice, billed_seconds, load_catalog
from spotbench.estimate import group_cost_usd, group_hourly, member_cost_usd
from spotbench.facts import facts_of
from spotbench.ledger import launches_of
from spotbench.plan import RunGroup
from spotbench.results import ResultStore, SpentSummary, utcnow
from spotbench.spec import SweepSpec

__all__ = ["check_budget", "budget_status", "spent_usd", "committed_usd"]


def _catalog(prices: Catalog | str | None) -> Catalog:
    return prices if isinstance(prices, Catalog) else load_catalog(prices)


def spent_usd(spec: SweepSpec, store: ResultStore, catalog: Catalog, active: list[Instance],
              now: datetime | None = None, *, keep: bool = False) -> tuple[float, int]:
    """(USD spent by every launch in the ledger, launches of groups this spec does not price).

    A running group's current launch is left to `committed_usd` (priced there for its whole
    deadline). A launch with no recorded end counts until now, at most its deadline + boot.

    Bounded by the open run, not the history (issue #38): the spend through a closed run is
    kept in the store's `spent.json` (`SpentSummary`); only the runs after it are read — the
    open one, and runs closed since, which are then added to it when `keep` (the budget
    check, under the control lock). A run is added once its spend is final: closed, and
    every launch ended or past its deadline + boot."""
    now = now or utcnow()
    running = {inst.group() for inst in active if inst.state in ACTIVE}
    summary = store.spent_summary()
    ids = store.run_ids()
    later = [r for r in ids if summary is None or r > summary.through]
    open_runs = {r.run for r in store.recent_runs(ids=ids) if r.closed_at is None}
    base_usd, base_unknown = (summary.usd, summary.unknown) if summary else (0.0, 0)
    total, unknown = base_usd, base_unknown
    final: list[tuple[str, float, int]] = []
    settled = True  # every run before this one is final: it may join the summary
    for run in later:
        usd, missing, done = _run_spend(spec, store, catalog, run, running, now)
        total, unknown = total + usd, unknown + missing
        settled = settled and done and run not in open_runs
        if settled:
            final.append((run, usd, missing))
    if keep and final:
        store.write_spent_summary(SpentSummary(
            through=final[-1][0], runs=(summary.runs if summary else 0) + len(final),
            usd=base_usd + sum(f[1] for f in final),
            unknown=base_unknown + sum(f[2] for f in final)))
    return total, unknown


def _run_spend(spec: SweepSpec, store: ResultStore, catalog: Catalog, run: str,
               running: set[str | None], now: datetime) -> tuple[float, int, bool]:
    """(USD, unpriced launches, whether the figure is final) of one run's launches."""
    by_id = {g.id: g for g in spec.plan()}
    most_s = spec.deadline.total_seconds() + facts_of(spec.cloud).boot_s
    total, unknown, final = 0.0, 0, True
    for launch in launches_of(store, run):
        group = by_id.get(launch.group)
        if group is None:  # a group of an earlier spec: not priced here
            unknown += 1
            continue
        current = launch.ended is None and launch.next_at is None
        if current and launch.group in running:
            final = False
            continue
        seconds = (launch.end(now) - launch.at).total_seconds()
        if launch.ended is None:
            final = final and seconds >= most_s
            seconds = min(seconds, most_s)
        machine, gpu = group_hourly(spec, group, catalog)
        total += (machine + gpu) * billed_seconds(seconds) / 3600
    return total, unknown, final


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
        spent, unknown = spent_usd(spec, store, catalog, active, now, keep=True)
        committed = committed_usd(spec, active, catalog, exclude_group=group.id)
        this = group_cost_usd(spec, group, catalog, spec.deadline.total_seconds())
    except MissingPrice as exc:
        return f"budget check for {group.id} cannot price it: {exc}"
    total = spent + committed + this
    if total > spec.budget + 1e-9:
        note = (f" ({unknown} launches of groups no longer in the spec count as 0)"
                if unknown else "")
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
    try:
        spent: float | None
        spent, unknown = spent_usd(spec, store, catalog, active)
    except MissingPrice:
        spent, unknown = None, 0
    try:
        committed: float | None = committed_usd(spec, active, catalog)
    except MissingPrice:
        committed = None
    return {"budget": spec.budget, "spent": spent, "committed": committed, "unpriced_runs": unknown}
