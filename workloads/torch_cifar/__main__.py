"""Entry point of a member (one VM): `python -m workloads.torch_cifar`.

Every member runs one `torchrun` agent (`launch.torchrun_command`); the leader (worker 0)
also resumes from the group's latest checkpoint, uploads new ones while training runs,
records the writer's numbers (`metrics.json`), stores them and calls `done`.

A SIGTERM (preemption, deadline, `done` stopping the group) stops torchrun and its
processes; the leader stores what was measured (the writer's `progress.json`) as preempted,
uploads the newest checkpoint, notes the step it reached (`progress.json` in the store: the
steps the next attempt redoes) and calls `done`. torchrun exiting non-zero on the leader
(its own processes failed, or a peer's: gloo/NCCL lose the connection) is a failed
attempt: one `failed` marker with the tail of torchrun's output. A follower's exit code is
its torchrun's; the leader's exit and metrics decide the group's result.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from spotbench import failures
from spotbench.member import MemberContext
from workloads import gpu
from workloads.common import Preempted, WorkloadRun, exit_if_outside_run
from workloads.torch_cifar import launch
from workloads.torch_cifar.checkpoints import TorchCheckpoints, Uploader
from workloads.torch_cifar.descriptor import TorchParams
from workloads.torch_cifar.files import METRICS, PROGRESS

log = logging.getLogger("spotbench.torch")
KILL_GRACE_S = 10.0
POLL_S = 1.0


class Torchrun:
    """torchrun as a child: its output copied to this member's log, the last lines kept."""

    def __init__(self, command: list[str], env: dict[str, str]):
        log.info("running: %s", " ".join(command))
        self.proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, errors="replace")
        self.lines: collections.deque[str] = collections.deque(maxlen=200)
        self.copier = threading.Thread(target=self._copy, daemon=True)
        self.copier.start()

    def _copy(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            sys.stdout.write(line)

    def wait(self, every: float, tick: Any = None) -> int:
        while True:
            try:
                code = self.proc.wait(timeout=every)
                self.copier.join(timeout=5)
                return code
            except subprocess.TimeoutExpired:
                if tick:
                    tick()

    def stop(self) -> None:
        """SIGTERM (torchrun stops its processes), SIGKILL after a grace period."""
        for stop, wait in ((self.proc.terminate, KILL_GRACE_S), (self.proc.kill, 5.0)):
            if self.proc.poll() is not None:
                return
            stop()
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue

    def tail(self) -> str:
        return failures.tail("".join(self.lines))


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def record(run: WorkloadRun, numbers: dict[str, Any], meta: dict[str, Any]) -> None:
    """The writer's numbers as records: throughput, epoch time, epochs/min, time to the
    target epochs, accuracy."""
    elapsed = numbers.get("train_time_s", numbers.get("elapsed_s"))
    epochs = numbers.get("epoch_times_s") or []
    meta = {**meta, "world_size": numbers.get("world_size"), "backend": numbers.get("backend"),
            "device": numbers.get("device"), "torch_version": numbers.get("torch_version"),
            "step": numbers.get("step"), "steps_total": numbers.get("steps_total"),
            "steps_per_epoch": numbers.get("steps_per_epoch"),
            "resumed_from_step": numbers.get("resumed_from_step")}
    if elapsed:
        run.record("images_per_s", numbers["images"] / elapsed, "images/s", **meta)
        run.record("train_time_s", elapsed, "s", **meta)
    if epochs:
        mean = sum(epochs) / len(epochs)
        run.record("epoch_time_s", mean, "s", epochs_timed=len(epochs), **meta)
        run.record("epochs_per_min", 60.0 / mean, "epochs/min", **meta)
    run.record("epochs", numbers.get("epochs_done", 0.0), "epochs", **meta)
    for name in ("val_accuracy", "val_loss"):
        if numbers.get(name) is not None:
            run.record(name, numbers[name], "fraction" if name == "val_accuracy" else "nats", **meta)


def lead(ctx: MemberContext, params: TorchParams, tmp: Path) -> int:
    run = WorkloadRun(ctx)
    out = tmp / "out"
    out.mkdir()
    store = (TorchCheckpoints(ctx.results_url, ctx.group, run.run_id, **run.storage_options)
             if params.checkpoint_every else None)
    resume = store.resume_file(tmp / "resume") if store else None
    redone_from = store.progress() if store else None
    nproc = launch.processes(params)
    meta = {"mode": params.mode, "workers": params.workers, "processes_per_vm": nproc,
            "members": len(ctx.members), "cpu_count": _cores(),
            "steps_redone": max(0, redone_from - resume[0]) if (redone_from and resume) else 0}
    uploader = Uploader(store, out) if store else None
    torchrun = None
    with run.preemptible(call_done=True):
        try:
            torchrun = Torchrun(launch.torchrun_command(ctx, params, nproc),
                                launch.job_env(ctx, params, out, nproc, resume[1] if resume else None))
            code = torchrun.wait(POLL_S, uploader.poll if uploader else None)
        except Preempted:
            if torchrun:
                torchrun.stop()
            _stopped(run, store, uploader, out, meta)
            raise
        if uploader:
            uploader.poll()
        numbers = _read(out / METRICS)
        if code == 0 and numbers:
            record(run, numbers, meta)
            if store:
                store.clear()
        else:
            _failed(run, code, torchrun.tail(), _read(out / PROGRESS), meta)
        run.finish()
        run.done_quietly()
    return code


def _stopped(run: WorkloadRun, store: TorchCheckpoints | None, uploader: Uploader | None,
             out: Path, meta: dict[str, Any]) -> None:
    """What a stopped attempt measured (recorded; stored preempted by `preemptible`)."""
    if uploader:
        uploader.poll()
    progress = _read(out / PROGRESS)
    if progress:
        record(run, progress, {**meta, "stopped_at_step": progress["step"]})
        if store:
            store.write_progress(int(progress["step"]))


def _failed(run: WorkloadRun, code: int, tail: str, progress: dict[str, Any] | None,
            meta: dict[str, Any]) -> None:
    why = (f"torchrun exited with code {code}" if code else
           "torchrun exited 0 but the writer left no metrics.json")
    log.error("this attempt failed: %s; output ends:\n%s", why, tail)
    if progress:
        record(run, progress, {**meta, "exit_code": code, failures.FAILURE_KEY: why})
    run.record(failures.FAILED_METRIC, 1.0, failures.FAILED_UNIT, exit_code=code,
               **{failures.FAILURE_KEY: why, failures.TAIL_KEY: tail})


def follow(ctx: MemberContext, params: TorchParams, tmp: Path) -> int:
    """A member other than the leader: its VM's processes; a SIGTERM stops them."""
    nproc = launch.processes(params)
    out = tmp / "out"
    out.mkdir()
    torchrun = Torchrun(launch.torchrun_command(ctx, params, nproc),
                        launch.job_env(ctx, params, out, nproc, None))

    def on_term(signum: int, frame: Any) -> None:
        torchrun.stop()
        sys.exit(143)

    signal.signal(signal.SIGTERM, on_term)
    return torchrun.wait(POLL_S)


def driver_missing(ctx: MemberContext) -> int | None:
    """A member of a group with GPUs whose container does not reach the driver fails here,
    before training on the CPU unnoticed (`workloads.gpu`): the leader stores the failure
    (why: what is missing) and calls `done`; None when there is nothing to check or all is there."""
    if not ctx.accelerator_count:
        return None
    problems, found = gpu.check(ctx.accelerator_count)
    log.info("%s", found)
    if not problems:
        return None
    why = f"the NVIDIA driver does not reach this container: {'; '.join(problems)}"
    log.error("%s", why)
    if ctx.index == 0:
        run = WorkloadRun(ctx)
        run.record(failures.FAILED_METRIC, 1.0, failures.FAILED_UNIT, exit_code=1,
                   **{failures.FAILURE_KEY: why, failures.TAIL_KEY: found})
        run.finish()
        run.done_quietly()
    return 1


def _cores() -> int:
    return os.cpu_count() or 1


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    ctx = MemberContext.from_env()
    exit_if_outside_run(ctx)
    params = TorchParams.model_validate(ctx.params)
    log.info("torch %s: worker %d of %d in group %s", params.mode, ctx.index, params.workers, ctx.group)
    missing = driver_missing(ctx)
    if missing is not None:
        return missing
    with tempfile.TemporaryDirectory(prefix="spotbench-torch-") as tmp:
        if ctx.index == 0:
            return lead(ctx, params, Path(tmp))
        return follow(ctx, params, Path(tmp))


if __name__ == "__main__":
    sys.exit(main())
