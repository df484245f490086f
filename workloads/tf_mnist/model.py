"""The MNIST CNN of the classic distributed-TensorFlow sample, as a plain `tf.Module`.

    28×28×1 → conv F k×k ReLU → max-pool 2×2/2 → conv 2F k×k ReLU → max-pool 2×2/2
            → dense D ReLU, dropout p → 10 logits;  softmax cross-entropy, plain SGD

with F = `filters` (32), k = `kernel_size` (5), D = `dense_units` (1024), p = `dropout` (0.4):
the sample's own shape by default, each a field of the workload's config, so a matrix or a
search sets them.

Plain variables and a hand-written SGD step (no Keras) work the same under
ParameterServerStrategy and MultiWorkerMirroredStrategy, whatever Keras version is
installed. Weights start from a fixed seed (He-scaled truncated normal, zero biases), so
every worker builds identical values.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

DROPOUT = 0.4


class MnistCNN(tf.Module):
    def __init__(self, seed: int = 0, *, filters: int = 32, kernel_size: int = 5,
                 dense_units: int = 1024, dropout: float = DROPOUT):
        super().__init__(name="mnist_cnn")
        self.dropout = dropout
        k, f1, f2 = kernel_size, filters, 2 * filters
        # ONLY_FIRST_REPLICA: updates are all-reduced explicitly (mirrored) or come from
        # one replica (parameter servers), so every replica applies the same update.
        agg = tf.VariableAggregation.ONLY_FIRST_REPLICA

        def weight(shape: list[int], i: int, name: str) -> tf.Variable:
            fan_in = int(np.prod(shape[:-1]))  # He initialisation: stable at any width
            init = tf.random.stateless_truncated_normal(shape, seed=[seed, i], stddev=(2.0 / fan_in) ** 0.5)
            return tf.Variable(init, name=name, aggregation=agg)

        def bias(n: int, name: str) -> tf.Variable:
            return tf.Variable(tf.zeros([n]), name=name, aggregation=agg)

        self.conv1_w, self.conv1_b = weight([k, k, 1, f1], 1, "conv1_w"), bias(f1, "conv1_b")
        self.conv2_w, self.conv2_b = weight([k, k, f1, f2], 2, "conv2_w"), bias(f2, "conv2_b")
        self.flat = 7 * 7 * f2  # SAME padding, two 2×2 pools: 28 → 14 → 7
        self.fc1_w, self.fc1_b = weight([self.flat, dense_units], 3, "fc1_w"), bias(dense_units, "fc1_b")
        self.fc2_w, self.fc2_b = weight([dense_units, 10], 4, "fc2_w"), bias(10, "fc2_b")

    @classmethod
    def of(cls, params) -> MnistCNN:  # noqa: ANN001 - TfMnistParams
        """The network a workload config asks for."""
        return cls(filters=params.filters, kernel_size=params.kernel_size,
                   dense_units=params.dense_units, dropout=params.dropout)

    @property
    def weights(self) -> list[tf.Variable]:
        return [self.conv1_w, self.conv1_b, self.conv2_w, self.conv2_b,
                self.fc1_w, self.fc1_b, self.fc2_w, self.fc2_b]

    def __call__(self, images: tf.Tensor, training: bool = False) -> tf.Tensor:
        x = tf.reshape(tf.cast(images, tf.float32) / 255.0, [-1, 28, 28, 1])
        x = tf.nn.relu(tf.nn.conv2d(x, self.conv1_w, 1, "SAME") + self.conv1_b)
        x = tf.nn.max_pool2d(x, 2, 2, "SAME")
        x = tf.nn.relu(tf.nn.conv2d(x, self.conv2_w, 1, "SAME") + self.conv2_b)
        x = tf.nn.max_pool2d(x, 2, 2, "SAME")
        x = tf.nn.relu(tf.matmul(tf.reshape(x, [-1, self.flat]), self.fc1_w) + self.fc1_b)
        if training and self.dropout > 0:
            x = tf.nn.dropout(x, rate=self.dropout)
        return tf.matmul(x, self.fc2_w) + self.fc2_b


def per_example_loss(labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(labels, tf.int32), logits=logits)


def gradients(model: MnistCNN, images: tf.Tensor, labels: tf.Tensor, global_batch: int):
    """(loss, grads) of one replica's batch; the loss is scaled by the global batch size,
    so summing the replicas' gradients gives the gradient of the global mean loss."""
    with tf.GradientTape() as tape:
        logits = model(images, training=True)
        loss = tf.nn.compute_average_loss(per_example_loss(labels, logits), global_batch_size=global_batch)
    return loss, tape.gradient(loss, model.weights)


def sgd(model: MnistCNN, grads: list[tf.Tensor], learning_rate: float) -> None:
    for var, grad in zip(model.weights, grads, strict=True):
        var.assign_sub(learning_rate * grad)


def evaluate(model: MnistCNN, images: np.ndarray, labels: np.ndarray, batch: int = 1000) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) over all of `images` (the validation or test split)."""

    @tf.function
    def sums(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        logits = model(x, training=False)
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32), y), tf.float32))
        return correct, tf.reduce_sum(per_example_loss(y, logits))

    correct = total_loss = 0.0
    for start in range(0, len(labels), batch):
        c, loss = sums(tf.constant(images[start:start + batch]), tf.constant(labels[start:start + batch], tf.int32))
        correct += float(c)
        total_loss += float(loss)
    n = max(1, len(labels))
    return correct / n, total_loss / n


def train_dataset(images: np.ndarray, labels: np.ndarray, batch: int, *, seed: int,
                  shards: int = 1, shard: int = 0) -> tf.data.Dataset:
    """Shuffled, repeated batches of (uint8 images, int32 labels)."""
    ds = tf.data.Dataset.from_tensor_slices((images, labels))
    if shards > 1:
        ds = ds.shard(shards, shard)
    return ds.shuffle(min(len(labels), 10_000), seed=seed).repeat().batch(batch, drop_remainder=True).prefetch(2)


def save_weights(model: MnistCNN, folder: str, config: dict) -> list[str]:
    """The trained weights as `weights.npz` (one array per variable, numpy's own format:
    loads without TensorFlow) and the network's shape as `model.json`, in `folder` (the
    attempt's artifacts folder, `$SPOTBENCH_ARTIFACTS_DIR`)."""
    import json
    from pathlib import Path

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    arrays = {v.name.split(":")[0]: v.numpy() for v in model.weights}
    with open(out / "weights.npz", "wb") as fh:
        np.savez(fh, **arrays)
    (out / "model.json").write_text(json.dumps({"network": "mnist_cnn", **config}, indent=2))
    return ["weights.npz", "model.json"]


def build_and_restore(strategy, checkpoints, params=None):
    """The model and step counter under `strategy`, restored from the last checkpoint if any.

    Returns (model, step_var, checkpoint, resumed_from_step, steps_redone).
    """
    from workloads.tf_mnist.checkpoints import steps_redone

    with strategy.scope():
        model = MnistCNN.of(params) if params is not None else MnistCNN()
        step_var = tf.Variable(0, dtype=tf.int64, name="step")
    checkpoint = tf.train.Checkpoint(model=model, step=step_var)
    start = checkpoints.restore(checkpoint) if checkpoints else 0
    redone = steps_redone(checkpoints.progress() if checkpoints else None, start)
    return model, step_var, checkpoint, start, redone
