"""Timing of a training attempt and the Result records it produces (no TensorFlow here).

Steps are counted at sync points (a step is counted once it is known to be complete). The
first `warmup` steps of an attempt (graph tracing, connection setup, first data batches) are
excluded from steps/s and examples/s; the records say how many were excluded.

Each sync point is the training loop's heartbeat: a stretch between two sync points that took
longer than its steps at the attempt's median pace by more than `stall_s` (a stopped worker,
a paused VM), or monotonic and wall clocks drifting apart by that much over the measurement,
is a stall, and the attempt is stored contaminated (`WorkloadRun.stalled`).

The timed window (`spotbench.timed`) runs from the end of warm-up to the last sync point,
on the wall clock: every record says so, every stall says when it was, and the clock drift
is measured over that window too, so nothing after the last timed step (evaluation, the
upload) counts. `on_edge("measuring")` is called right before the timed window opens,
`on_edge("measured")` by the trainer right after it closes (fault injection: `mark_edge`).
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spotbench.timed import Window

log = logging.getLogger("spotbench.tf_mnist")
MEASURING = "warm-up over at step %d: measuring"  # logged once per attempt (tests/faults waits for it)


@dataclass
class StepTimer:
    first_step: int  # global step this attempt starts from (0, or a restored checkpoint)
    warmup: int  # steps of this attempt excluded from throughput
    clock: Callable[[], float] = time.perf_counter
    started: float | None = None
    warm_at: tuple[int, float] | None = None  # (step, time) when warm-up ended
    last: tuple[int, float] | None = None  # latest sync point
    wall: Callable[[], float] = time.time
    beats: list[tuple[int, int, float]] = field(default_factory=list)  # after warm-up: (step, steps, s)
    beat_walls: list[tuple[float, float]] = field(default_factory=list)  # each beat's wall-clock span
    wall_warm: float | None = None  # wall clock when warm-up ended
    wall_last: float | None = None  # wall clock at the latest sync point
    on_edge: Callable[[str], None] = lambda name: None

    def start(self) -> None:
        if self.warmup == 0:
            self.on_edge("measuring")
        self.started = self.clock()
        self.last = (self.first_step, self.started)
        self.wall_last = self.wall()
        if self.warmup == 0:
            self.warm_at = self.last
            self.wall_warm = self.wall_last
            log.info(MEASURING, self.first_step)

    def at(self, step: int) -> None:
        """All steps up to `step` (global) are complete."""
        warming_up = self.warm_at is None
        if warming_up and step - self.first_step >= self.warmup:
            self.on_edge("measuring")  # before the clock is read: a hold here is warm-up time
        now, wall = self.clock(), self.wall()
        if self.warm_at is not None and self.last is not None and step > self.last[0]:
            self.beats.append((step, step - self.last[0], now - self.last[1]))
            self.beat_walls.append((self.wall_last or wall, wall))
        self.last, self.wall_last = (step, now), wall
        if warming_up and step - self.first_step >= self.warmup:
            self.warm_at = (step, now)
            self.wall_warm = wall
            log.info(MEASURING, step)

    @property
    def window(self) -> Window | None:
        """The timed window: end of warm-up to the latest sync point (wall clock)."""
        if self.wall_warm is None or self.wall_last is None:
            return None
        return Window.between(self.wall_warm, self.wall_last)

    def stalls(self, stall_s: float) -> list[dict[str, Any]]:
        """Stretches of the measurement with more than `stall_s` unaccounted for at the
        median pace, and a monotonic/wall clock drift beyond it over the timed window (0:
        off); each with when it happened (`"window"`, a `Window`)."""
        if stall_s <= 0 or not self.beats:
            return []
        pace = statistics.median(s / n for _, n, s in self.beats)
        out: list[dict[str, Any]] = [
            {"step": step, "gap_s": round(s - n * pace, 3), "steps": n, "window": Window.between(*walls)}
            for (step, n, s), walls in zip(self.beats, self.beat_walls, strict=True)
            if s - n * pace > stall_s]
        window = self.window
        if window is not None and self.warm_at is not None and self.last is not None:
            skew = abs((window.end - window.start).total_seconds() - (self.last[1] - self.warm_at[1]))
            if skew > stall_s:
                out.append({"step": self.step, "gap_s": round(skew, 3), "clock_skew_s": round(skew, 3),
                            "window": window})
        return out

    @property
    def step(self) -> int:
        return self.last[0] if self.last else self.first_step

    @property
    def steps_run(self) -> int:
        return self.step - self.first_step

    @property
    def train_time_s(self) -> float:
        if self.started is None or self.last is None:
            return 0.0
        return self.last[1] - self.started

    @property
    def measured(self) -> tuple[int, float]:
        """(steps, seconds) after warm-up."""
        if self.warm_at is None or self.last is None:
            return 0, 0.0
        return self.last[0] - self.warm_at[0], self.last[1] - self.warm_at[1]

    def steps_per_s(self) -> float | None:
        steps, seconds = self.measured
        return steps / seconds if steps > 0 and seconds > 0 else None


def effective_warmup(requested: int, steps_to_run: int) -> int:
    """Warm-up steps actually excluded: never so many that nothing is left to measure."""
    return max(0, min(requested, steps_to_run - 1))


def steps_per_epoch(train_examples: int, batch: int) -> int:
    """Steps of one pass over the training split (whole batches: the last partial one is
    dropped, as `train_dataset` does)."""
    return max(1, train_examples // max(1, batch))


def planned_steps(params: Any, train_examples: int, batch: int) -> int:
    """The attempt's last global step: `epochs` passes when given, else `steps`."""
    if params.epochs:
        return params.epochs * steps_per_epoch(train_examples, batch)
    return params.steps


