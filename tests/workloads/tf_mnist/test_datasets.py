"""The IDX reader and the MNIST loader on IDX files this test writes (no TensorFlow)."""

from __future__ import annotations

import gzip
import hashlib
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from workloads.tf_mnist import datasets
from workloads.tf_mnist.datasets import MNIST_FILES, DatasetError, load_mnist
from workloads.tf_mnist.idx import IdxError, read_idx, write_idx


def _arrays(n_train: int = 12, n_test: int = 5) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {
        "train_images": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train_labels": rng.integers(0, 10, n_train).astype(np.uint8),
        "test_images": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "test_labels": rng.integers(0, 10, n_test).astype(np.uint8),
    }


def _write_folder(folder: Path, arrays: dict[str, np.ndarray], *, compress: bool) -> dict[str, str]:
    """Write the four files; return their SHA-256 by file name."""
    folder.mkdir(parents=True, exist_ok=True)
    sums = {}
    for key, base in MNIST_FILES.items():
        name = f"{base}.gz" if compress else base
        data = write_idx(arrays[key], compress=compress)
        (folder / name).write_bytes(data)
        sums[name] = hashlib.sha256(data).hexdigest()
    return sums


# ---- IDX --------------------------------------------------------------------------------
def test_idx_header_is_read_by_hand_made_bytes():
    # magic 0x00000801 (ubyte, 1 dim), 3 items: 7 0 9  — written by hand, not by write_idx
    data = bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 0, 9])
    assert read_idx(data).tolist() == [7, 0, 9]
    # 2 x 2 big-endian int32
    data = bytes([0, 0, 0x0C, 2, 0, 0, 0, 2, 0, 0, 0, 2]) + b"".join(
        v.to_bytes(4, "big", signed=True) for v in (1, -2, 300, 4)
    )
    assert read_idx(data).tolist() == [[1, -2], [300, 4]]


@pytest.mark.parametrize("dtype", ["u1", "i1", ">i2", ">i4", ">f4", ">f8"])
def test_idx_round_trip(dtype):
    array = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype) if dtype != "u1" else np.arange(24, dtype="u1").reshape(2, 3, 4)
    for compress in (False, True):
        back = read_idx(write_idx(array, compress=compress))
        assert back.shape == (2, 3, 4)
        assert np.array_equal(back, array)


def test_idx_bad_magic_is_a_clear_error():
    with pytest.raises(IdxError, match=r"train\.bin: bad magic number 0x504b0304"):
        read_idx(b"PK\x03\x04" + b"\0" * 20, "train.bin")


def test_idx_truncated_and_corrupt_gzip():
    data = write_idx(np.zeros((3, 28, 28), np.uint8))
    with pytest.raises(IdxError, match=r"dimensions 3x28x28 need 2352 data bytes, the file has 2000"):
        read_idx(data[: 16 + 2000])
    with pytest.raises(IdxError, match="corrupt gzip"):
        read_idx(gzip.compress(data)[:40], "x.gz")
    with pytest.raises(IdxError, match="too short"):
        read_idx(b"\0\0")


# ---- MNIST loader -----------------------------------------------------------------------
def test_load_mnist_gz_folder_with_checksums(tmp_path):
    arrays = _arrays()
    sums = _write_folder(tmp_path, arrays, compress=True)
    ds = load_mnist(str(tmp_path), checksums=sums)
    assert ds.x_train.shape == (12, 28, 28) and ds.x_train.dtype == np.uint8
    assert np.array_equal(ds.x_test, arrays["test_images"])
    assert ds.y_train.dtype == np.int32 and ds.y_train.tolist() == arrays["train_labels"].tolist()
    assert set(ds.info["checks"].values()) == {"sha256"}
    # the same folder as a file:// URL
    assert np.array_equal(load_mnist(f"file://{tmp_path}", checksums=sums).y_test, ds.y_test)


def test_official_checksums_reject_files_that_are_not_the_official_ones(tmp_path):
    _write_folder(tmp_path, _arrays(), compress=True)
    with pytest.raises(DatasetError, match=r"train-images-idx3-ubyte\.gz: SHA-256 [0-9a-f]{64} does not match the official file"):
        load_mnist(str(tmp_path))  # default table = the official files' checksums


def test_uncompressed_files_are_checked_for_structure(tmp_path):
    arrays = _arrays()
    _write_folder(tmp_path, arrays, compress=False)
    ds = load_mnist(str(tmp_path))
    assert set(ds.info["checks"].values()) == {"structure"}
    assert np.array_equal(ds.x_train, arrays["train_images"])
    # labels that do not match the images
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(write_idx(np.zeros(4, np.uint8)))
    with pytest.raises(DatasetError, match="test: 5 images but labels of shape"):
        load_mnist(str(tmp_path))
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(b"garbage!" * 4)
    with pytest.raises(DatasetError, match="t10k-images-idx3-ubyte: bad magic"):
        load_mnist(str(tmp_path))


def test_missing_folder_and_missing_file(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        load_mnist(str(tmp_path / "nope"))
    _write_folder(tmp_path, _arrays(), compress=False)
    (tmp_path / "train-labels-idx1-ubyte").unlink()
    with pytest.raises(DatasetError, match="neither train-labels-idx1-ubyte.gz nor train-labels-idx1-ubyte"):
        load_mnist(str(tmp_path))


def test_http_url_and_unreachable_url(tmp_path):
    arrays = _arrays()
    sums = _write_folder(tmp_path / "mirror", arrays, compress=True)
    handler = partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    try:
        ds = load_mnist(f"http://127.0.0.1:{port}/mirror/", checksums=sums)
        assert np.array_equal(ds.x_train, arrays["train_images"])
        with pytest.raises(DatasetError, match="has neither"):
            load_mnist(f"http://127.0.0.1:{port}/elsewhere/", checksums=sums)
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(DatasetError, match=r"cannot reach http://127\.0\.0\.1:\d+/mirror/train-images-idx3-ubyte\.gz .*'digits'"):
        load_mnist(f"http://127.0.0.1:{port}/mirror/", timeout=2)


def test_digits_and_synthetic():
    ds = datasets.load("digits")
    assert ds.x_train.shape == (1500, 28, 28) and ds.x_test.shape == (297, 28, 28)
    assert ds.x_train.dtype == np.uint8 and ds.x_train.max() > 200
    assert set(np.unique(ds.y_train)) == set(range(10))
    syn = datasets.load("synthetic")
    assert syn.x_train.shape[1:] == (28, 28) and syn.y_test.max() <= 9
    with pytest.raises(DatasetError, match="unknown dataset"):
        datasets.load("cifar")
