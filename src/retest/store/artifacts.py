"""Files of a project: atomic writes with sha256, the manifest, and pixel arrays.

* :func:`write_bytes` / :func:`write_npy` / :func:`write_json` /
  :func:`write_parquet` write to a temporary file in the target directory, fsync, then
  ``os.replace`` — a reader never sees half a file — and return the sha256.
* :func:`record_artifact` adds the manifest entry (path, sha256, stage, params,
  package version) to the store; :func:`save_npy` / :func:`save_json` do both.
* :class:`PixelArray` is an append-only, memory-mapped uint8 array of fixed-shape
  images (``arrays/<name>.u8`` + header ``arrays/<name>.json``) that ingest appends
  to. The header's ``count`` is the commit point: pixels are fsynced before it is
  advanced, bytes past it (from a writer killed mid-append) are ignored by readers and
  truncated by the next append. Callers write database rows only after
  :meth:`PixelArray.append` has returned, so a row never points at missing pixels; a
  crash between the two leaves unreferenced ("orphan") rows. :meth:`PixelArray.release`
  gives orphans back: at the end of the array the count shrinks (the next append
  reuses the rows), elsewhere the rows are listed as ``free`` in the header and
  their disk blocks are punched out. Writers hold :func:`writers_lock` shared for
  their whole run; reclaiming orphans needs it exclusive, since an orphan is only
  an orphan when no writer is between an append and its rows' insert.
* :func:`write_image_file` stores an image file content-addressed as
  ``images/<sha256>``.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import io
import json
import mmap
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._atomic import atomic_write_bytes
from retest._version import __version__
from retest.errors import DataIntegrityError, InputValidationError, StoreError
from retest.store.base import Store
from retest.store.rows import ArtifactRecord, file_content_id, utc_now

__all__ = [
    "PixelArray",
    "dumps_json",
    "read_npy",
    "record_artifact",
    "save_json",
    "save_npy",
    "sha256_file",
    "verify_file",
    "write_bytes",
    "write_image_file",
    "write_json",
    "write_npy",
    "write_parquet",
    "writers_lock",
]


def sha256_file(path: str | Path, *, chunk: int = 1 << 20) -> str:
    """sha256 hex digest of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def verify_file(path: str | Path, sha256: str) -> None:
    """Raise :class:`~retest.errors.DataIntegrityError` unless ``path`` has ``sha256``."""
    p = Path(path)
    if not p.is_file():
        raise DataIntegrityError(f"{p} is missing; re-run the stage that writes it.")
    got = sha256_file(p)
    if got != sha256:
        raise DataIntegrityError(
            f"{p}: sha256 mismatch (expected {sha256[:12]}…, found {got[:12]}…). "
            "The file changed after it was written; re-run the stage that writes it."
        )


def write_bytes(path: str | Path, data: bytes | memoryview) -> str:
    """Write ``data`` to ``path`` atomically (temp file + fsync + rename); returns sha256."""
    atomic_write_bytes(path, data)
    return hashlib.sha256(data).hexdigest()


def write_npy(path: str | Path, array: ArrayLike) -> str:
    """Save one array as ``.npy`` (no pickles) atomically; returns sha256."""
    buf = io.BytesIO()
    np.save(buf, np.asarray(array), allow_pickle=False)
    return write_bytes(path, buf.getbuffer())


def dumps_json(obj: Any) -> str:
    """Deterministic JSON: sorted keys, 2-space indent, UTF-8, trailing newline.

    A string holding a file name that is not valid UTF-8 (Python keeps its bytes as
    surrogate escapes) cannot be UTF-8 text: then the document is written with
    ASCII escapes, which read back to the same string (and the same file name).
    """
    text = json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=True) + "\n"
    return text


def write_json(path: str | Path, obj: Any) -> str:
    """Save ``obj`` as deterministic JSON (:func:`dumps_json`) atomically; returns sha256."""
    return write_bytes(path, dumps_json(obj).encode())


