"""Entry point: `python -m workloads.tf_mnist` (role, peers and parameters from env).

    parameter_server       ps / worker → serve until stopped;  chief → train, record, done
    multi_worker_mirrored  every worker trains; worker 0 records, stores, calls done

The recording task stores its Results once (`WorkloadRun.finish`), removes its
checkpoints, then calls `done`, which stops the whole group (ps servers included). On
SIGTERM it records what was measured as preempted, notes the step it had reached (to count
the steps redone after a restart) and still asks `done` to stop the group; a peer task
that disappears mid-run (a preempted ps VM: TF reports it unavailable; a lost worker: the
chief's own watch, see `ps.PeerWatch`) is recorded the same way. Any other error is stored
as raw `error.txt`, `done` is called (the group must not idle until its deadline) and the
process exits 1. A results store that cannot be written never skips `done` either.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback

from spotbench.member import MemberContext
from workloads.tf_mnist.descriptor import TfMnistParams
from workloads.tf_mnist.cluster import local_task, prepare_env, records_results, threads

log = logging.getLogger("spotbench.tf_mnist")


def _done(run) -> None:
    try:
        log.info("done → %s", run.done())
    except Exception as exc:  # noqa: BLE001 - the group still stops at its deadline
        log.warning("could not call done (%s); the group stops at its deadline", exc)


# TF errors that mean a peer task went away (a preempted VM), not a bug in the run
PEER_LOST = {"UnavailableError", "AbortedError", "PSUnavailableError", "DeadlineExceededError"}


def _keep_partial(run, trainer, checkpoints, reason: str) -> None:
    """Record what the attempt measured so far, and the step it reached."""
    partial = trainer.outcome if trainer else None
    if partial is None:
        return
    partial.metadata.update(stopped_at_step=partial.timer.step, stop_reason=reason)
    partial.record(run)
    if checkpoints:
        checkpoints.write_progress(partial.timer.step)


def _record(run, ctx: MemberContext, params: TfMnistParams, n_threads: tuple[int, int]) -> int:
    from workloads.common import Preempted
    from workloads.tf_mnist.checkpoints import CheckpointStore
    from workloads.tf_mnist.datasets import load, with_validation

    checkpoints = CheckpointStore(ctx.results_url, ctx.group, run.run_id, **run.storage_options) if params.checkpoint_every else None
    trainer = None
    try:
        with run.preemptible():
            try:
                data = with_validation(load(params.dataset, params.dataset_url), params.validation_fraction)
                trainer = _trainer(ctx, params, data, checkpoints, n_threads, chief=True, progress=_progress(run))
                outcome = trainer.run()
                _save_weights(run, trainer, params)
            except Preempted:
                _keep_partial(run, trainer, checkpoints, getattr(trainer, "lost", None) or "SIGTERM")
                raise
            outcome.metadata["dataset_info"] = data.info
            outcome.record(run)
            run.finish()
        if checkpoints:
            checkpoints.clear()
    except SystemExit:  # preemptible() stored the preempted record and exits 143
        _done(run)
        raise
    except Exception as exc:
        text = traceback.format_exc()
        run.raw("error.txt", text)
        if PEER_LOST & {c.__name__ for c in type(exc).__mro__}:
            log.warning("a peer task is gone (%s): storing what was measured as preempted", type(exc).__name__)
            _keep_partial(run, trainer, checkpoints, f"peer lost ({type(exc).__name__})")
            _finish(run, preempted=True)
            _done(run)
            return 143
        log.error("training failed:\n%s", text)
        _finish(run)
        _done(run)
        return 1
    _done(run)
    return 0


def _progress(run):
    """Where per-epoch validation goes: the attempt's intermediate records
    (`WorkloadRun.intermediate`, the one progress path; a search's pruner reads the whole
    epochs among them, the epoch its step)."""
    return run.intermediate


def _save_weights(run, trainer, params: TfMnistParams) -> None:
    """The trained network into the attempt's artifacts folder (stored beside its records)."""
    from workloads.tf_mnist.model import save_weights

    config = params.model_dump(include={"filters", "kernel_size", "dense_units", "dropout"})
    try:
        save_weights(trainer.model, run.artifacts_dir, config)
    except OSError as exc:  # the measurements are still stored
        log.error("weights not saved: %s", exc)


def _finish(run, preempted: bool = False) -> None:
    from spotbench.results import StoreError

    try:
        run.finish(preempted=preempted)
    except StoreError:
        pass  # logged with the records by finish(); done is still called


def _trainer(ctx, params, data, checkpoints, n_threads, *, chief: bool, progress=None):
    if params.strategy == "parameter_server":
        from workloads.tf_mnist.ps import ChiefTrainer

        return ChiefTrainer(ctx, params, data, checkpoints, n_threads, progress)
    from workloads.tf_mnist.mirrored import MirroredTrainer

    return MirroredTrainer(ctx, params, data, checkpoints, n_threads, chief=chief, progress=progress)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("absl", "tensorflow"):  # per-step INFO lines from TF's Python side
        logging.getLogger(noisy).setLevel(logging.WARNING)
    ctx = MemberContext.from_env()
    if not local_task():  # a further task of this member: its parent checked and resolved
        from workloads.common import exit_if_outside_run, trial_context

        exit_if_outside_run(ctx)
        ctx = trial_context(ctx)  # an adaptive search's trial: the parameters control asked
    params = TfMnistParams.model_validate(ctx.params)
    config = prepare_env(ctx)
    n_threads = threads(ctx)
    log.info("tf-mnist %s: %s %d of group %s (TF task %s %d of %d)", params.strategy, ctx.role,
             ctx.index, ctx.group, config["task"]["type"], config["task"]["index"],
             sum(map(len, config["cluster"].values())))
    from workloads.tf_mnist.tasks import start

    tasks = None if local_task() else start(ctx)  # processes_per_vm > 1: tasks 1..n-1
    code = _run_task(ctx, params, n_threads)
    return max(code, tasks.finish()) if tasks else code


def _run_task(ctx: MemberContext, params: TfMnistParams, n_threads: tuple[int, int]) -> int:
    if params.strategy == "parameter_server" and ctx.role != "chief":
        from workloads.tf_mnist.ps import serve

        serve(ctx, n_threads)  # returns only if the server fails
        return 1
    from workloads.common import WorkloadRun

    run = WorkloadRun(ctx)
    if records_results(ctx):
        return _record(run, ctx, params, n_threads)
    # multi_worker_mirrored, worker ≥ 1: train in step with the others, record nothing
    from workloads.tf_mnist.checkpoints import CheckpointStore
    from workloads.tf_mnist.datasets import load, with_validation

    checkpoints = CheckpointStore(ctx.results_url, ctx.group, run.run_id, **run.storage_options) if params.checkpoint_every else None
    data = with_validation(load(params.dataset, params.dataset_url), params.validation_fraction)  # same split, same steps
    _trainer(ctx, params, data, checkpoints, n_threads, chief=False).run()
    return 0


def _exit(code: int) -> None:
    """Flush and leave without TensorFlow's interpreter teardown (gRPC threads can hang it)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    try:
        code = main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        code = 1
    _exit(code)
