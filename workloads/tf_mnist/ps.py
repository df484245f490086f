"""Parameter-server training: ps and worker tasks serve, the chief coordinates.

ps and worker tasks start a `tf.distribute.Server` and block in `join()`: they never exit by
themselves (the group's `done` stops them; a SIGTERM just ends the process). The chief
builds the model on the parameter servers (`ParameterServerStrategy`), schedules one
`tf.function` training step per `ClusterCoordinator.schedule` (asynchronous SGD: each
step is one worker's batch of `batch_size`), joins at sync points to count finished
steps and to checkpoint, then evaluates on the test set.

A worker lost mid-run is not something TF reports: the coordinator quietly reschedules its
steps on the other workers (the attempt would be stored as complete with a fraction of the
throughput) or, with one worker, waits for it forever. So the chief watches the workers'
service ports itself (`PeerWatch`): when one stops answering it notes why and sends itself
SIGTERM, and the attempt is stored as preempted with `stop_reason` "worker lost: …".
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections import Counter

from spotbench.member import MemberContext
from workloads.common import mark_edge
from workloads.tf_mnist.descriptor import TfMnistParams
from workloads.tf_mnist.checkpoints import CheckpointStore
from workloads.tf_mnist.cluster import cluster_spec, reclaim_sigterm, task_count, wait_for_peers
from workloads.tf_mnist.datasets import Dataset
from workloads.tf_mnist.measure import (
    Outcome, StepTimer, Validation, base_metadata, effective_warmup, planned_steps, steps_per_epoch, sync_points,
)

log = logging.getLogger("spotbench.tf_mnist")
SYNC_ENV = "SPOTBENCH_TF_SYNC_EVERY"
PEER_TIMEOUT_ENV = "SPOTBENCH_TF_PEER_TIMEOUT"
WATCH_EVERY_S = 1.0
WATCH_MISSES = 2  # consecutive refused connections before a worker counts as lost


class PeerWatch:
    """Polls TCP connects to the workers during training; on a lost one, SIGTERM to self."""

    def __init__(self, addresses: dict[str, str], every: float = WATCH_EVERY_S):
        self.addresses, self.every = addresses, every
        self.lost: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peer-watch", daemon=True)

    def __enter__(self) -> PeerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _run(self) -> None:
        misses = dict.fromkeys(self.addresses, 0)
        while not self._stop.wait(self.every):
            for name, address in self.addresses.items():
                host, port = address.rsplit(":", 1)
                try:
                    with socket.create_connection((host, int(port)), timeout=2):
                        misses[name] = 0
                except OSError:
                    misses[name] += 1
                if misses[name] >= WATCH_MISSES and not self._stop.is_set():
                    self.lost = f"worker lost: {name} ({address}) stopped answering"
                    log.warning("%s: ending this attempt", self.lost)
                    os.kill(os.getpid(), signal.SIGTERM)
                    return


def serve(ctx: MemberContext, threads: tuple[int, int]) -> None:
    """Run this ps/worker task's server until the process is stopped."""
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=threads[0], inter_op_parallelism_threads=threads[1]
    )
    server = tf.distribute.Server(
        resolver.cluster_spec(), job_name=ctx.role, task_index=resolver.task_id,  # TF_CONFIG's task
        protocol="grpc", config=config, start=True,
    )
    reclaim_sigterm()  # SIGTERM: just exit
    log.info("%s %d serving at %s", ctx.role, resolver.task_id, server.target)
    server.join()


