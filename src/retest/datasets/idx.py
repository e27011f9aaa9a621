"""IDX files (the MNIST / Fashion-MNIST layout), gzip-compressed or raw.

Layout: two zero bytes, a type byte, a dimension-count byte, then one big-endian
uint32 per dimension, then the row-major payload in big-endian order. Images are
``(N, rows, cols)`` uint8 (type 0x08, 3 dims), labels ``(N,)`` uint8 (1 dim).
Compression is detected from the gzip magic bytes, never from the file name.
"""

from __future__ import annotations

import gzip
import math
import os
import struct
import zlib
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from retest._atomic import atomic_write_bytes
from retest.errors import DataIntegrityError, InputValidationError

__all__ = ["IDX_DTYPES", "read_idx", "read_idx_header", "write_idx"]

IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_CODE_OF = {dt.newbyteorder("=").str[1:]: c for c, dt in IDX_DTYPES.items()}
_GZIP_MAGIC = b"\x1f\x8b"


def _read_bytes(path: Path) -> bytes:
    if path.is_dir():
        raise InputValidationError(
            f"{path} is a directory; expected an IDX file (e.g. "
            "t10k-images-idx3-ubyte.gz). Pass the file itself."
        )
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataIntegrityError(f"IDX file {path} does not exist.") from None
    except OSError as err:
        raise DataIntegrityError(
            f"IDX file {path} cannot be read ({err.strerror or err})."
        ) from None
    if raw[:2] != _GZIP_MAGIC:
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, OSError, zlib.error) as err:
        raise DataIntegrityError(
            f"IDX file {path} is a truncated or corrupt gzip stream ({err}); "
            "download it again."
        ) from err


def _parse_header(data: bytes, path: Path) -> tuple[np.dtype, tuple[int, ...], int]:
    if len(data) < 4:
        raise DataIntegrityError(
            f"IDX file {path} is {len(data)} bytes long; expected at least a 4-byte "
            "header."
        )
    zero, code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or code not in IDX_DTYPES or ndim == 0:
        raise DataIntegrityError(
            f"IDX file {path} has magic number 0x{data[:4].hex()}; expected "
            "0x0000TTDD with type TT in {08,09,0B,0C,0D,0E} and DD ≥ 1 dimensions."
        )
    head = 4 + 4 * ndim
    if len(data) < head:
        raise DataIntegrityError(
            f"IDX file {path} is truncated inside its header ({len(data)} of {head} "
            "bytes)."
        )
    shape = struct.unpack(f">{ndim}I", data[4:head])
    return IDX_DTYPES[code], tuple(int(s) for s in shape), head


def read_idx_header(path: str | os.PathLike[str]) -> tuple[np.dtype, tuple[int, ...]]:
    """Return (dtype, shape) declared by the header of an IDX file."""
    p = Path(path)
    dtype, shape, _ = _parse_header(_read_bytes(p), p)
    return dtype, shape


def read_idx(path: str | os.PathLike[str]) -> NDArray[np.generic]:
    """Read an IDX file (``.gz`` or raw) into a native-endian array.

    Raises
    ------
    DataIntegrityError
        Bad magic number, truncated header, payload shorter or longer than the
        header declares, or a broken gzip stream. The message names the file.

    Examples
    --------
    >>> import tempfile, pathlib, numpy as np
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "labels-idx1-ubyte.gz"
    >>> write_idx(p, np.array([3, 1, 4], dtype=np.uint8))
    >>> read_idx(p).tolist()
    [3, 1, 4]
    """
    p = Path(path)
    data = _read_bytes(p)
    dtype, shape, head = _parse_header(data, p)
    expected = math.prod(shape) * dtype.itemsize  # exact: no int64 overflow
    got = len(data) - head
    if got != expected:
        kind = "truncated" if got < expected else "longer than its header says"
        raise DataIntegrityError(
            f"IDX file {p} is {kind}: header declares shape {shape} "
            f"({expected} payload bytes) but {got} bytes follow. Download it again."
        )
    arr = np.frombuffer(
        data, dtype=dtype, count=expected // dtype.itemsize, offset=head
    )
    return arr.reshape(shape).astype(dtype.newbyteorder("="), copy=True)


def write_idx(
    path: str | os.PathLike[str],
    array: NDArray[np.generic],
    *,
    compress: bool | None = None,
) -> None:
    """Write ``array`` as an IDX file, atomically.

    ``compress=None`` gzips when the name ends in ``.gz``. Supported dtypes:
    uint8, int8, int16, int32, float32, float64 (stored big-endian).
    """
    p = Path(path)
    arr = np.asarray(array)
    key = arr.dtype.newbyteorder("=").str[1:]
    if key not in _CODE_OF:
        raise InputValidationError(
            f"cannot write dtype {arr.dtype} to IDX file {p}; supported: uint8, int8, "
            "int16, int32, float32, float64."
        )
    if arr.ndim == 0 or arr.ndim > 255:
        raise InputValidationError(f"IDX arrays need 1..255 dims. Got {arr.shape}.")
    code = _CODE_OF[key]
    header = struct.pack(">HBB", 0, code, arr.ndim) + struct.pack(
        f">{arr.ndim}I", *arr.shape
    )
    payload = np.ascontiguousarray(arr, dtype=IDX_DTYPES[code]).tobytes()
    data = header + payload
    if compress if compress is not None else p.name.endswith(".gz"):
        # mtime=0 makes the bytes reproducible: same array -> same file hash.
        data = gzip.compress(data, mtime=0)
    atomic_write_bytes(p, data)
