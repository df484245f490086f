"""Types shared across layers, importing nothing of spotbench's: a preflight `Problem` and
the `ScheduleControl` protocol.

They sit at the bottom so a cloud's operations (`spotbench.clouds`) can return them and the
cloud-neutral commands above (`spotbench.preflight`, `spotbench.ops.schedule`) can read them
without either importing the other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol


@dataclass(frozen=True)
class Problem:
    """One thing preflight found missing: what is wrong and the command or change that fixes it."""

    check: str  # credentials | apis | machine-types | accelerators | quota | budget | policy
    message: str
    fix: str

    def line(self) -> str:
        return f"{self.check}: {self.message} → {self.fix}"

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


class ScheduleControl(Protocol):
    """Pause / resume / run-now of a sweep's start/stop pair, on its cloud's scheduler."""

    def pause(self) -> str: ...

    def resume(self) -> str: ...

    def run_now(self) -> str: ...

    def state(self) -> tuple[bool | None, str, dict[str, str]]:
        """(paused, detail, job states)."""
        ...
