"""The window a value was timed over, and the one rule for when a stall contaminates it.

A workload's number (a latency, steps/s, a user's metric) was timed over a stretch of wall
clock: OSU's timed loop of one message size, TF's steps after warm-up, a user's command from
its start to its exit. Each stored record says which stretch (`metadata["timed"]`:
`{"from": ISO, "to": ISO}`, UTC). A stall (a stopped process, a paused VM, a frozen peer)
contaminates a value exactly when it overlaps that window; what happens before warm-up ends
or after the last timed step (uploads, evaluation, teardown) does not change the number.

The rule has one home, here: the workloads' detector (`workloads.common.WorkloadRun`)
counts a stall only when it overlaps a record's window, and `bench/faults.py` /
`tests/faults` count a row measured across an injected fault by the same test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

KEY = "timed"  # the records' metadata key


@dataclass(frozen=True)
class Window:
    """[start, end] on the wall clock, both timezone-aware (UTC)."""

    start: datetime
    end: datetime

    @classmethod
    def between(cls, start_s: float, end_s: float) -> Window:
        """From two `time.time()` readings."""
        return cls(datetime.fromtimestamp(start_s, UTC), datetime.fromtimestamp(max(start_s, end_s), UTC))

    def overlaps(self, other: Window) -> bool:
        """The one rule: two windows share some instant (a stall touching the timed window
        at an end counts: the value was still being timed then)."""
        return other.start <= self.end and self.start <= other.end

    def metadata(self) -> dict[str, dict[str, str]]:
        return {KEY: self.span()}

    def span(self) -> dict[str, str]:
        """`{"from": ISO, "to": ISO}`: how a record's and a stall's windows are stored."""
        return {"from": self.start.isoformat(), "to": self.end.isoformat()}

    @classmethod
    def of(cls, metadata: Mapping[str, Any]) -> Window | None:
        """The window a record's metadata names, or None (not timed, or not readable)."""
        return cls.of_span(metadata.get(KEY))

    @classmethod
    def of_span(cls, raw: object) -> Window | None:
        """The window a stored span (`span()`) names, or None."""
        if not isinstance(raw, Mapping):
            return None
        try:
            start, end = (datetime.fromisoformat(str(raw[k])) for k in ("from", "to"))
        except (KeyError, ValueError):
            return None
        if start.tzinfo is None or end.tzinfo is None or end < start:
            return None
        return cls(start, end)


def contaminated(timed: Window | None, stall: Window | None) -> bool:
    """Whether a stall contaminates a value: it overlaps the value's timed window. A stall
    or a value whose window is unknown is taken to overlap (never miss a stall)."""
    if timed is None or stall is None:
        return True
    return timed.overlaps(stall)
