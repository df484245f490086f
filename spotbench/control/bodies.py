"""The bodies start, stop and done take, validated, and a tick's time made canonical."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError


class BadRequest(ValueError):
    """The request body is not what the action takes (HTTP 400)."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartBody(_Body):
    tick: str | None = None  # the scheduler's time for the tick: a repeat after its run closed is ignored
    sweep: str | None = None  # when given (cloud schedulers send it), must be this sweep
    run: str | None = None  # continue only this run (the local runner's kick); closed → nothing starts


class StopBody(_Body):
    groups: list[str] | None = None  # None: every group of the sweep, and close the run; []: nothing
    reason: str = "deadline"
    sweep: str | None = None


class DoneBody(_Body):
    group: str
    # when the calling member's process started: a `done` from an earlier attempt of the
    # group (delivered late, or retried after a busy lock) must not stop a later one
    started_at: datetime | None = None


def parse_body(model: type[_Body], body: Any, sweep: str | None = None) -> Any:
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    try:
        parsed = model.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()
        )
        raise BadRequest(problems) from None
    named = getattr(parsed, "sweep", None)
    if named is not None and sweep is not None and named != sweep:
        raise BadRequest(f"this function serves sweep {sweep!r}, not {named!r}")
    return parsed


def tick_key(tick: str | None) -> str | None:
    """A scheduler tick's time as one canonical UTC string (None: not a time, no dedup)."""
    if not tick:
        return None
    try:
        when = datetime.fromisoformat(tick.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

