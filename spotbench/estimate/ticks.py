"""How often a schedule fires: the cron's average per day over whole weeks from a fixed
date (the same answer whenever it is asked), and ticks in a month."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from spotbench.estimate.assumptions import DEFAULT_MONTH_DAYS
from spotbench.spec import SweepSpec

_ANCHOR = datetime(2024, 1, 1)  # a Monday: the count below covers whole weeks from it
_LONG_DAYS = 2800  # 400 weeks (≈ 92 months, leap years included)
_SHORT_DAYS = 28  # 4 weeks, for crons that fire often


def fires_per_day(cron: str, timezone: str = "UTC") -> float:
    """The cron's average fires per day over whole weeks from a fixed date: the same answer
    whenever (date or time of day) it is asked. Frequent crons are counted over 4 weeks,
    others over 400 weeks (so monthly and weekday patterns average out)."""
    start = _ANCHOR.replace(tzinfo=ZoneInfo(timezone))

    def count(days: int, limit: int | None = None) -> int:
        it = croniter(cron, start - timedelta(microseconds=1))
        end, n = start + timedelta(days=days), 0
        while it.get_next(datetime) < end:
            n += 1
            if limit is not None and n > limit:
                break
        return n

    short = count(_SHORT_DAYS, limit=200)
    if short > 200:
        return count(_SHORT_DAYS) / _SHORT_DAYS
    return count(_LONG_DAYS) / _LONG_DAYS


def ticks_per_month(spec: SweepSpec, month_days: float = DEFAULT_MONTH_DAYS) -> float | None:
    """Average start ticks in a month of `month_days` days (None without a schedule)."""
    schedule = spec.cron_schedule  # `schedule: once`: one run, no month
    if schedule is None:
        return None
    return fires_per_day(schedule.cron, schedule.timezone) * month_days

