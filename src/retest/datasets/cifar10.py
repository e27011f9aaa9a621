"""CIFAR-10, python pickle version (docs/algorithms.md#cifar-10-pickles).

The archive ``cifar-10-python.tar.gz`` unpacks to ``cifar-10-batches-py/`` with
``data_batch_1..5``, ``test_batch`` and ``batches.meta``. Each batch is a pickled
dict with byte-string keys: ``b"data"`` uint8 (N, 3072) channel-planar rows (1024
R values row-major, then G, then B), ``b"labels"`` list of int, ``b"filenames"``,
``b"batch_label"``. Decode: ``reshape(N, 3, 32, 32).transpose(0, 2, 3, 1)`` → HWC.

Pickles are read with a restricted unpickler that only rebuilds numpy arrays, so a
hostile file cannot run code.
"""

from __future__ import annotations

import gzip
import io
import os
import pickle
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._atomic import atomic_write_bytes
from retest._validation import check_labels
from retest.datasets.base import DatasetSource, RemoteFile
from retest.errors import DataIntegrityError, InputValidationError
from retest.records import LabeledSet

__all__ = [
    "CIFAR10",
    "CIFAR10_CLASSES",
    "read_cifar_batch",
    "read_cifar_meta",
    "write_cifar10_archive",
    "write_cifar_batch",
    "write_cifar_meta",
]

CIFAR10_CLASSES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
BATCH_DIR = "cifar-10-batches-py"
TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCH = "test_batch"
META = "batches.meta"

# Protocol 4 (any Python 3) stores the pixel block as raw bytes; protocol 2, which
# the published Python 2 files use, round-trips bytes through latin-1 strings and
# reads ~50x slower. Readers (ours, torchvision's) accept both.
_PROTOCOL = 4

_ALLOWED_GLOBALS = {
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
    ("__builtin__", "bytes"),
    ("builtins", "bytes"),
}


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        # Pickles written by numpy 1.x name numpy.core; numpy 2 moved it to _core.
        if module.startswith("numpy.core"):
            module = "numpy._core" + module[len("numpy.core") :]
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")
        return super().find_class(module, name)


def _unpickle(path: Path) -> dict[bytes, Any]:
    if path.is_dir():
        raise InputValidationError(
            f"{path} is a directory; expected a CIFAR batch file. Pass the batch "
            "file or the folder holding data_batch_1..5 and test_batch."
        )
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataIntegrityError(f"CIFAR batch {path} does not exist.") from None
    try:
        # From memory, so a damaged length field cannot make the reader allocate
        # gigabytes before noticing the data is short.
        obj = _ArrayUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except (MemoryError, RecursionError) as err:
        raise DataIntegrityError(
            f"CIFAR batch {path} is not a readable CIFAR pickle "
            f"({type(err).__name__}); the file is corrupt. Re-create or re-download it."
        ) from None
    except Exception as err:  # any failure to parse the bytes = a corrupt file
        # A truncated or bit-flipped pickle fails in many ways (UnpicklingError,
        # EOFError, KeyError, TypeError, LookupError from a bad codec name, ...);
        # every one of them means the same thing to the user.
        raise DataIntegrityError(
            f"CIFAR batch {path} is not a readable CIFAR pickle "
            f"({type(err).__name__}: {_one_line(err)}). Re-create or re-download it."
        ) from None
    if not isinstance(obj, dict):
        raise DataIntegrityError(
            f"CIFAR batch {path} holds a {type(obj).__name__}, expected a dict."
        )
    return {(k.encode() if isinstance(k, str) else k): v for k, v in obj.items()}


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text[:200] or type(err).__name__


