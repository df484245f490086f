"""CIFAR-10-shaped data from files: the CIFAR-10 *binary version*'s format.

A folder holds `data_batch_1.bin` … (training) and `test_batch.bin` (validation); each
record is 3073 bytes: the label (0–9), then 1024 red, 1024 green, 1024 blue pixel bytes of
a 32×32 image, row-major (https://www.cs.toronto.edu/~kriz/cifar.html, "Binary version").
The images ship the real set at `DEFAULT_FOLDER`; tests write small ones with `write_bin`.
`synthetic` makes a learnable set in memory (each class a fixed pattern plus noise).

numpy and torch only: this runs in the training processes (`train.py`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

RECORD = 1 + 3 * 32 * 32
DEFAULT_FOLDER = "/opt/cifar-10-batches-bin"  # where images/torch-* put the set
FOLDER_ENV = "SPOTBENCH_CIFAR10"  # overrides DEFAULT_FOLDER
# CIFAR-10's per-channel mean and standard deviation (0–1 scale)
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


def folder_of(dataset_url: str | None) -> Path:
    """The data folder: the spec's `dataset_url` (a path or file:// URL), else the env's or
    the image's."""
    given = dataset_url or os.environ.get(FOLDER_ENV) or DEFAULT_FOLDER
    return Path(given.removeprefix("file://"))


def read_bin(paths: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 N×3×32×32, labels int64 N) from CIFAR-10 binary files."""
    chunks = []
    for path in paths:
        raw = np.fromfile(path, dtype=np.uint8)
        if raw.size == 0 or raw.size % RECORD:
            raise ValueError(f"{path}: {raw.size} bytes is not a whole number of {RECORD}-byte "
                             "CIFAR-10 records (label byte + 3072 pixel bytes)")
        chunks.append(raw.reshape(-1, RECORD))
    records = np.concatenate(chunks)
    labels = records[:, 0].astype(np.int64)
    if labels.max() > 9:
        raise ValueError(f"{paths[0].parent}: a label is {labels.max()}; CIFAR-10 labels are 0–9")
    return records[:, 1:].reshape(-1, 3, 32, 32), labels


def write_bin(path: Path, images: np.ndarray, labels: np.ndarray) -> None:
    """Write records in the same format (tests, a tiny set for a local run)."""
    images = np.asarray(images, dtype=np.uint8).reshape(len(labels), -1)
    records = np.concatenate([np.asarray(labels, dtype=np.uint8)[:, None], images], axis=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    records.tofile(path)


def synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`n` images of 10 classes: a class's fixed random pattern plus noise (learnable)."""
    patterns = np.random.default_rng(1234).integers(0, 256, size=(10, 3, 32, 32))
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, size=n)
    noise = rng.normal(0, 48, size=(n, 3, 32, 32))
    return np.clip(patterns[labels] + noise, 0, 255).astype(np.uint8), labels.astype(np.int64)


def to_tensors(images: np.ndarray, labels: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.from_numpy(images.astype(np.float32) / 255.0)
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    return (x - mean) / std, torch.from_numpy(labels)


def load(dataset: str, dataset_url: str | None, train_examples: int = 0,
         val_examples: int = 0) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """(train x, y), (validation x, y), each cut to its `*_examples` when > 0."""
    if dataset == "synthetic":
        train = synthetic(train_examples or 2048, seed=1)
        val = synthetic(val_examples or 512, seed=2)
    else:
        folder = folder_of(dataset_url)
        batches = sorted(folder.glob("data_batch_*.bin"))
        test = folder / "test_batch.bin"
        if not batches or not test.exists():
            raise FileNotFoundError(
                f"{folder}: no CIFAR-10 binary files (data_batch_*.bin and test_batch.bin); set "
                f"the workload's `dataset_url` to such a folder, or `dataset: synthetic`")
        train, val = read_bin(batches), read_bin([test])
    cut = lambda pair, n: (pair[0][:n], pair[1][:n]) if n else pair  # noqa: E731
    return to_tensors(*cut(train, train_examples)), to_tensors(*cut(val, val_examples))
