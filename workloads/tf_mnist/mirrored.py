"""Multi-worker all-reduce training (`MultiWorkerMirroredStrategy`), custom training loop.

Every worker runs this loop: one `strategy.run` per step on its shard of the global batch,
gradients summed with one all-reduce, the same SGD update everywhere. Keras `model.fit`
is not used: under Keras 3 it fails with this strategy (keras-team/keras#20585).
Worker 0 stores the checkpoints and records results; all workers take part in saving
(the others write a throwaway copy), as TensorFlow's multi-worker docs require.
"""

from __future__ import annotations

import logging

from spotbench.member import MemberContext
from workloads.common import mark_edge
from workloads.tf_mnist.descriptor import TfMnistParams
from workloads.tf_mnist.checkpoints import CheckpointStore
from workloads.tf_mnist.cluster import cluster_spec, reclaim_sigterm, task_count
from workloads.tf_mnist.datasets import Dataset
from workloads.tf_mnist.measure import (
    Outcome, StepTimer, Validation, base_metadata, effective_warmup, planned_steps, steps_per_epoch,
)

log = logging.getLogger("spotbench.tf_mnist")


class MirroredTrainer:
    def _edge(self, name: str) -> None:  # fault injection: the timed region's edges
        mark_edge(self.ctx.name, name)

    def __init__(self, ctx: MemberContext, params: TfMnistParams, data: Dataset,
                 checkpoints: CheckpointStore | None, threads: tuple[int, int], *, chief: bool,
                 progress=None):
        self.ctx, self.params, self.data = ctx, params, data
        self.checkpoints, self.threads, self.chief = checkpoints, threads, chief
        self.outcome: Outcome | None = None
        self.model = None
        self.progress = progress  # WorkloadRun.intermediate: per-epoch validation values

    def run(self) -> Outcome:
        import tensorflow as tf

        from workloads.tf_mnist import model as m

        p, workers = self.params, len(cluster_spec(self.ctx)["worker"])  # workers × processes_per_vm
        if p.batch_size < workers:
            raise ValueError(f"batch_size {p.batch_size} < {workers} worker tasks (workers × "
                             "processes_per_vm): each task needs ≥1 example per step")
        per_worker = p.batch_size // workers
        global_batch = per_worker * workers
        steps = planned_steps(p, len(self.data.y_train), global_batch)
        per_epoch = steps_per_epoch(len(self.data.y_train), global_batch) if p.epochs else 0
        tf.config.threading.set_intra_op_parallelism_threads(self.threads[0])
        tf.config.threading.set_inter_op_parallelism_threads(self.threads[1])
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=tf.distribute.cluster_resolver.TFConfigClusterResolver(),
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=tf.distribute.experimental.CommunicationImplementation.RING
            ),
        )
        reclaim_sigterm()
        model, step_var, checkpoint, start, redone = m.build_and_restore(strategy, self.checkpoints, p)
        self.model = model  # its weights go to the attempt's artifacts (`model.save_weights`)

        x, y, lr = self.data.x_train, self.data.y_train, p.learning_rate

        def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
            return m.train_dataset(x, y, context.get_per_replica_batch_size(global_batch), seed=start,
                                   shards=context.num_input_pipelines, shard=context.input_pipeline_id)

        iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))

        @tf.function
        def train_step(it):
            def replica_fn(batch):
                images, labels = batch
                loss, grads = m.gradients(model, images, labels, global_batch)
                grads = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, grads)
                m.sgd(model, grads, lr)
                return loss

            losses = strategy.run(replica_fn, args=(next(it),))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

        warmup = effective_warmup(p.warmup_steps, steps - start)
        timer = StepTimer(first_step=start, warmup=warmup, on_edge=self._edge)
        meta = base_metadata(p, tasks=task_count(self.ctx), tf_version=tf.__version__, threads=self.threads)
        meta.update(resumed_from_step=start, steps_redone=redone, examples_per_step=global_batch,
                    per_worker_batch=per_worker, sync="synchronous all-reduce (ring)")
        self.outcome = Outcome(timer, examples_per_step=global_batch, metadata=meta,
                               worker_examples_per_step=per_worker, stall_s=p.stall_s)
        log.info("training steps %d..%d (warm-up %d, %d worker tasks × %d examples)", start + 1, steps,
                 warmup, workers, per_worker)
        validation = None
        if self.chief and len(self.data.y_val):  # worker 0 validates; the others wait at the next step
            validation = Validation(per_epoch, lambda: m.evaluate(model, self.data.x_val, self.data.y_val),
                                    self.progress)
        timer.start()
        for step in range(start + 1, steps + 1):
            train_step(iterator)
            timer.at(step)
            if validation:
                validation.at(step, self.outcome, force=step == steps)
            if self.checkpoints and p.checkpoint_every and step % p.checkpoint_every == 0 and step < steps:
                step_var.assign(step)
                self.checkpoints.save(checkpoint, step, upload=self.chief)
        self._edge("measured")
        if self.chief:
            self.outcome.accuracy, self.outcome.loss = m.evaluate(model, self.data.x_test, self.data.y_test)
        return self.outcome
