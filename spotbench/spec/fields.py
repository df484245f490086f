"""Field types of the sweep spec: durations (`90s`, `30m`, `1h30m`) and the schedule."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any, Literal, Union
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Discriminator, Field, Tag, TypeAdapter, ValidationError, field_validator

from spotbench.cron import cron_problem
from spotbench.workload import Params

__all__ = ["ONCE", "SCHEDULE_HELP", "ScheduleField", "ScheduleViews", "Schedule", "once_lifecycle", "parse_duration", "schedule_value"]

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


# `schedule: once` (issue #39): one run, started by `spotbench run`, and nothing standing
# after it but the results: no scheduler, no stopped VMs or disks, no network; the VMs
# are made at start and deleted when their group is done (`lifecycle: created`).
ONCE = "once"


def _schedule_kind(value: Any) -> str:
    return "function-once" if value == ONCE else "function-cron"


# `schedule:` is a cron mapping or `once`; only the branch its value picks validates, so a bad
# cron gets one error at `schedule.cron` ("function-" tags are dropped from error paths)
ScheduleField = Annotated[
    Union[Annotated[Literal["once"], Tag("function-once")],  # noqa: UP007 - a tagged union
          Annotated[Schedule, Tag("function-cron")]],
    Discriminator(_schedule_kind),
]


def schedule_value(value: Any) -> Any:
    """`schedule:` as text is `once` only (the recurring form is a mapping)."""
    if isinstance(value, str) and value.strip().lower() == ONCE:
        return ONCE
    if isinstance(value, str):
        raise ValueError(
            f"schedule {value!r}: give `once` for one run with nothing standing after it, or a mapping for recurring runs, e.g. `schedule: {cron: '0 3 * * *', timezone: UTC}`")
    return value


SCHEDULE_HELP = ("when runs start: {cron, timezone} for a recurring sweep; `once` for one run "
                 "started by `spotbench run`, with nothing standing after it but the results")


class ScheduleViews:
    """The spec's schedule read two ways (a mixin of `SweepSpec`)."""

    schedule: Any

    @property
    def run_once(self) -> bool:
        """`schedule: once`: one run, no scheduler, nothing standing after it."""
        return bool(self.schedule == ONCE)

    @property
    def cron_schedule(self) -> Schedule | None:
        """The recurring schedule (None without one, or with `schedule: once`)."""
        return self.schedule if isinstance(self.schedule, Schedule) else None


def once_lifecycle(data: Any) -> Any:
    """With `schedule: once` the VMs are made at start and deleted after (`lifecycle:
    created`, the default then); stopped VMs would keep their disks, billed, after the run.
    Text other than `once` is refused naming both forms."""
    if isinstance(data, dict) and isinstance(data.get("schedule"), str):
        data = {**data, "schedule": schedule_value(data["schedule"])}
    if not isinstance(data, dict) or data.get("schedule") != ONCE:
        return data
    if data.get("lifecycle", "created") != "created":
        raise ValueError(
            f"lifecycle {data['lifecycle']!r} with `schedule: once`: stopped VMs keep their "
            "disks (billed while stopped) after the run; remove `lifecycle` (once makes the VMs "
            "at start and deletes them when their group is done) or give a recurring "
            "`schedule: {cron: ...}`")
    return {**data, "lifecycle": "created"}
