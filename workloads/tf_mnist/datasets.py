"""The three datasets of the tf-mnist workload, as numpy arrays (no TensorFlow here).

- `mnist`: the four official IDX files from a folder path, a file:// URL or an http(s) URL
  (default: the public mirror Google's own MNIST samples download from). Each file is
  looked up as `<name>.gz` first, then `<name>`. Compressed files are checked against the
  SHA-256 of the official files; the uncompressed files have no published checksum, so only
  their structure (magic number, sizes, 28×28 images, labels 0-9) is checked — the dataset
  info says which check was done.
- `digits`: scikit-learn's bundled 8×8 digits (1797 images, offline) resized to 28×28.
- `synthetic`: random images and labels of the right shape (throughput only: accuracy ~0.1).

Images are uint8 (N, 28, 28) in 0-255; labels are int32 (N,) in 0-9.

`with_validation` holds a fixed share of the training data out as the validation split
(what a search optimizes); the test split stays apart (reported, never optimized).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import requests

from workloads.tf_mnist.idx import IdxError, read_idx

DEFAULT_MNIST_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"
MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
# SHA-256 of the official gzip files (as published in tensorflow/datasets url_checksums).
MNIST_SHA256 = {
    "train-images-idx3-ubyte.gz": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    "train-labels-idx1-ubyte.gz": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    "t10k-images-idx3-ubyte.gz": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    "t10k-labels-idx1-ubyte.gz": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}
DIGITS_TEST = 297  # of sklearn's 1797 digits: 1500 train, 297 test
SYNTHETIC_TRAIN = 2048
SYNTHETIC_TEST = 256


class DatasetError(RuntimeError):
    """The dataset cannot be loaded; the message says what to do."""


@dataclass(frozen=True)
class Dataset:
    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)
    x_val: np.ndarray = field(default_factory=lambda: np.zeros((0, 28, 28), np.uint8))
    y_val: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))


VALIDATION_SEED = 1234  # the split is the same in every trial: trials compare on one set


def with_validation(data: Dataset, fraction: float, seed: int = VALIDATION_SEED) -> Dataset:
    """`data` with `fraction` of its training examples (a fixed permutation) moved to the
    validation split: at least one when the fraction is > 0, never all of them."""
    n = len(data.y_train)
    n_val = min(n - 1, max(1, round(n * fraction))) if fraction > 0 and n > 1 else 0
    order = np.random.default_rng(seed).permutation(n)
    val, train = order[:n_val], order[n_val:]
    return Dataset(data.name, data.x_train[train], data.y_train[train], data.x_test, data.y_test,
                   info={**data.info, "train_examples": int(len(train)), "validation_examples": int(n_val),
                         "test_examples": int(len(data.y_test)), "validation_seed": seed},
                   x_val=data.x_train[val], y_val=data.y_train[val])


# ---- mnist ------------------------------------------------------------------------------
def _fetch(source: str, filename: str, timeout: float) -> bytes | None:
    """The bytes of `filename` under `source`, or None when it is not there."""
    if source.startswith(("http://", "https://")):
        url = source.rstrip("/") + "/" + filename
        try:
            resp = requests.get(url, timeout=timeout)
        except requests.RequestException as exc:
            raise DatasetError(
                f"cannot reach {url} ({exc.__class__.__name__}); check the network, or give "
                "`dataset_url` a folder holding the four MNIST IDX files, or use dataset "
                "'digits' (offline)"
            ) from None
        if resp.status_code == 404:
            return None
        if resp.status_code >= 400:
            raise DatasetError(f"{url} answered HTTP {resp.status_code}; check `dataset_url`")
        return resp.content
    path = Path(source.removeprefix("file://")) / filename
    return path.read_bytes() if path.is_file() else None


def _verify(filename: str, data: bytes, checksums: Mapping[str, str]) -> str:
    expected = checksums.get(filename)
    if expected is None:
        return "structure"
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise DatasetError(
            f"{filename}: SHA-256 {actual} does not match the official file ({expected}); "
            "the download is corrupt or not MNIST: delete it and download again"
        )
    return "sha256"


def load_mnist(
    source: str | None = None,
    *,
    checksums: Mapping[str, str] = MNIST_SHA256,
    timeout: float = 60,
) -> Dataset:
    """Load the four MNIST IDX files from a folder, file:// or http(s) URL."""
    source = source or DEFAULT_MNIST_URL
    if not source.startswith(("http://", "https://")) and not Path(source.removeprefix("file://")).is_dir():
        raise DatasetError(f"MNIST folder {source} does not exist; give an existing folder or an http(s) URL")
    arrays: dict[str, np.ndarray] = {}
    checks: dict[str, str] = {}
    for key, base in MNIST_FILES.items():
        for filename in (f"{base}.gz", base):
            data = _fetch(source, filename, timeout)
            if data is not None:
                break
        else:
            raise DatasetError(f"{source} has neither {base}.gz nor {base}: is it the MNIST folder?")
        checks[filename] = _verify(filename, data, checksums)
        try:
            arrays[key] = read_idx(data, filename)
        except IdxError as exc:
            raise DatasetError(str(exc)) from None
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if images.ndim != 3 or images.shape[1:] != (28, 28) or images.dtype != np.uint8:
            raise DatasetError(f"{split} images: expected uint8 N×28×28, got {images.dtype} {images.shape}")
        if labels.shape != (images.shape[0],):
            raise DatasetError(f"{split}: {images.shape[0]} images but labels of shape {labels.shape}")
        if labels.size and (labels.min() < 0 or labels.max() > 9):
            raise DatasetError(f"{split} labels: values outside 0-9")
    return Dataset(
        "mnist",
        arrays["train_images"], arrays["train_labels"].astype(np.int32),
        arrays["test_images"], arrays["test_labels"].astype(np.int32),
        info={"source": source, "checks": checks},
    )


# ---- digits, synthetic ----------------------------------------------------------------------
def load_digits() -> Dataset:
    """scikit-learn's 8×8 digits (values 0-16), bilinearly resized to 28×28 uint8."""
    from scipy.ndimage import zoom
    from sklearn.datasets import load_digits as sk_digits

    bunch = sk_digits()
    images = zoom(bunch.images.astype(np.float32), (1, 28 / 8, 28 / 8), order=1)
    images = np.clip(images * (255.0 / 16.0), 0, 255).round().astype(np.uint8)
    labels = bunch.target.astype(np.int32)
    order = np.random.default_rng(0).permutation(len(labels))  # fixed split
    test, train = order[:DIGITS_TEST], order[DIGITS_TEST:]
    return Dataset("digits", images[train], labels[train], images[test], labels[test],
                   info={"source": "sklearn.datasets.load_digits", "resized": "8x8→28x28 bilinear"})


def synthetic(n_train: int = SYNTHETIC_TRAIN, n_test: int = SYNTHETIC_TEST, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    return Dataset(
        "synthetic",
        rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        rng.integers(0, 10, n_train, dtype=np.int32),
        rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        rng.integers(0, 10, n_test, dtype=np.int32),
        info={"source": "random", "seed": seed},
    )


def load(name: str, url: str | None = None) -> Dataset:
    if name == "mnist":
        return load_mnist(url)
    if name == "digits":
        return load_digits()
    if name == "synthetic":
        return synthetic()
    raise DatasetError(f"unknown dataset {name!r}: use mnist, digits or synthetic")
