"""Schedule control: pause, resume and fire a sweep's start/stop pair now.

Every sweep has a start tick (the spec's cron) and a stop tick (start + deadline). Pausing
pauses only the START: a paused sweep starts nothing, and its deadline stop still fires for
groups already running. Each cloud keeps the pair in its own scheduler:

- gcp: Cloud Scheduler jobs `{sweep}-start` / `{sweep}-stop` (`clouds/gcp/scheduler`)
- aws: EventBridge Scheduler schedules `{sweep}-start` / `{sweep}-stop` (`clouds/aws/scheduler`)
- local: the in-process scheduler, steered by `schedule.json` (`clouds/local/schedule`)

`control_for` asks the spec's cloud provider for its control.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter

from spotbench.clouds import get_provider
from spotbench.interfaces import ScheduleControl
from spotbench.spec import SweepSpec

__all__ = ["ScheduleControl", "ScheduleInfo", "control_for", "describe", "next_ticks"]


@dataclass
class ScheduleInfo:
    sweep: str
    cloud: str
    cron: str | None
    timezone: str | None
    next_start: datetime | None
    next_stop: datetime | None
    paused: bool | None  # None: could not be read (reason in `detail`)
    detail: str = ""
    jobs: dict[str, str] = field(default_factory=dict)  # job/schedule name → its state

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("next_start", "next_stop"):
            out[key] = out[key].isoformat() if out[key] else None
        return out


def next_ticks(spec: SweepSpec, now: datetime | None = None) -> tuple[datetime | None, datetime | None]:
    """The next start tick (spec's cron in its time zone) and the stop tick it implies."""
    schedule = spec.cron_schedule  # `schedule: once`: no tick follows
    if schedule is None:
        return None, None
    tz = ZoneInfo(schedule.timezone)
    base = (now or datetime.now(UTC)).astimezone(tz)
    start = croniter(schedule.cron, base).get_next(datetime)
    return start, start + spec.deadline


def control_for(spec: SweepSpec, root: Path | str | None = None, **options: Any) -> ScheduleControl:
    """The schedule control of the spec's cloud (`root`: local state; options go to its
    constructor)."""
    return get_provider(spec.cloud).schedule(spec, root, **options)


def describe(spec: SweepSpec, control: ScheduleControl | None, now: datetime | None = None) -> ScheduleInfo:
    start, stop = next_ticks(spec, now)
    paused, detail, jobs = None, "", {}
    if spec.run_once:  # nothing to ask: the stack declares no scheduler
        control, detail = None, ("schedule: once: no scheduler; `spotbench run` starts the one "
                                 "run and tears the sweep down after it, results kept")
    if control is not None:
        try:
            paused, detail, jobs = control.state()
        except Exception as exc:  # noqa: BLE001 - status must still print everything else
            detail = f"schedule state unavailable: {exc}"
    return ScheduleInfo(
        sweep=spec.name,
        cloud=spec.cloud,
        cron=spec.cron_schedule.cron if spec.cron_schedule else None,
        timezone=spec.cron_schedule.timezone if spec.cron_schedule else None,
        next_start=start,
        next_stop=stop,
        paused=paused,
        detail=detail,
        jobs=jobs,
    )
