"""Cron arithmetic the clouds' schedulers need, checked before anything is deployed.

- `shift_cron(cron, deadline)`: the stop cron = start cron + deadline (GCP Cloud Scheduler
  and EventBridge Scheduler alike), refused with the reason when cron cannot express it, or
  when the deadline is not shorter than the gap between two starts;
- `aws_cron(cron)`: five-field cron → EventBridge Scheduler `cron(...)` (six fields, `?` in
  one day field, weekdays by name).

Spec validation calls both, so `spotbench plan` refuses what `pulumi up` would.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta

from croniter import croniter


class CronShiftError(ValueError):
    pass


_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day-of-month", 1, 31), ("month", 1, 12),
           ("day-of-week", 0, 7))
_SHAPE = "minute hour day-of-month month day-of-week, e.g. '0 3 * * *' for 03:00 daily"


def cron_problem(cron: str) -> str | None:
    """What is wrong with a five-field cron, naming the field (None when it is valid)."""
    parts = cron.split()
    if len(parts) != 5:
        return f"has {len(parts)} field(s), a cron has five: {_SHAPE}"
    for part, (name, lo, hi) in zip(parts, _FIELDS):
        for item in part.split(","):
            base, _, step = item.partition("/")
            if step and not step.isdigit():
                return f"the {name} field {part!r}: the step {step!r} is not a whole number"
            for bound in [] if base in ("*", "?") else base.split("-"):
                if bound.isdigit() and not lo <= int(bound) <= hi:
                    return f"the {name} field {part!r} is out of range: {bound} is not within {lo}-{hi}"
    if not croniter.is_valid(cron):
        return f"is not a valid cron expression ({_SHAPE})"
    return None


def _field(values: list) -> str:
    return ",".join(str(v) for v in sorted(values))


def shift_cron(cron: str, delta: timedelta) -> str:
    """The five-field cron that fires `delta` (rounded up to whole minutes) after `cron`.

    Handles explicit minute/hour lists (crossing midnight is fine when the day fields are
    '*', or when only day-of-week is set and every start crosses midnight alike) and
    hourly crons ('*' hour, day fields '*'). Refuses, with the reason, a shift that cron
    cannot express exactly, and a deadline not shorter than the gap between two starts
    (the stop of one run would kill the next).
    """
    minutes_total = math.ceil(delta.total_seconds() / 60)
    fields = cron.split()
    mins, hours, doms, months, dows = croniter.expand(cron)[0]
    days_free = doms == ["*"] and months == ["*"] and dows == ["*"]
    _check_gap(cron, minutes_total)
    if mins == ["*"]:
        raise CronShiftError(f"cron {cron!r} fires every minute; give a fixed minute")
    if hours == ["*"]:
        return _shift_hourly(cron, fields, mins, minutes_total, days_free)
    shifted = {(h * 60 + m + minutes_total) for h in hours for m in mins}
    new_hours, new_mins = _grid(cron, shifted, minutes_total)
    carries = {t // 1440 for t in shifted}
    day_fields = fields[2:]
    if carries != {0} and not days_free:
        day_fields = _next_weekdays(cron, fields, carries, doms, months, dows, minutes_total)
    return " ".join([_field(new_mins), _field(new_hours), *day_fields])


def _shift_hourly(cron: str, fields: list[str], mins: list, minutes_total: int,
                  days_free: bool) -> str:
    """An hourly cron ('*' hour) shifted: only its minutes move."""
    if not days_free:
        raise CronShiftError(
            f"cron {cron!r}: an hourly schedule limited to some days cannot be shifted "
            "exactly; use explicit hours or '*' day fields"
        )
    new_mins = {(m + minutes_total) % 60 for m in mins}
    return " ".join([_field(list(new_mins)), "*", *fields[2:]])


def _grid(cron: str, shifted: set[int], minutes_total: int) -> tuple[list[int], list[int]]:
    """The hours and minutes of the shifted times (minutes since the start's midnight),
    which must be every hour × every minute for cron to express them."""
    pairs = {((t % 1440) // 60, t % 60) for t in shifted}
    new_hours = sorted({h for h, _ in pairs})
    new_mins = sorted({m for _, m in pairs})
    if {(h, m) for h in new_hours for m in new_mins} != pairs:
        raise CronShiftError(
            f"cron {cron!r} + {minutes_total} min gives stop times that are not a "
            "minute × hour grid; use a single start time or a deadline in whole hours"
        )
    return new_hours, new_mins


def _next_weekdays(cron: str, fields: list[str], carries: set[int], doms: list, months: list,
                   dows: list, minutes_total: int) -> list[str]:
    """The day fields of stops that fall after midnight: every start's weekday moved by the
    same number of days (a day-of-week schedule only)."""
    if len(carries) > 1 or doms != ["*"] or months != ["*"]:
        raise CronShiftError(
            f"cron {cron!r}: the stop time {minutes_total} min later crosses midnight for "
            "some starts only, or on a day-of-month schedule; start earlier in the day"
        )
    carry = next(iter(carries))
    return [fields[2], fields[3], _field([(d + carry) % 7 for d in dows])]


def _check_gap(cron: str, minutes_total: int) -> None:
    it = croniter(cron, datetime(2025, 1, 1))
    fires = [it.get_next(datetime) for _ in range(64)]
    gap = min((b - a for a, b in zip(fires, fires[1:])), default=timedelta.max)
    if timedelta(minutes=minutes_total) >= gap:
        raise CronShiftError(
            f"deadline ({minutes_total} min) is not shorter than the gap between starts of "
            f"cron {cron!r} ({int(gap.total_seconds() // 60)} min): the stop of one run would "
            "stop the next; shorten the deadline or start less often"
        )




_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


def _weekday(token: str) -> str:
    token = token.upper()
    if token.isdigit():
        n = int(token)
        if n > 7:
            raise CronShiftError(f"day of week {token} is out of range 0-7")
        return _DAYS[n % 7]
    if token[:3] in _DAYS:
        return token[:3]
    raise CronShiftError(f"day of week {token!r} is not a number 0-7 or a name")


def _weekdays(field: str) -> str:
    if "/" in field:
        raise CronShiftError(f"day-of-week steps ({field!r}) are not supported by EventBridge")
    parts = []
    for item in field.split(","):
        lo, sep, hi = item.partition("-")
        parts.append(_weekday(lo) + (sep + _weekday(hi) if sep else ""))
    return ",".join(parts)


def aws_cron(cron: str) -> str:
    """Five-field cron → EventBridge Scheduler `cron(...)` expression."""
    minute, hour, dom, month, dow = cron.split()
    if dow in ("*", "?"):
        dow = "?"
    elif dom in ("*", "?"):
        dom, dow = "?", _weekdays(dow)
    else:
        raise CronShiftError(
            f"cron {cron!r} sets both day of month and day of week; EventBridge allows one"
        )
    if not re.fullmatch(r"[0-9*,/\-A-Za-z?]+", month):
        raise CronShiftError(f"month field {month!r} is not valid")
    return f"cron({minute} {hour} {dom} {month.upper()} {dow} *)"
