"""Reading ``.npy`` files a user brings, with one-line errors and no silent truncation.

``numpy.load`` reads as many bytes as the header asks for and ignores the rest,
so a damaged header that declares a smaller shape (``(12, 8, 8, 3)`` read as
``(12, 8, 8, 2)``) loads part of the file without complaint. Here the file size
must equal header + payload exactly, and every failure (missing, a directory,
empty, truncated, corrupt header, pickled objects, an ``.npz`` under a ``.npy``
name) is one :class:`~retest.errors.RetestError` naming the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib import format as npy_format
from numpy.typing import NDArray

from retest.errors import DataIntegrityError, InputValidationError

__all__ = ["load_npy"]


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text[:200] or type(err).__name__


def load_npy(
    path: str | os.PathLike[str], *, what: str = "array", mmap: bool = False
) -> NDArray[Any]:
    """The array stored in ``path`` (memory-mapped read-only when ``mmap``).

    Raises
    ------
    InputValidationError
        ``path`` is a directory, or holds an ``.npz`` archive.
    DataIntegrityError
        Missing, empty, truncated, longer than its header says, or corrupt.
    """
    p = Path(path)
    if p.is_dir():
        raise InputValidationError(
            f"{p} is a directory; the {what} must be one .npy file. Pass the file."
        )
    if not p.is_file():
        raise DataIntegrityError(f"{p}: {what} file not found. Check the path.")
    hint = "the file is probably truncated or corrupt. Re-create or re-download it."
    try:
        with open(p, "rb") as f:
            head = f.read(6)
            if head[:4] == b"PK\x03\x04":
                raise InputValidationError(
                    f"{p}: holds an .npz archive; the {what} must be a single .npy "
                    "array (or name the file .npz where an archive is accepted)."
                )
            if not head:
                raise DataIntegrityError(f"{p}: file is empty; expected a .npy {what}.")
            f.seek(0)
            version = npy_format.read_magic(f)
            read_header = (
                npy_format.read_array_header_1_0
                if version == (1, 0)
                else npy_format.read_array_header_2_0  # 2.0 and 3.0 share the layout
            )
            shape, fortran, dtype = read_header(f, max_header_size=100_000)
            offset = f.tell()
        if dtype.hasobject:
            raise InputValidationError(
                f"{p}: holds Python objects (dtype {dtype}); expected a numeric "
                f"{what}. Save a numeric array instead."
            )
        count = 1
        for s in shape:
            count *= int(s)
        expected = offset + count * dtype.itemsize
        size = p.stat().st_size
        if size != expected:
            kind = "truncated" if size < expected else "longer than its header says"
            raise DataIntegrityError(
                f"{p}: .npy file is {kind} (header declares {dtype} {tuple(shape)}, "
                f"{expected} bytes in all, the file has {size}); {hint}"
            )
        if count == 0:
            return np.zeros(shape, dtype=dtype, order="F" if fortran else "C")
        arr: NDArray[Any] = np.load(
            p, mmap_mode="r" if mmap else None, allow_pickle=False
        )
        return arr
    except (InputValidationError, DataIntegrityError):
        raise
    except Exception as err:  # numpy's header parser raises many kinds on bad bytes
        # (ValueError, SyntaxError, tokenize.TokenError, TypeError, ...): all mean
        # the same to the user.
        raise DataIntegrityError(
            f"{p}: not a readable .npy {what} ({_one_line(err)}); {hint}"
        ) from None