def _text(value: Any) -> str:
    """A pickled name as text; bytes that are not UTF-8 are kept as escapes."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


def read_cifar_batch(
    path: str | os.PathLike[str],
) -> tuple[NDArray[np.uint8], NDArray[np.int64], list[str]]:
    """Read one CIFAR python batch.

    Returns
    -------
    images : ndarray of shape (n, 32, 32, 3), uint8, HWC RGB
    labels : ndarray of shape (n,), int64
    filenames : list of str (empty strings when the batch has none)

    Raises
    ------
    DataIntegrityError
        Not a CIFAR pickle (truncated, corrupt, wrong keys or shapes).
    InputValidationError
        Labels that are not whole class ids (a float label is never truncated).
    """
    p = Path(path)
    d = _unpickle(p)
    if b"data" not in d or not ({b"labels", b"fine_labels"} & d.keys()):
        raise DataIntegrityError(
            f"CIFAR batch {p} lacks keys b'data'/b'labels'; found "
            f"{sorted(map(repr, d))[:6]}."
        )
    data = d[b"data"]
    if not isinstance(data, np.ndarray):
        raise DataIntegrityError(
            f"CIFAR batch {p}: b'data' must be a uint8 array (n, 3072). Got "
            f"{type(data).__name__}."
        )
    raw_labels = d.get(b"labels", d.get(b"fine_labels"))
    if not isinstance(raw_labels, (list, tuple, np.ndarray)):
        raise DataIntegrityError(
            f"CIFAR batch {p}: b'labels' must be a list of class ids. Got "
            f"{type(raw_labels).__name__}."
        )
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise DataIntegrityError(
            f"CIFAR batch {p}: b'data' must be uint8 (n, 3072). Got {data.dtype} "
            f"{data.shape}."
        )
    if len(raw_labels) != data.shape[0]:
        raise DataIntegrityError(
            f"CIFAR batch {p}: {data.shape[0]} images but {len(raw_labels)} labels."
        )
    labels = (
        check_labels(raw_labels, name=f"CIFAR batch {p}: labels")
        if len(raw_labels)
        else np.zeros(0, dtype=np.int64)
    )
    images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    raw_names = d.get(b"filenames")
    if raw_names is None or (isinstance(raw_names, (list, tuple)) and not raw_names):
        raw_names = [b""] * len(labels)
    if isinstance(raw_names, np.ndarray) and raw_names.ndim == 1:
        raw_names = raw_names.tolist()
    if not isinstance(raw_names, (list, tuple)) or len(raw_names) != len(labels):
        raise DataIntegrityError(
            f"CIFAR batch {p}: b'filenames' must list one name per image."
        )
    names = [_text(n) for n in raw_names]
    return np.ascontiguousarray(images), labels, names


def _batch_bytes(
    images: ArrayLike,
    labels: ArrayLike,
    filenames: Sequence[str] | None,
    batch_label: str,
) -> bytes:
    imgs = np.asarray(images)
    labs = np.asarray(labels)
    if imgs.dtype != np.uint8 or imgs.ndim != 4 or imgs.shape[1:] != (32, 32, 3):
        raise InputValidationError(
            f"CIFAR images must be uint8 (n, 32, 32, 3) HWC. Got {imgs.dtype} {imgs.shape}."
        )
    if labs.shape != (imgs.shape[0],):
        raise InputValidationError(
            f"CIFAR batch: {imgs.shape[0]} images but labels of shape {labs.shape}."
        )
    if filenames is not None and len(filenames) != imgs.shape[0]:
        raise InputValidationError(
            f"CIFAR batch: {imgs.shape[0]} images but {len(filenames)} filenames."
        )
    names = (
        filenames
        if filenames is not None
        else [f"{i:05d}.png" for i in range(len(labs))]
    )
    obj = {
        b"batch_label": batch_label.encode(),
        b"labels": [int(x) for x in labs],
        b"data": np.ascontiguousarray(imgs.transpose(0, 3, 1, 2).reshape(-1, 3072)),
        b"filenames": [n.encode() for n in names],
    }
    return pickle.dumps(obj, protocol=_PROTOCOL)


def write_cifar_batch(
    path: str | os.PathLike[str],
    images: ArrayLike,
    labels: ArrayLike,
    *,
    filenames: Sequence[str] | None = None,
    batch_label: str = "",
) -> None:
    """Write a CIFAR python batch (HWC uint8 in → channel-planar rows), atomically.

    Inverse of :func:`read_cifar_batch`; same inputs give byte-identical files.
    """
    atomic_write_bytes(path, _batch_bytes(images, labels, filenames, batch_label))


def read_cifar_meta(path: str | os.PathLike[str]) -> list[str]:
    """Class names from ``batches.meta`` (``b"label_names"``)."""
    p = Path(path)
    d = _unpickle(p)
    names = d.get(b"label_names")
    if not isinstance(names, list) or not all(
        isinstance(n, (bytes, str)) for n in names
    ):
        raise DataIntegrityError(
            f"CIFAR meta {p} lacks b'label_names' (a list of class names)."
        )
    return [_text(n) for n in names]


def _meta_bytes(label_names: Sequence[str], num_cases_per_batch: int) -> bytes:
    obj = {
        b"label_names": [n.encode() for n in label_names],
        b"num_cases_per_batch": int(num_cases_per_batch),
        b"num_vis": 3072,
    }
    return pickle.dumps(obj, protocol=_PROTOCOL)


def write_cifar_meta(
    path: str | os.PathLike[str],
    label_names: Sequence[str] = CIFAR10_CLASSES,
    *,
    num_cases_per_batch: int = 10000,
) -> None:
    """Write ``batches.meta``."""
    atomic_write_bytes(path, _meta_bytes(label_names, num_cases_per_batch))


def write_cifar10_archive(
    path: str | os.PathLike[str],
    train: tuple[ArrayLike, ArrayLike],
    test: tuple[ArrayLike, ArrayLike],
    *,
    label_names: Sequence[str] = CIFAR10_CLASSES,
    n_train_batches: int = 5,
) -> None:
    """Write a ``cifar-10-python.tar.gz``-layout archive (deterministic bytes).

    ``train`` is split into ``n_train_batches`` consecutive batches in order.
    """
    tr_x, tr_y = np.asarray(train[0]), np.asarray(train[1])
    parts = np.array_split(np.arange(len(tr_y)), n_train_batches)
    members = [
        (
            f"data_batch_{i + 1}",
            _batch_bytes(tr_x[ix], tr_y[ix], None, f"training batch {i + 1}"),
        )
        for i, ix in enumerate(parts)
    ]
    members.append((TEST_BATCH, _batch_bytes(test[0], test[1], None, "testing batch")))
    members.append((META, _meta_bytes(label_names, len(parts[0]) if parts else 0)))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(f"{BATCH_DIR}/{name}")
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tf.addfile(info, io.BytesIO(data))
    # gzip with mtime=0 so the same arrays always give the same archive bytes
    atomic_write_bytes(path, gzip.compress(buf.getvalue(), mtime=0))


class CIFAR10(DatasetSource):
    """CIFAR-10 (Krizhevsky 2009): 50,000 train + 10,000 test 32×32 RGB images.

    ``load("train")`` concatenates batches 1..5 in order, so row i is global CIFAR
    index i; ``load("test")`` is ``test_batch`` (global index 50000 + j).
    """

    name = "cifar10"
    description = "CIFAR-10, python pickle archive (50k train / 10k test, 32×32 RGB)"
    homepage = "https://www.cs.toronto.edu/~kriz/cifar.html"
    license = "no explicit license; see the homepage"
    citation = (
        "Krizhevsky, A. (2009). Learning Multiple Layers of Features from Tiny Images."
    )
    splits = ("train", "test")

    # sha256 published with keras.datasets.cifar10 (md5 c58f30108f718f92721af3b95e74349a
    # in torchvision); 170,498,071 bytes.
    ARCHIVE = RemoteFile(
        "cifar-10-python.tar.gz",
        "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
        "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
        size=170_498_071,
    )

    @property
    def class_names(self) -> tuple[str, ...]:
        return CIFAR10_CLASSES

    def _remote_files(self) -> list[RemoteFile]:
        return [self.ARCHIVE]

    def _batch_problems(self, *, hash_files: bool = True) -> dict[str, str]:
        bad = self._extracted_problems(BATCH_DIR, hash_files=hash_files)
        if BATCH_DIR in bad:
            return bad
        for name in (*TRAIN_BATCHES, TEST_BATCH, META):
            if not (self.root / BATCH_DIR / name).is_file():
                bad[f"{BATCH_DIR}/{name}"] = "missing"
        return bad

    def is_ready(self) -> bool:
        return not self._batch_problems()

    def _prepare(self, progress: Any) -> None:
        if self._batch_problems():
            self._require_files()
            self._extract(self.ARCHIVE.filename, BATCH_DIR)

    def status(self) -> dict[str, str]:
        out = super().status()
        bad = self._batch_problems()
        out[BATCH_DIR] = (
            "ok" if not bad else "missing" if BATCH_DIR in bad else "corrupt"
        )
        return out

    def load(self, split: str = "test") -> LabeledSet:
        self._check_split(split)
        bad = self._batch_problems()
        if bad:
            raise self._integrity_error(bad)
        names = TRAIN_BATCHES if split == "train" else (TEST_BATCH,)
        try:
            parts = [read_cifar_batch(self.root / BATCH_DIR / n) for n in names]
            meta = read_cifar_meta(self.root / BATCH_DIR / META)
        except DataIntegrityError as err:
            raise DataIntegrityError(
                f"{err} Delete {self.root / BATCH_DIR} and run `{self.fetch_hint()}`."
            ) from err
        images = np.concatenate([p[0] for p in parts])
        labels = np.concatenate([p[1] for p in parts])
        classes = tuple(meta) or CIFAR10_CLASSES
        return LabeledSet(
            f"{self.name}-{split}", labels, class_names=classes, images=images
        )
