"""Tiny CIFAR-10-shaped binary files for the torch tests (no download)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workloads.torch_cifar.data import write_bin


def make_cifar(folder: Path, train: int = 512, test: int = 128, batches: int = 2) -> Path:
    """`data_batch_1..N.bin` and `test_batch.bin`: images of 10 classes, each a fixed
    pattern plus noise, so a few steps already learn something."""
    rng = np.random.default_rng(7)
    patterns = rng.integers(0, 256, size=(10, 3, 32, 32))

    def images(n: int) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.integers(0, 10, size=n)
        return np.clip(patterns[labels] + rng.normal(0, 40, (n, 3, 32, 32)), 0, 255), labels

    per = train // batches
    for i in range(1, batches + 1):
        write_bin(folder / f"data_batch_{i}.bin", *images(per))
    write_bin(folder / "test_batch.bin", *images(test))
    return folder