def sync_points(start: int, end: int, *, warmup: int, every: int, checkpoint_every: int,
                epoch_every: int = 0) -> list[int]:
    """Global steps (after `start`, up to `end`) at which training syncs: end of warm-up,
    every `every` steps, every checkpoint, every epoch's end, and the end."""
    points = {end}
    if warmup:
        points.add(start + warmup)
    for period in (every, checkpoint_every, epoch_every):
        if period > 0:
            points.update(range((start // period + 1) * period, end, period))
    return sorted(p for p in points if start < p <= end)


@dataclass
class Outcome:
    """What one attempt measured, turned into records by `record`."""

    timer: StepTimer
    examples_per_step: int  # examples processed per (global) step
    metadata: dict[str, Any] = field(default_factory=dict)
    accuracy: float | None = None  # test split (held out: reported, never optimized)
    loss: float | None = None
    val_accuracy: float | None = None  # validation split (what a search optimizes)
    val_loss: float | None = None
    worker_steps: Counter | None = None  # parameter_server: post-warm-up steps per worker
    worker_examples_per_step: int | None = None  # multi_worker_mirrored: per worker
    stall_s: float = 0.0  # the training loop's stall threshold (0: off)

    def record(self, run: Any) -> None:
        meta = dict(self.metadata)
        timer = self.timer
        for stall in timer.stalls(self.stall_s):
            run.stalled(f"training before step {stall['step']}", stall["gap_s"], window=stall["window"],
                        **{k: v for k, v in stall.items() if k not in ("gap_s", "window")})
        measured_steps, measured_s = timer.measured
        window = timer.window  # every value here derives from the timed steps
        meta.update(warmup_steps_excluded=timer.warmup, measured_steps=measured_steps,
                    steps_this_attempt=timer.steps_run)
        run.record("train_time_s", timer.train_time_s, "s", **meta, timed=window)
        run.record("steps", float(timer.step), "steps", **meta, timed=window)
        rate = timer.steps_per_s()
        if rate is not None:
            run.record("steps_per_s", rate, "steps/s", **meta, timed=window)
            run.record("examples_per_s", rate * self.examples_per_step, "examples/s", **meta, timed=window)
            if self.worker_steps:
                for worker, steps in sorted(self.worker_steps.items()):
                    run.record("worker_examples_per_s", steps * self.examples_per_step / measured_s,
                               "examples/s", **meta, timed=window, worker=int(worker))
            elif self.worker_examples_per_step:
                run.record("worker_examples_per_s", rate * self.worker_examples_per_step,
                           "examples/s", **meta, timed=window, worker=0)
        if self.val_accuracy is not None:
            run.record("val_accuracy", self.val_accuracy, "fraction", **meta, timed=window, split="validation")
        if self.val_loss is not None:
            run.record("val_loss", self.val_loss, "nats", **meta, timed=window, split="validation")
        if self.accuracy is not None:
            run.record("test_accuracy", self.accuracy, "fraction", **meta, timed=window)
        if self.loss is not None:
            run.record("test_loss", self.loss, "nats", **meta, timed=window)


def base_metadata(params: Any, *, tasks: int, tf_version: str, threads: tuple[int, int]) -> dict[str, Any]:
    per_vm = getattr(params, "processes_per_vm", 1)
    workers = f"{params.workers} workers" + (f" × {per_vm} tasks" if per_vm > 1 else "")
    shape = f"1 chief + {params.ps} ps + {workers}" if params.strategy == "parameter_server" else workers
    return {
        "strategy": params.strategy,
        "workers": params.workers,
        "processes_per_vm": per_vm,
        "ps": params.ps if params.strategy == "parameter_server" else 0,
        "batch_size": params.batch_size,
        "learning_rate": params.learning_rate,
        "filters": params.filters,
        "kernel_size": params.kernel_size,
        "dense_units": params.dense_units,
        "dropout": params.dropout,
        "epochs": params.epochs,
        "dataset": params.dataset,
        "cluster_shape": shape,
        "tasks": tasks,
        "host_cores": os.cpu_count(),
        "threads_per_task": {"intra_op": threads[0] or "tf-default", "inter_op": threads[1] or "tf-default"},
        "tf_version": tf_version,
        "checkpoint_every": params.checkpoint_every,
    }


class Validation:
    """Validation at each epoch's end: the value goes to the attempt's intermediate records
    (`report(metric, value, unit, step=…, epoch=…)`: `WorkloadRun.intermediate`, which a
    search's pruner reads while the trial runs) and the last one to the outcome."""

    def __init__(self, per_epoch: int, evaluate: Callable[[], tuple[float, float]],
                 report: Callable[..., Any] | None = None):
        self.per_epoch, self.evaluate, self.report = per_epoch, evaluate, report
        self.seen: list[dict[str, float]] = []

    def at(self, step: int, outcome: Outcome, *, force: bool = False) -> None:
        """Validate when `step` ends an epoch (or `force`: the attempt's last step)."""
        if not (force or (self.per_epoch and step % self.per_epoch == 0)):
            return
        if self.seen and self.seen[-1]["step"] == step:
            return
        accuracy, loss = self.evaluate()
        epoch = step / self.per_epoch if self.per_epoch else 0.0
        self.seen.append({"step": step, "epoch": epoch, "val_accuracy": accuracy, "val_loss": loss})
        outcome.val_accuracy, outcome.val_loss = accuracy, loss
        log.info("step %d (epoch %g): val_accuracy %.4f val_loss %.4f", step, epoch, accuracy, loss)
        if self.report is not None:
            meta = {"step": step, "epoch": round(epoch, 4) if epoch % 1 else int(epoch)}
            self.report("val_accuracy", accuracy, "fraction", **meta)
            self.report("val_loss", loss, "nats", **meta)
