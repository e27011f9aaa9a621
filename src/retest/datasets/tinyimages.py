"""TinyImages binary files: memory-mapped images and a keyword index.

See docs/algorithms.md#tinyimages.

``tiny_images.bin`` holds 3072-byte records, MATLAB column-major H×W×C: byte
``r + 32*c + 1024*ch`` of record ``i`` (0-based) at offset ``i*3072``.
``tiny_metadata.bin`` holds 768-byte records with the same index; the keyword is
bytes ``[0, 80)`` and the filename bytes ``[80, 185)``, ASCII, space padded.

Both files are indexed from 0 (the CIFAR-10.2 blog's ``i+1`` off-by-one is a bug,
docs/algorithms.md#tinyimages) and decoded with the canonical conversion, never with a
rotation.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._progress import ProgressCallback, report
from retest.errors import DataIntegrityError, InputValidationError

__all__ = [
    "IMAGE_RECORD_BYTES",
    "METADATA_FIELDS",
    "METADATA_RECORD_BYTES",
    "KeywordIndex",
    "TinyImages",
    "build_keyword_index",
    "decode_into",
    "decode_records",
    "encode_images",
    "write_tinyimages",
]

IMAGE_RECORD_BYTES = 3072
METADATA_RECORD_BYTES = 768
KEYWORD_BYTES = 80
IMAGE_FILE = "tiny_images.bin"
METADATA_FILE = "tiny_metadata.bin"

#: ``name -> (start, end)`` byte ranges of a metadata record
#: (docs/algorithms.md#tinyimages).
METADATA_FIELDS: dict[str, tuple[int, int]] = {
    "keyword": (0, 80),
    "filename": (80, 185),
    "width": (185, 187),
    "height": (187, 189),
    "color": (189, 190),
    "date": (190, 222),
    "search_engine": (222, 232),
    "thumbnail_url": (232, 432),
    "source_url": (432, 760),
    "page": (760, 764),
    "ind_page": (764, 768),
}

# Records decoded per step of decode_into (cache-sized).
_DECODE_CHUNK = 512
# Chunk of metadata records read per step of the index scan (~100 MB).
_SCAN_CHUNK = 131_072


def decode_records(records: ArrayLike) -> NDArray[np.uint8]:
    """Turn raw 3072-byte records into HWC RGB images.

    Parameters
    ----------
    records : array-like of shape (n, 3072) or (3072,), uint8
        Raw TinyImages records.

    Returns
    -------
    ndarray of shape (n, 32, 32, 3) or (32, 32, 3)
        The canonical decode ``rec.reshape(32, 32, 3, order='F')`` per record.

    Examples
    --------
    >>> rec = np.arange(3072, dtype=np.uint32).astype(np.uint8)
    >>> bool((decode_records(rec) == rec.reshape(32, 32, 3, order="F")).all())
    True
    """
    arr = np.asarray(records, dtype=np.uint8)
    if arr.ndim == 1:
        one: NDArray[np.uint8] = decode_records(arr[None])[0]
        return one
    if arr.ndim != 2 or arr.shape[1] != IMAGE_RECORD_BYTES:
        raise InputValidationError(
            f"TinyImages records must have shape (n, 3072). Got {arr.shape}."
        )
    out = np.empty((arr.shape[0], 32, 32, 3), dtype=np.uint8)
    decode_into(arr, out)
    return out


def decode_into(records: NDArray[np.uint8], out: NDArray[np.uint8]) -> None:
    """Decode (n, 3072) records into the preallocated (n, 32, 32, 3) ``out``.

    Byte ``r + 32c + 1024ch`` is C-order index ``[ch, c, r]``; one strided copy per
    channel is ~3x faster than a single 4-d transpose copy (whose innermost axis
    would step 1024 bytes per element). The copies run over chunks of 512
    records (1.5 MB), so the three passes over a chunk hit the CPU cache.
    """
    planes = records.reshape(-1, 3, 32, 32)
    for a in range(0, planes.shape[0], _DECODE_CHUNK):
        src, dst = planes[a : a + _DECODE_CHUNK], out[a : a + _DECODE_CHUNK]
        for ch in range(3):
            dst[..., ch] = src[:, ch].transpose(0, 2, 1)


def encode_images(images: ArrayLike) -> NDArray[np.uint8]:
    """Inverse of :func:`decode_records`: (n, 32, 32, 3) HWC → (n, 3072) records."""
    arr = np.asarray(images)
    if arr.dtype != np.uint8 or arr.ndim != 4 or arr.shape[1:] != (32, 32, 3):
        raise InputValidationError(
            f"TinyImages images must be uint8 (n, 32, 32, 3). Got {arr.dtype} {arr.shape}."
        )
    return np.ascontiguousarray(arr.transpose(0, 3, 2, 1)).reshape(-1, 3072)


def _field_text(raw: bytes, name: str) -> str:
    lo, hi = METADATA_FIELDS[name]
    return raw[lo:hi].decode("utf-8", errors="replace").strip()


@dataclass(frozen=True, slots=True)
class KeywordIndex:
    """Keyword (lower case) → ``[start, end)`` record ranges.

    Records are sorted by keyword in the real files, so each keyword has one
    contiguous range; an unsorted file gives several ranges per keyword, which
    :meth:`indices` concatenates in file order.

    Attributes
    ----------
    ranges : dict of str to list of (int, int)
        Half-open record ranges per lower-cased keyword.
    n_records : int
        Records in the scanned metadata file.
    sorted_by_keyword : bool
        Whether every keyword occupies one contiguous range.
    """

    ranges: Mapping[str, Sequence[tuple[int, int]]]
    n_records: int
    sorted_by_keyword: bool = True
    counts: Mapping[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        counts = {k: sum(e - s for s, e in v) for k, v in self.ranges.items()}
        object.__setattr__(self, "counts", counts)

    def __contains__(self, keyword: object) -> bool:
        return isinstance(keyword, str) and keyword.strip().lower() in self.ranges

    def __len__(self) -> int:
        return len(self.ranges)

    def keywords(self) -> list[str]:
        """All keywords, sorted."""
        return sorted(self.ranges)

    def indices(self, keyword: str) -> NDArray[np.int64]:
        """All record indices whose keyword equals ``keyword`` case-insensitively."""
        rs = self.ranges.get(keyword.strip().lower(), ())
        if not rs:
            return np.empty(0, dtype=np.int64)
        return np.concatenate([np.arange(s, e, dtype=np.int64) for s, e in rs])

    def to_json(self) -> dict[str, object]:
        """A JSON-serialisable form (see :meth:`from_json`)."""
        return {
            "n_records": self.n_records,
            "sorted_by_keyword": self.sorted_by_keyword,
            "ranges": {k: [list(r) for r in v] for k, v in sorted(self.ranges.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> KeywordIndex:
        raw = data["ranges"]
        if not isinstance(raw, Mapping):
            raise InputValidationError("keyword index JSON lacks a 'ranges' mapping.")
        ranges = {str(k): [(int(s), int(e)) for s, e in v] for k, v in raw.items()}
        n = data["n_records"]
        assert isinstance(n, int)
        return cls(ranges, n, bool(data.get("sorted_by_keyword", True)))


def _check_size(path: Path, record: int) -> int:
    if not path.is_file():
        raise DataIntegrityError(
            f"TinyImages file {path} is missing. Pass the folder holding "
            f"{IMAGE_FILE} and {METADATA_FILE}."
        )
    size = path.stat().st_size
    if size % record:
        raise DataIntegrityError(
            f"TinyImages file {path} has {size} bytes, which is not a multiple of the "
            f"{record}-byte record size ({size % record} trailing bytes): the file is "
            "truncated or not in TinyImages format. Re-copy it."
        )
    return size // record


def _lower_ascii(block: NDArray[np.uint8]) -> NDArray[np.uint8]:
    upper = (block >= 65) & (block <= 90)
    return block + (upper.astype(np.uint8) << 5)


def _scan_runs(
    path: Path, n: int, progress: ProgressCallback | None
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(start, keyword_bytes)`` at every record where the keyword changes."""
    prev: NDArray[np.uint8] | None = None
    with path.open("rb") as fh:
        start = 0
        while start < n:
            count = min(_SCAN_CHUNK, n - start)
            buf = fh.read(count * METADATA_RECORD_BYTES)
            recs = np.frombuffer(buf, dtype=np.uint8).reshape(count, -1)
            kw = _lower_ascii(recs[:, :KEYWORD_BYTES]).view(np.uint64)
            changed = np.empty(count, dtype=bool)
            changed[1:] = (kw[1:] != kw[:-1]).any(axis=1)
            changed[0] = prev is None or bool((kw[0] != prev).any())
            for j in np.flatnonzero(changed):
                yield start + int(j), recs[j, :KEYWORD_BYTES].tobytes()
            prev = kw[-1].copy()
            start += count
            report(progress, "scan metadata", start, n)


