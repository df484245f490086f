"""The IDX file format of the MNIST database (http://yann.lecun.com/exdb/mnist/).

    magic: 0x00 0x00 <type code> <number of dimensions>
    dims:  one big-endian uint32 per dimension
    data:  the values, big-endian, row-major

`read_idx` parses bytes (gzip-compressed or not) into a numpy array and raises `IdxError`
naming the file and what is wrong, instead of guessing. No TensorFlow here.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import numpy as np

# type code → numpy dtype (big-endian), as the format defines them
IDX_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype("u1"),
    0x09: np.dtype("i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
GZIP_MAGIC = b"\x1f\x8b"


class IdxError(ValueError):
    """A file is not a valid IDX file (or not the one expected)."""


def decompress(data: bytes, name: str = "<idx>") -> bytes:
    """Gunzip `data` if it is gzip-compressed; return it unchanged otherwise."""
    if not data.startswith(GZIP_MAGIC):
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise IdxError(f"{name}: corrupt gzip data ({exc}); download the file again") from None


def read_idx(data: bytes, name: str = "<idx>") -> np.ndarray:
    """Parse one IDX file (gzip or raw bytes) into an array of its declared shape."""
    data = decompress(data, name)
    if len(data) < 4:
        raise IdxError(f"{name}: {len(data)} bytes is too short for an IDX header")
    zero, type_code, ndim = data[:2], data[2], data[3]
    if zero != b"\x00\x00" or type_code not in IDX_TYPES or ndim == 0:
        raise IdxError(
            f"{name}: bad magic number 0x{data[:4].hex()} (expected 0x0000TTNN with type "
            f"TT in {', '.join(f'{t:02x}' for t in IDX_TYPES)} and NN ≥ 1 dimensions); "
            "is this an MNIST IDX file?"
        )
    header = 4 + 4 * ndim
    if len(data) < header:
        raise IdxError(f"{name}: header declares {ndim} dimensions but the file ends at byte {len(data)}")
    dims = struct.unpack(f">{ndim}I", data[4:header])
    dtype = IDX_TYPES[type_code]
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    body = len(data) - header
    if body != expected:
        raise IdxError(
            f"{name}: dimensions {'x'.join(map(str, dims))} need {expected} data bytes, "
            f"the file has {body} (truncated or not an IDX file)"
        )
    array = np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)
    return array.astype(dtype.newbyteorder("="), copy=False)


def write_idx(array: np.ndarray, *, compress: bool = False) -> bytes:
    """Encode `array` as IDX bytes (the inverse of `read_idx`; used to make test files)."""
    codes = {dt.newbyteorder("="): code for code, dt in IDX_TYPES.items()}
    native = np.dtype(array.dtype).newbyteorder("=")
    if native not in codes:
        raise IdxError(f"IDX cannot store dtype {array.dtype}")
    code = codes[native]
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    raw = header + np.ascontiguousarray(array, dtype=IDX_TYPES[code]).tobytes()
    return gzip.compress(raw, mtime=0) if compress else raw
