"""A workload's stalls and the edges of its timed region (see `workloads.common`).

`StallWatch` (a base of `WorkloadRun`) notes stalls with when they happened, runs the
heartbeat thread around a loop the workload does not own, and says whether the attempt is
contaminated by `spotbench.timed`'s one rule: a stall counts where it overlaps a record's
timed window: a stall after the last timed step (uploads, teardown) leaves the numbers as
they are. Each record says the wall-clock window its value was timed over
(`WorkloadRun.record(..., timed=Window)`), each stall when it happened
(`stalled(..., window=Window)`); the fault bench applies the same rule.

Fault injection (`tests/faults`, `bench/faults.py`): with `SPOTBENCH_FAULT_EDGES=DIR` in
its environment a member marks the edges of its timed region (`mark_edge(member,
"measuring")` just before timing starts, `"measured"` right after the last timed value) as
files `DIR/<member>.<edge>`, and holds there while `DIR/<edge>.hold` exists (bounded),
outside the timed region, so a fault can be placed provably inside or after it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from spotbench.results import Result
from spotbench.timed import Window, contaminated as stall_contaminates

HEARTBEAT_S = 0.25  # how often a `heartbeat()` thread ticks
STALL_S = 5.0  # default stall threshold of a `heartbeat()` (a workload's loop may set its own)
EDGES_ENV = "SPOTBENCH_FAULT_EDGES"  # fault injection: a folder for the timed region's edges
EDGE_HOLD_MAX_S = 120.0

log = logging.getLogger("spotbench.workload")


def mark_edge(member: str, name: str, folder: str | None = None) -> None:
    """Fault injection only (`EDGES_ENV` set): write `<folder>/<member>.<name>`, then wait
    while `<folder>/<name>.hold` exists (at most EDGE_HOLD_MAX_S). A no-op otherwise."""
    folder = folder or os.environ.get(EDGES_ENV)
    if not folder:
        return
    with open(os.path.join(folder, f"{member}.{name}"), "w") as f:
        f.write(f"{time.time()}\n")
    hold, end = os.path.join(folder, f"{name}.hold"), time.monotonic() + EDGE_HOLD_MAX_S
    while os.path.exists(hold) and time.monotonic() < end:
        time.sleep(0.02)


class StallWatch:
    """Stalls of one attempt; the attempt's `records` say when each value was timed."""

    stalls: list[dict[str, Any]]
    records: list[Result]

    def stalled(self, what: str, gap_s: float, *, window: Window | None = None, **detail: Any) -> None:
        """Note a stall: `what` made no progress for `gap_s` seconds (or its clocks
        disagreed by that much) over `window` (None: unknown). The attempt is stored
        contaminated when the stall overlaps a record's timed window."""
        stall = {"what": what, "gap_s": round(float(gap_s), 3), **detail, **(window.span() if window else {})}
        log.warning("stall: %s", stall)
        self.stalls.append(stall)

    def counted_stalls(self) -> list[dict[str, Any]]:
        """The stalls that overlap the timed window of a record (`spotbench.timed`'s rule;
        with no record yet, every stall)."""
        windows = [Window.of(r.metadata) for r in self.records] or [None]
        return [stall for stall in self.stalls
                if any(stall_contaminates(w, Window.of_span(stall)) for w in windows)]

    @contextmanager
    def heartbeat(self, what: str, stall_s: float = STALL_S, period: float = HEARTBEAT_S) -> Iterator[None]:
        """Around a measurement whose loop the workload does not own (a user's command): a
        thread of this process ticks every `period`; a tick that comes more than `stall_s`
        late on the monotonic clock (this process was stopped) or whose monotonic and wall
        clocks drifted apart by more than `stall_s` (the VM was paused) is a stall."""
        stop = threading.Event()

        def tick() -> None:
            mono, wall = time.monotonic(), time.time()
            while not stop.wait(period):
                now_mono, now_wall = time.monotonic(), time.time()
                late = now_mono - mono - period
                skew = abs((now_wall - wall) - (now_mono - mono))
                if late > stall_s or skew > stall_s:
                    self.stalled(what, max(late, skew), window=Window.between(wall, now_wall),
                                 loop_gap_s=round(late, 3), clock_skew_s=round(skew, 3))
                mono, wall = now_mono, now_wall

        thread = threading.Thread(target=tick, name="spotbench-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=2 * period + 1)

    def contamination(self) -> str | None:
        """Why this attempt's numbers cannot be trusted (None: they can)."""
        counted = self.counted_stalls()
        if not counted:
            return None
        worst = max(counted, key=lambda s: s["gap_s"])
        return (f"stalled: {worst['what']} made no progress for {worst['gap_s']:g} s during "
                f"measurement ({len(counted)} stall(s))")