def build_keyword_index(
    metadata_path: str | os.PathLike[str],
    *,
    progress: ProgressCallback | None = None,
) -> KeywordIndex:
    """Scan ``tiny_metadata.bin`` once into a keyword → record-range index.

    One sequential pass in ~100 MB chunks; keyword changes are found with
    vectorised comparisons of the lower-cased 80-byte keyword fields, so only the
    first record of each run is decoded in Python.

    Raises
    ------
    DataIntegrityError
        If the file is missing or its size is not a multiple of 768.
    """
    path = Path(metadata_path)
    n = _check_size(path, METADATA_RECORD_BYTES)
    ranges: dict[str, list[tuple[int, int]]] = {}
    runs = list(_scan_runs(path, n, progress))
    ok = True
    for (s, raw), nxt in zip(runs, [*runs[1:], (n, b"")], strict=True):
        key = raw.decode("utf-8", errors="replace").strip().lower()
        lst = ranges.setdefault(key, [])
        if lst and lst[-1][1] == s:
            lst[-1] = (lst[-1][0], nxt[0])
        else:
            ok = ok and not lst
            lst.append((s, nxt[0]))
    return KeywordIndex(ranges, n, ok)


class TinyImages:
    """Read access to a TinyImages pair of files.

    Parameters
    ----------
    root : path
        Folder with ``tiny_images.bin`` and ``tiny_metadata.bin``, or the path of
        ``tiny_images.bin`` itself (the metadata file must sit next to it).

    Raises
    ------
    DataIntegrityError
        If a file is missing, a size is not a multiple of its record size, or the
        two files hold different numbers of records.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        p = Path(root)
        folder = p if p.is_dir() else p.parent
        self.image_path = p if p.is_file() else folder / IMAGE_FILE
        self.metadata_path = folder / METADATA_FILE
        n_img = _check_size(self.image_path, IMAGE_RECORD_BYTES)
        n_meta = _check_size(self.metadata_path, METADATA_RECORD_BYTES)
        if n_img != n_meta:
            raise DataIntegrityError(
                f"TinyImages files disagree: {self.image_path} holds {n_img} records "
                f"but {self.metadata_path} holds {n_meta}. Use a matching pair."
            )
        self.n = n_img
        self._images: NDArray[np.uint8] | None = None

    def __len__(self) -> int:
        return self.n

    @property
    def records(self) -> NDArray[np.uint8]:
        """The image file as a read-only (n, 3072) memory map."""
        if self._images is None:
            self._images = np.memmap(
                self.image_path, dtype=np.uint8, mode="r", shape=(self.n, 3072)
            )
        return self._images

    def _check_index(self, idx: NDArray[np.int64]) -> None:
        if idx.size and (idx.min() < 0 or idx.max() >= self.n):
            raise InputValidationError(
                f"TinyImages indices must lie in [0, {self.n}). "
                f"Got {int(idx.min())}..{int(idx.max())}."
            )

    def images(self, indices: ArrayLike) -> NDArray[np.uint8]:
        """Decoded (n, 32, 32, 3) images of the given 0-based record indices."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        self._check_index(idx)
        return decode_records(self.records[idx])

    def image_range(self, start: int, end: int) -> NDArray[np.uint8]:
        """Decoded images of records ``[start, end)`` (one contiguous read)."""
        self._check_index(np.array([start, max(start, end - 1)], dtype=np.int64))
        return decode_records(self.records[start:end])

    def image(self, index: int) -> NDArray[np.uint8]:
        """One decoded (32, 32, 3) image."""
        img: NDArray[np.uint8] = self.images([index])[0]
        return img

    def metadata(self, index: int) -> dict[str, str]:
        """All metadata fields of record ``index`` as stripped text.

        ``filename`` is the text before the first space (docs/algorithms.md#tinyimages).
        """
        self._check_index(np.array([index], dtype=np.int64))
        with self.metadata_path.open("rb") as fh:
            fh.seek(index * METADATA_RECORD_BYTES)
            raw = fh.read(METADATA_RECORD_BYTES)
        out = {name: _field_text(raw, name) for name in METADATA_FIELDS}
        out["filename"] = out["filename"].split(" ")[0]
        return out

    def keyword(self, index: int) -> str:
        """The keyword of record ``index`` (as stored, stripped)."""
        return self.metadata(index)["keyword"]

    def keyword_index(
        self, *, progress: ProgressCallback | None = None
    ) -> KeywordIndex:
        """Build the keyword index by scanning the metadata file once."""
        return build_keyword_index(self.metadata_path, progress=progress)