def sync_every(steps: int) -> int:
    """Steps between joins when not checkpointing (a join drains the workers' queues)."""
    value = os.environ.get(SYNC_ENV)
    return int(value) if value else max(10, steps // 20)


class ChiefTrainer:
    """The chief's side of one attempt; `outcome` holds what was measured so far."""

    def __init__(self, ctx: MemberContext, params: TfMnistParams, data: Dataset,
                 checkpoints: CheckpointStore | None, threads: tuple[int, int], progress=None):
        self.ctx, self.params, self.data = ctx, params, data
        self.checkpoints, self.threads = checkpoints, threads
        self.outcome: Outcome | None = None
        self.model = None
        self.watch: PeerWatch | None = None
        self.progress = progress  # WorkloadRun.intermediate: per-epoch validation values
        self.steps = planned_steps(params, len(data.y_train), params.batch_size)
        self.per_epoch = steps_per_epoch(len(data.y_train), params.batch_size) if params.epochs else 0
        self.validation: Validation | None = None

    @property
    def lost(self) -> str | None:
        """Why the attempt ended early when a worker was lost (None otherwise)."""
        return self.watch.lost if self.watch else None

    def run(self) -> Outcome:
        import tensorflow as tf

        from workloads.tf_mnist import model as m

        p = self.params
        tf.config.threading.set_intra_op_parallelism_threads(self.threads[0])
        tf.config.threading.set_inter_op_parallelism_threads(self.threads[1])
        cluster = cluster_spec(self.ctx)
        wait_for_peers(cluster["ps"] + cluster["worker"],
                       timeout=float(os.environ.get(PEER_TIMEOUT_ENV, 600)))
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        strategy = tf.distribute.ParameterServerStrategy(resolver)
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        reclaim_sigterm()
        model, step_var, checkpoint, start, redone = m.build_and_restore(strategy, self.checkpoints, p)
        self.model = model  # its weights go to the attempt's artifacts (`model.save_weights`)

        x, y, batch, lr = self.data.x_train, self.data.y_train, p.batch_size, p.learning_rate
        if len(self.data.y_val):
            self.validation = Validation(self.per_epoch, lambda: m.evaluate(model, self.data.x_val, self.data.y_val),
                                         self.progress)

        def dataset_fn() -> tf.data.Dataset:
            return m.train_dataset(x, y, batch, seed=start)

        iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

        @tf.function
        def train_step(it):
            def replica_fn(images, labels):
                loss, grads = m.gradients(model, images, labels, batch)
                m.sgd(model, grads, lr)
                return loss

            images, labels = next(it)
            strategy.run(replica_fn, args=(images, labels))
            return tf.distribute.coordinator.experimental_get_current_worker_index()

        warmup = effective_warmup(p.warmup_steps, self.steps - start)
        timer = StepTimer(first_step=start, warmup=warmup, on_edge=lambda name: mark_edge(self.ctx.name, name))
        meta = base_metadata(p, tasks=task_count(self.ctx), tf_version=tf.__version__, threads=self.threads)
        meta.update(resumed_from_step=start, steps_redone=redone, examples_per_step=batch,
                    sync="async SGD, one worker batch per step")
        self.outcome = Outcome(timer, examples_per_step=batch, metadata=meta, worker_steps=Counter(),
                               stall_s=p.stall_s)
        points = sync_points(start, self.steps, warmup=warmup, every=sync_every(self.steps),
                             checkpoint_every=p.checkpoint_every, epoch_every=self.per_epoch)
        log.info("training steps %d..%d (warm-up %d, %d worker tasks, sync points %s…)", start + 1, self.steps,
                 warmup, len(cluster["worker"]), points[:4])
        timer.start()
        step = start
        workers = {f"worker {i}": a for i, a in enumerate(cluster["worker"])}
        with PeerWatch(workers) as self.watch:
            step = self._train(coordinator, train_step, iterator, timer, points, step, checkpoint, step_var)
        if self.validation:
            self.validation.at(step, self.outcome, force=True)
        mark_edge(self.ctx.name, "measured")
        self.outcome.accuracy, self.outcome.loss = m.evaluate(model, self.data.x_test, self.data.y_test)
        return self.outcome

    def _train(self, coordinator, train_step, iterator, timer, points, step, checkpoint, step_var) -> int:
        p = self.params
        assert self.outcome is not None
        for point in points:
            measured = timer.warm_at is not None
            workers = [coordinator.schedule(train_step, args=(iterator,)) for _ in range(point - step)]
            coordinator.join()
            step = point
            timer.at(step)
            if measured:
                self.outcome.worker_steps.update(int(w.fetch()) for w in workers)
            if self.validation:
                self.validation.at(step, self.outcome)
            if self.checkpoints and p.checkpoint_every and step % p.checkpoint_every == 0 and step < self.steps:
                step_var.assign(step)
                self.checkpoints.save(checkpoint, step)
        return step