def write_parquet(path: str | Path, table: Any) -> str:
    """Save a ``pyarrow.Table`` (or pandas DataFrame) as Parquet atomically.

    Written uncompressed-metadata-stable (zstd, no statistics timestamps) so the same
    table gives the same bytes; returns sha256.
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as err:  # pragma: no cover - pyarrow is a dev dependency
        raise StoreError(
            "writing Parquet needs pyarrow: pip install 'retest[parquet]'."
        ) from err
    if not isinstance(table, pa.Table):
        table = pa.Table.from_pandas(table, preserve_index=False)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", write_statistics=False)
    return write_bytes(path, sink.getvalue().to_pybytes())


def read_npy(path: str | Path, *, mmap: bool = True) -> NDArray[Any]:
    """Load a ``.npy`` file, memory-mapped read-only by default."""
    p = Path(path)
    if not p.is_file():
        raise DataIntegrityError(f"{p} is missing; re-run the stage that writes it.")
    try:
        arr: NDArray[Any] = np.load(
            p, mmap_mode="r" if mmap else None, allow_pickle=False
        )
    except ValueError as err:
        raise DataIntegrityError(f"{p} is not a readable .npy file: {err}.") from err
    return arr


def record_artifact(
    store: Store,
    root: str | Path,
    path: str | Path,
    *,
    name: str | None = None,
    stage: str = "",
    params: Mapping[str, Any] | None = None,
    sha256: str | None = None,
) -> ArtifactRecord:
    """Add (or replace) the manifest entry of a file under the project ``root``.

    ``name`` defaults to the path relative to ``root``; ``sha256`` is computed when
    not given.
    """

    rel = Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    rec = ArtifactRecord(
        name=name or rel,
        path=rel,
        sha256=sha256 or sha256_file(Path(root) / rel),
        stage=stage,
        params=dict(params or {}),
        version=__version__,
        created=utc_now(),
    )
    store.artifacts.put(rec)
    return rec


def save_npy(
    store: Store,
    root: str | Path,
    rel_path: str,
    array: ArrayLike,
    *,
    stage: str,
    params: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> ArtifactRecord:
    """:func:`write_npy` under ``root`` plus its manifest entry."""
    sha = write_npy(Path(root) / rel_path, array)
    return record_artifact(
        store,
        root,
        Path(root) / rel_path,
        name=name,
        stage=stage,
        params=params,
        sha256=sha,
    )


def save_json(
    store: Store,
    root: str | Path,
    rel_path: str,
    obj: Any,
    *,
    stage: str,
    params: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> ArtifactRecord:
    """:func:`write_json` under ``root`` plus its manifest entry."""
    sha = write_json(Path(root) / rel_path, obj)
    return record_artifact(
        store,
        root,
        Path(root) / rel_path,
        name=name,
        stage=stage,
        params=params,
        sha256=sha,
    )


def write_image_file(images_dir: str | Path, data: bytes) -> tuple[str, Path]:
    """Store image bytes content-addressed as ``images_dir/<sha256>``; idempotent.

    Returns ``(sha256, path)``; the sha256 is also the candidate id
    (:func:`~retest.store.base.file_content_id`).
    """
    sha = file_content_id(data)
    path = Path(images_dir) / sha
    if not path.is_file():
        write_bytes(path, data)
    return sha, path


_DIRECT_ALIGN = 512
_BOUNCE_BYTES = 8 << 20
_bounce = threading.local()


def _write_direct(path: Path, data: memoryview, offset: int) -> bool:
    """Write ``data`` at ``offset`` with ``O_DIRECT``; False if that is not possible.

    Bulk appends are the ingest's largest kernel cost when they go through the
    page cache (allocating and filling ~1.5 GB of cache pages per million 32×32
    images: 5–9 µs of CPU per image on the 2-core VM, against <0.1 µs direct).
    O_DIRECT needs offset, length and buffer aligned to the logical block size,
    so the bytes go through a reused, page-aligned bounce buffer (one memcpy);
    it applies when rows are a multiple of 512 bytes (3,072 for 32×32×3).
    Durability is unchanged: the caller still fsyncs. Anything unsupported
    (no O_DIRECT, tmpfs, odd sizes, a short write) returns False and the caller
    writes through the page cache from ``offset`` again.
    """
    flag = getattr(os, "O_DIRECT", 0)
    n = len(data)
    if not flag or n == 0 or offset % _DIRECT_ALIGN or n % _DIRECT_ALIGN:
        return False
    buf: mmap.mmap | None = getattr(_bounce, "buf", None)
    if buf is None:
        buf = _bounce.buf = mmap.mmap(-1, _BOUNCE_BYTES)  # page-aligned
    view = memoryview(buf)
    try:
        fd = os.open(path, os.O_WRONLY | flag)
    except OSError:
        return False
    try:
        for a in range(0, n, _BOUNCE_BYTES):
            chunk = min(_BOUNCE_BYTES, n - a)
            view[:chunk] = data[a : a + chunk]
            if os.pwrite(fd, view[:chunk], offset + a) != chunk:
                return False
    except OSError as err:
        if err.errno != errno.EINVAL:
            raise
        return False
    finally:
        view.release()
        os.close(fd)
    return True


WRITERS_LOCK = ".writers.lock"


@contextmanager
def writers_lock(
    arrays_dir: str | Path, *, exclusive: bool = False, wait: bool = True
) -> Iterator[bool]:
    """Project-wide lock of the pixel arrays' writers; yields whether it was taken.

    Ingest and reference registration hold it shared while they run (several may
    run at once); reclaiming orphan rows (or files) holds it exclusive, so no
    writer has appended pixels whose rows are still on their way into the store.
    With ``wait=False`` it yields False at once when the lock is busy.
    """
    d = Path(arrays_dir)
    d.mkdir(parents=True, exist_ok=True)
    with open(d / WRITERS_LOCK, "a+b") as fh:
        op = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(fh, op if wait else op | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _punch_hole(path: Path, offset: int, length: int) -> bool:
    """Free the disk blocks of a byte range (reads then return zeros); False when
    the filesystem cannot (the rows stay listed as free either way)."""
    if length <= 0:
        return True
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fallocate = libc.fallocate
    except (OSError, AttributeError):  # pragma: no cover - non-Linux
        return False
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fd = os.open(path, os.O_WRONLY)
    try:
        # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
        if fallocate(fd, 0x02 | 0x01, offset, length) != 0:
            return False
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def _merge(ranges: list[list[int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _runs(rows: ArrayLike) -> list[list[int]]:
    """Sorted distinct rows as ``[start, stop)`` runs."""
    r = np.unique(np.asarray(rows, dtype=np.int64))
    if r.size == 0:
        return []
    cut = np.flatnonzero(np.diff(r) != 1) + 1
    return [[int(g[0]), int(g[-1]) + 1] for g in np.split(r, cut)]


def _header_problem(header: Any) -> str | None:
    """Why ``header`` is not what :class:`PixelArray` writes, or None."""
    if not isinstance(header, dict):
        return f"a JSON {type(header).__name__}, not an object"
    count, shape = header.get("count"), header.get("shape")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        return f"'count' is {count!r}, not a row count"
    if (
        not isinstance(shape, list)
        or not shape
        or not all(
            isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape
        )
    ):
        return f"'shape' is {shape!r}, not a list of positive sizes"
    return None


class PixelArray:
    """Append-only uint8 array of images of one shape, memory-mapped for reading.

    Files: ``<root>/<name>.u8`` (raw C-order rows) and ``<root>/<name>.json``
    (``{"count": n, "dtype": "uint8", "shape": [h, w, c]}``, the commit point,
    plus ``"free": [[start, stop], …]`` once orphan rows were released).
    Appends from several processes are serialised by an ``flock`` on
    ``<root>/<name>.lock``.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     px = PixelArray.create(d, "cifar", shape=(32, 32, 3))
    ...     rows = px.append(np.zeros((4, 32, 32, 3), np.uint8))
    ...     (rows, len(px), px.read([1, 3]).shape)
    (range(0, 4), 4, (2, 32, 32, 3))
    """

    def __init__(self, root: str | Path, name: str) -> None:
        self.root = Path(root)
        self.name = name
        header = self._read_header()
        self.shape: tuple[int, ...] = tuple(int(x) for x in header["shape"])
        self.row_bytes = int(np.prod(self.shape, dtype=np.int64))

    # -- files
    @property
    def data_path(self) -> Path:
        return self.root / f"{self.name}.u8"

    @property
    def header_path(self) -> Path:
        return self.root / f"{self.name}.json"

    def _read_header(self) -> dict[str, Any]:
        try:
            header: dict[str, Any] = json.loads(self.header_path.read_text())
        except FileNotFoundError:
            raise StoreError(
                f"pixel array {self.name!r} does not exist under {self.root} "
                f"(no {self.header_path.name}): it was deleted or never written. "
                "Restore the project's arrays/ folder from a backup; `retest check` "
                "lists the items whose pixels it held."
            ) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise DataIntegrityError(
                f"{self.header_path} is not valid JSON: {err}."
            ) from err
        why = _header_problem(header)
        if why is not None:
            raise DataIntegrityError(
                f"{self.header_path} is not a pixel array header ({why}); restore "
                "it from a backup."
            )
        return header

    @classmethod
    def create(
        cls, root: str | Path, name: str, *, shape: tuple[int, ...]
    ) -> PixelArray:
        """Create the array, or open it if it exists with the same ``shape``."""
        root = Path(root)
        shape = tuple(int(s) for s in shape)
        header = root / f"{name}.json"
        if header.is_file():
            px = cls(root, name)
            if px.shape != shape:
                raise InputValidationError(
                    f"pixel array {name!r} holds images of shape {px.shape}, "
                    f"not {shape}. Use another array name for this shape."
                )
            return px
        root.mkdir(parents=True, exist_ok=True)
        with cls._locked(root, name):
            if not header.is_file():
                (root / f"{name}.u8").touch()
                write_json(header, {"count": 0, "dtype": "uint8", "shape": list(shape)})
        return cls(root, name)

    @staticmethod
    @contextmanager
    def _locked(root: Path, name: str) -> Iterator[None]:
        with open(root / f"{name}.lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def __len__(self) -> int:
        return int(self._read_header()["count"])

    def free_ranges(self) -> list[tuple[int, int]]:
        """Released rows below the count, as ``(start, stop)`` ranges."""
        return [(int(a), int(b)) for a, b in self._read_header().get("free", [])]

    def _write_header(self, count: int, free: list[list[int]]) -> None:
        header: dict[str, Any] = {
            "count": count,
            "dtype": "uint8",
            "shape": list(self.shape),
        }
        if free:
            header["free"] = free
        write_json(self.header_path, header)

    def release(self, rows: ArrayLike) -> int:
        """Give back rows nothing points at; returns how many were not free yet.

        Rows at the end of the array are dropped (the count shrinks, so the next
        append writes over them); other rows are listed as free and their bytes
        punched out of the file. The caller guarantees no store row references
        them and no writer is between an append and its insert (see
        :func:`writers_lock`); rows past the count are ignored.
        """
        with self._locked(self.root, self.name):
            header = self._read_header()
            count = int(header["count"])
            old = _merge([list(r) for r in header.get("free", [])])
            new = [[a, min(b, count)] for a, b in _runs(rows) if a < count]
            free = _merge(old + new)
            n_old = sum(b - a for a, b in old)
            gained = sum(b - a for a, b in free) - n_old
            if gained == 0:
                return 0
            if free and free[-1][1] == count:
                count = free.pop()[0]
            self._write_header(count, free)
            with open(self.data_path, "r+b") as f:
                if f.seek(0, os.SEEK_END) > count * self.row_bytes:
                    f.truncate(count * self.row_bytes)
                    os.fsync(f.fileno())
            for a, b in free:
                if [a, b] not in old:
                    _punch_hole(
                        self.data_path, a * self.row_bytes, (b - a) * self.row_bytes
                    )
            return gained

    def append(self, images: ArrayLike) -> range:
        """Append ``images`` of shape ``(n, *shape)`` durably; returns their rows."""
        arr = np.ascontiguousarray(images, dtype=np.uint8)
        if arr.shape[1:] != self.shape:
            raise InputValidationError(
                f"pixel array {self.name!r} holds images of shape {self.shape}. "
                f"Got a batch of shape {arr.shape}."
            )
        data = arr.reshape(-1).data
        with self._locked(self.root, self.name):
            header = self._read_header()
            count = int(header["count"])
            start = count * self.row_bytes
            with open(self.data_path, "r+b") as f:
                # drop bytes a writer killed mid-append left past the commit point
                f.truncate(start)
                if not _write_direct(self.data_path, data, start):
                    f.seek(start)
                    f.write(data)
                    f.flush()
                os.fsync(f.fileno())
            n = arr.shape[0]
            self._write_header(count + n, [list(r) for r in header.get("free", [])])
        return range(count, count + n)

    def array(self) -> NDArray[np.uint8]:
        """All committed rows, memory-mapped read-only, shape ``(len, *shape)``."""
        n = len(self)
        if n == 0:
            return np.empty((0, *self.shape), np.uint8)
        size = self.data_path.stat().st_size
        if size < n * self.row_bytes:
            raise DataIntegrityError(
                f"{self.data_path} holds {size} bytes but its header commits {n} rows "
                f"of {self.row_bytes} bytes. The file was truncated; re-ingest."
            )
        return np.memmap(self.data_path, np.uint8, "r", shape=(n, *self.shape))

    def read(self, rows: ArrayLike) -> NDArray[np.uint8]:
        """A copy of the given rows (any order, repeats allowed)."""
        idx = np.asarray(rows, dtype=np.int64)
        n = len(self)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise InputValidationError(
                f"rows of pixel array {self.name!r} must lie in [0, {n}). "
                f"Got {int(idx.min())}..{int(idx.max())}."
            )
        return np.array(self.array()[idx])