def _pad(text: str, width: int, what: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > width:
        raise InputValidationError(
            f"TinyImages {what} {text!r} is longer than its {width}-byte field."
        )
    return raw.ljust(width, b" ")


def _metadata_record(keyword: str, filename: str, extra: Mapping[str, str]) -> bytes:
    parts = []
    for name, (lo, hi) in METADATA_FIELDS.items():
        value = {"keyword": keyword, "filename": filename}.get(
            name, extra.get(name, "")
        )
        parts.append(_pad(value, hi - lo, name))
    return b"".join(parts)


def write_tinyimages(
    folder: str | os.PathLike[str],
    images: ArrayLike,
    keywords: Sequence[str],
    *,
    filenames: Sequence[str] | None = None,
    extra: Iterable[Mapping[str, str]] | None = None,
) -> tuple[Path, Path]:
    """Write a TinyImages pair in the real layout (for tests and benchmarks).

    Records are written in the given order; real files are sorted by keyword.

    Parameters
    ----------
    folder : path
        Output folder; ``tiny_images.bin`` and ``tiny_metadata.bin`` go there.
    images : ndarray of shape (n, 32, 32, 3), uint8
        HWC RGB images.
    keywords : sequence of str, length n
    filenames : sequence of str, optional
        Defaults to ``<keyword>_<i:06d>.png``.
    extra : iterable of mapping, optional
        Other metadata fields per record (``METADATA_FIELDS`` names).

    Returns
    -------
    (image_path, metadata_path)
    """
    recs = encode_images(images)
    n = recs.shape[0]
    if len(keywords) != n:
        raise InputValidationError(f"{n} images but {len(keywords)} keywords.")
    names = filenames or [f"{k}_{i:06d}.png" for i, k in enumerate(keywords)]
    extras = list(extra) if extra is not None else [{}] * n
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    img_path, meta_path = out / IMAGE_FILE, out / METADATA_FILE
    meta = b"".join(
        _metadata_record(k, f, e)
        for k, f, e in zip(keywords, names, extras, strict=True)
    )
    for path, data in ((img_path, recs.tobytes()), (meta_path, meta)):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return img_path, meta_path


def load_keyword_index(path: str | os.PathLike[str]) -> KeywordIndex:
    """Read a keyword index written as JSON by :meth:`KeywordIndex.to_json`."""
    return KeywordIndex.from_json(json.loads(Path(path).read_text()))
