"""Field types of the sweep spec: durations (`90s`, `30m`, `1h30m`) and the schedule."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, TypeAdapter, ValidationError, field_validator

from spotbench.cron import cron_problem
from spotbench.workload import Params

__all__ = ["Schedule", "parse_duration"]

_DURATION = re.compile(r"^\s*(?:(\d+)h)?\s*(?:(\d+)m)?\s*(?:(\d+)s)?\s*$")


def parse_duration(value: Any) -> timedelta:
    """Accept seconds (int/float) or text like `90s`, `30m`, `1h30m`."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return timedelta(seconds=float(value))
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match and any(match.groups()):
            h, m, s = (int(g or 0) for g in match.groups())
            return timedelta(hours=h, minutes=m, seconds=s)
        try:  # ISO 8601 ('PT2M'), as pydantic writes timedeltas to JSON
            return TypeAdapter(timedelta).validate_python(value)
        except ValidationError:
            pass
    raise ValueError(f"expected seconds or a duration like '90s', '30m', '1h30m', got {value!r}")


class Schedule(Params):  # strict, like every spec section
    cron: str = Field(description="five-field cron, e.g. '0 3 * * *' for 03:00 daily")
    timezone: str = "UTC"

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, v: str) -> str:
        problem = cron_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("timezone")
    @classmethod
    def _valid_tz(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError("unknown IANA time zone (e.g. 'UTC', 'Europe/Berlin')") from exc
        return v
