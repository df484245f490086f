"""tf-mnist's searched knobs (filters, kernel size, dense units, dropout, learning rate,
batch size, epochs), its validation split apart from the test set, the per-epoch
intermediate values a search reads, and the trained weights stored as the attempt's
artifacts. The data are tiny IDX files this test writes."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from pydantic import ValidationError

from spotbench.results import ResultStore
from tests.workloads.tf_mnist.harness import Cluster, DoneServer, group_for
from workloads.tf_mnist.datasets import MNIST_FILES, Dataset, load_mnist, with_validation
from workloads.tf_mnist.descriptor import TfMnistParams
from workloads.tf_mnist.idx import write_idx
from workloads.tf_mnist.measure import planned_steps, steps_per_epoch, sync_points


def _learnable(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Images whose label is where a bright bar is (a CNN learns it in a few steps)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    images = rng.integers(0, 30, (n, 28, 28), dtype=np.uint8)
    for i, label in enumerate(labels):
        images[i, 2 * label + 4: 2 * label + 6, 4:24] = 255
    return images, labels


def _write_mnist(folder, n_train: int = 160, n_test: int = 40) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    x, y = _learnable(n_train, 1)
    xt, yt = _learnable(n_test, 2)
    arrays = {"train_images": x, "train_labels": y, "test_images": xt, "test_labels": yt}
    for key, base in MNIST_FILES.items():
        (folder / base).write_bytes(write_idx(arrays[key]))


def test_search_knobs_are_config_fields_with_bounds():
    params = TfMnistParams(filters=8, kernel_size=3, dense_units=64, dropout=0.2,
                           learning_rate=0.05, batch_size=32, epochs=3)
    assert (params.filters, params.kernel_size, params.dense_units, params.dropout) == (8, 3, 64, 0.2)
    defaults = TfMnistParams()  # the classic sample's network by default
    assert (defaults.filters, defaults.kernel_size, defaults.dense_units, defaults.dropout) == (32, 5, 1024, 0.4)
    assert defaults.epochs is None and defaults.validation_fraction == 0.1
    for bad in ({"dropout": 1.0}, {"kernel_size": 0}, {"filters": 0}, {"epochs": 0},
                {"validation_fraction": 1.0}, {"dense_units": 0}):
        with pytest.raises(ValidationError):
            TfMnistParams(**bad)


def test_search_matrix_sets_the_knobs_of_each_group():
    """A matrix (as a search's trial) reaches the workload's config by field name."""
    from spotbench.spec import load_spec

    spec = load_spec({"name": "k", "cloud": "local", "workload": {"name": "tf-mnist", "dataset": "synthetic"},
                      "matrix": {"filters": [8, 16], "kernel_size": [3], "dropout": [0.1]}})
    groups = spec.plan()
    assert sorted(g.params.filters for g in groups) == [8, 16]
    assert all(g.params.kernel_size == 3 and g.params.dropout == 0.1 for g in groups)


def test_search_validation_split_is_fixed_disjoint_and_apart_from_test():
    rng = np.random.default_rng(0)
    x = np.arange(100, dtype=np.uint8).repeat(28 * 28).reshape(100, 28, 28)
    y = (np.arange(100) % 10).astype(np.int32)
    data = Dataset("t", x, y, rng.integers(0, 255, (7, 28, 28), dtype=np.uint8), np.zeros(7, np.int32))
    split = with_validation(data, 0.2)
    assert len(split.y_val) == 20 and len(split.y_train) == 80 and len(split.y_test) == 7
    train_ids, val_ids = set(split.x_train[:, 0, 0].tolist()), set(split.x_val[:, 0, 0].tolist())
    assert not train_ids & val_ids and len(train_ids | val_ids) == 100
    again = with_validation(data, 0.2)
    assert np.array_equal(again.x_val, split.x_val)  # every trial validates on the same examples
    assert split.info["validation_examples"] == 20 and split.info["test_examples"] == 7
    assert len(with_validation(data, 0.0).y_val) == 0
    assert len(with_validation(data, 0.001).y_val) == 1  # a fraction > 0 keeps one at least


def test_search_epochs_set_the_steps_and_the_sync_points():
    params = TfMnistParams(epochs=3, batch_size=16, steps=999)
    assert steps_per_epoch(150, 16) == 9
    assert planned_steps(params, 150, 16) == 27
    assert planned_steps(TfMnistParams(steps=40), 150, 16) == 40  # no epochs: steps
    points = sync_points(0, 27, warmup=0, every=0, checkpoint_every=0, epoch_every=9)
    assert points == [9, 18, 27]


def test_search_per_epoch_values_reach_the_attempt_and_a_search_progress_path():
    """Each validation goes to the attempt's intermediate records (the one progress path);
    a search's pruner reads the epoch as its step there; a mid-epoch value (a resumed
    attempt's last) is kept but never a pruner step."""
    from spotbench.control.search import pruner_step
    from workloads.tf_mnist.__main__ import _progress

    class Run:
        def __init__(self):
            self.kept = []

        def intermediate(self, metric, value, unit, **meta):
            self.kept.append((metric, value, meta))

    run = Run()
    report = _progress(run)
    report("val_accuracy", 0.5, "fraction", step=8, epoch=1)
    report("val_accuracy", 0.6, "fraction", step=12, epoch=1.5)
    assert run.kept == [("val_accuracy", 0.5, {"step": 8, "epoch": 1}),
                        ("val_accuracy", 0.6, {"step": 12, "epoch": 1.5})]
    told = [(pruner_step(meta), metric, value) for metric, value, meta in run.kept if pruner_step(meta) is not None]
    assert told == [(1, "val_accuracy", 0.5)]

    class Plain:  # no search core: the attempt's records only
        def __init__(self):
            self.kept = []

        def intermediate(self, metric, value, unit, **meta):
            self.kept.append(metric)

    plain = Plain()
    _progress(plain)("val_loss", 1.0, "nats", step=8, epoch=1)
    assert plain.kept == ["val_loss"]


def test_search_network_follows_the_knobs():
    tf = pytest.importorskip("tensorflow")
    from workloads.tf_mnist.model import MnistCNN, save_weights

    model = MnistCNN.of(TfMnistParams(filters=4, kernel_size=3, dense_units=16, dropout=0.0))
    shapes = [tuple(v.shape) for v in model.weights]
    assert shapes == [(3, 3, 1, 4), (4,), (3, 3, 4, 8), (8,), (7 * 7 * 8, 16), (16,), (16, 10), (10,)]
    out = model(tf.zeros([2, 28, 28], tf.uint8), training=True)
    assert tuple(out.shape) == (2, 10)


def test_search_tf_mnist_reports_validation_and_test_apart_and_stores_weights(tmp_path):
    """One real training group on tiny IDX files: 2 epochs; validation accuracy per epoch is
    readable while it runs (intermediate records), final val_* and test_* are separate
    metrics, and the weights are the attempt's artifacts, of the searched shape."""
    data_dir = tmp_path / "mnist"
    _write_mnist(data_dir)
    loaded = load_mnist(str(data_dir))
    assert len(loaded.y_train) == 160
    url = f"file://{tmp_path}/results"
    store = ResultStore(url)
    run = store.open_run().run
    knobs = {"strategy": "multi_worker_mirrored", "workers": 1, "dataset": "mnist",
             "dataset_url": str(data_dir), "epochs": 2, "batch_size": 16, "learning_rate": 0.1,
             "filters": 4, "kernel_size": 3, "dense_units": 16, "dropout": 0.1,
             "validation_fraction": 0.2, "warmup_steps": 1}
    group = group_for(knobs)
    with DoneServer() as done:
        cluster = Cluster(group, url, done.url, tmp_path / "logs")
        try:
            cluster.start()
            assert cluster.wait(cluster.proc("worker", 0), 300) == 0, cluster.log_text()
        finally:
            cluster.stop()
        assert [c["group"] for c in done.calls] == [group.id]
    records = store.read(run)
    by = {r.metric: r for r in records}
    per_epoch = 128 // 16  # 160 examples, 32 held out for validation
    assert by["steps"].value == 2 * per_epoch
    assert {"val_accuracy", "val_loss", "test_accuracy", "test_loss"} <= set(by)
    assert by["val_accuracy"].metadata["split"] == "validation"
    assert "split" not in by["test_accuracy"].metadata
    info = by["steps"].metadata["dataset_info"]
    assert (info["train_examples"], info["validation_examples"], info["test_examples"]) == (128, 32, 40)
    meta = by["steps"].metadata
    assert (meta["filters"], meta["kernel_size"], meta["dense_units"], meta["dropout"], meta["epochs"]) == (4, 3, 16, 0.1, 2)

    progress = store.intermediate(run, group.id)
    vals = [r for r in progress if r.metric == "val_accuracy"]
    assert [(r.metadata["epoch"], r.metadata["step"]) for r in vals] == [(1, per_epoch), (2, 2 * per_epoch)]
    assert all(r.metadata["intermediate"] and r.group == group.id for r in vals)
    assert vals[-1].value == pytest.approx(by["val_accuracy"].value)  # the last epoch's is the result

    stored = store.artifacts(run, group.id, 1)
    assert set(stored) == {"weights.npz", "model.json"}
    assert by["steps"].metadata["artifacts_bytes"] == sum(stored.values())
    out = tmp_path / "best"
    store.download_artifacts(run, group.id, 1, out)
    weights = np.load(io.BytesIO((out / "weights.npz").read_bytes()))
    assert weights["conv1_w"].shape == (3, 3, 1, 4) and weights["fc1_w"].shape == (7 * 7 * 8, 16)
    assert json.loads((out / "model.json").read_text())["filters"] == 4
