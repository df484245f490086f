"""What a sweep will cost before it runs: per group, per schedule tick, per month.

Every figure is a `Line` (quantity × unit price = USD) so a published calculation can be
checked item by item; each section's lines add up to its total. Every assumption (boot and
run time, function memory/duration/calls, disk type, month length, free tier) is an
`Assumptions` field, overridable with `--assume KEY=VALUE` and returned with the numbers.
Members are priced at their own machine type (`role_machine_types`). The month's tick
count is the cron's average over whole weeks from a fixed date: it does not depend on when
the command runs.

The package, one job per module: `assumptions` (what is assumed, `--assume` parsing),
`pricing` (a member's and a group's price), `ticks` (a schedule's fires per month),
`answer` (the figures and the headline in words), `compute` (the estimate itself).
"""

from __future__ import annotations

from spotbench.estimate.answer import (
    BUDGETED, Estimate, GroupCost, Line, headline, search_line, search_summary, usd,
)
from spotbench.estimate.assumptions import (
    ASSUMPTION_KEYS,
    DEFAULT_FUNCTION_MB,
    DEFAULT_FUNCTION_S,
    DEFAULT_MONTH_DAYS,
    Assumptions,
    BadAssumption,
)
from spotbench.estimate.compute import estimate
from spotbench.estimate.pricing import (
    group_cost_usd,
    group_hourly,
    member_cost_usd,
    member_hourly,
    member_type,
    spec_region,
    types_label,
)
from spotbench.estimate.ticks import fires_per_day, ticks_per_month

__all__ = [
    "ASSUMPTION_KEYS", "BUDGETED", "DEFAULT_FUNCTION_MB", "DEFAULT_FUNCTION_S", "DEFAULT_MONTH_DAYS",
    "Assumptions", "BadAssumption", "Estimate", "GroupCost", "Line", "estimate", "fires_per_day",
    "group_cost_usd", "group_hourly", "headline", "member_cost_usd", "member_hourly", "member_type",
    "spec_region", "ticks_per_month", "types_label", "usd", "search_line", "search_summary",
]
