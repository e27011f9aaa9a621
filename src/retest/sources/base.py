"""The candidate-source interface: items, batches, the abstract source, the registry.

Concrete sources live in :mod:`retest.sources.arrays` and
:mod:`retest.sources.files`; :mod:`retest.sources` gathers
them (importing it registers every built-in kind).
"""

from __future__ import annotations

import inspect
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from retest._validation import decode_utf8
from retest.errors import ConfigError, DataIntegrityError, InputValidationError
from retest.registry import Registry

__all__ = [
    "CANDIDATE_SOURCES",
    "IMAGE_SUFFIXES",
    "CandidateSource",
    "ColumnItems",
    "SkippedItem",
    "SourceBatch",
    "SourceItem",
    "read_keywords_file",
]

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp")


@dataclass(frozen=True, slots=True)
class SourceItem:
    """One candidate as a source delivers it.

    ``ref`` is the source's own reference (TinyImages index, array row, file path
    relative to the source root, Flickr photo id). ``class_name`` or ``class_id``
    give the intended class when the source knows it. ``data`` holds file bytes
    for file sources; array sources put pixels in :attr:`SourceBatch.pixels`.
    """

    ref: str
    class_name: str | None = None
    class_id: int | None = None
    keyword: str | None = None
    data: bytes | None = field(default=None, repr=False)
    suffix: str = ""
    width: int | None = None
    height: int | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)
    #: Extra files of a file item (e.g. ``scaled_256``), stored next to ``data``.
    derived: Mapping[str, bytes] = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class SkippedItem:
    """An item that could not be read, with the reason (goes to the ingest report)."""

    ref: str
    reason: str


class ColumnItems(Sequence[SourceItem]):
    """Items of an array batch kept as columns; :class:`SourceItem` built on access.

    Array sources with many small items (TinyImages) use this instead of a list so
    that a batch costs no Python object per item; the ingest reads the columns
    directly. Indexing, iteration and ``len`` behave like the equivalent list.
    """

    __slots__ = ("class_names", "height", "keywords", "refs", "width")

    def __init__(
        self,
        refs: Sequence[str],
        class_names: Sequence[str | None],
        keywords: Sequence[str | None],
        width: int,
        height: int,
    ) -> None:
        self.refs, self.class_names, self.keywords = refs, class_names, keywords
        self.width, self.height = width, height

    def __len__(self) -> int:
        return len(self.refs)

    def _item(self, i: int) -> SourceItem:
        return SourceItem(
            self.refs[i],
            class_name=self.class_names[i],
            keyword=self.keywords[i],
            width=self.width,
            height=self.height,
        )

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._item(j) for j in range(len(self))[i]]
        return self._item(range(len(self))[i])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class SourceBatch:
    """Items at source positions ``[start, stop)``.

    ``pixels`` (array sources) is aligned with ``items``: ``pixels[i]`` belongs to
    ``items[i]``; it is ``None`` for items carrying file ``data``. ``skipped``
    items are part of the range but not of ``items``.
    """

    start: int
    stop: int
    items: Sequence[SourceItem]
    pixels: NDArray[np.uint8] | None = field(default=None, repr=False)
    skipped: list[SkippedItem] = field(default_factory=list)


class CandidateSource(ABC):
    """A source of candidate images.

    Subclasses set :attr:`kind` and implement :meth:`__len__`,
    :meth:`iter_batches` and (optionally) extend :meth:`describe`.
    """

    kind: ClassVar[str]
    #: ``"array"`` (pixels into arrays/) or ``"file"`` (bytes into images/).
    storage: ClassVar[str] = "array"
    #: Class names in label-id order when the source knows them (CIFAR meta).
    label_names: list[str] | None = None
    #: Items per ingest batch when the caller does not say (None: the stage default).
    default_batch_size: ClassVar[int | None] = None
    #: Whether a ``ref`` names one image whatever file it comes from (a TinyImages
    #: index, a Flickr photo id): then several sources may share a name, and equal
    #: refs under it rightly link their candidates as one source image. False (the
    #: default) when refs are row positions or relative paths, which mean something
    #: only within one file or folder: a second file under the same name is refused.
    global_refs: ClassVar[bool] = False

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise DataIntegrityError(
                f"{self.kind} source {self.path} does not exist. Check the path."
            )

    @abstractmethod
    def __len__(self) -> int:
        """Number of positions (items + unreadable items)."""

    @abstractmethod
    def iter_batches(
        self, *, start: int = 0, batch_size: int = 4096
    ) -> Iterator[SourceBatch]:
        """Batches covering positions ``[start, len(self))`` in order."""

    def iter_batches_recycled(
        self, *, start: int = 0, batch_size: int = 4096, depth: int = 2
    ) -> Iterator[SourceBatch]:
        """:meth:`iter_batches` for a consumer that drops batches promptly.

        The caller promises to be done with batch *k*'s ``pixels`` before it asks
        for batch *k + depth*, so a source may decode batch *k + depth* into the
        same array (a fresh 200 MB array per batch costs more in page faults than
        the decode itself). Same batches as :meth:`iter_batches` otherwise; this
        default reuses nothing.
        """
        return self.iter_batches(start=start, batch_size=batch_size)

    def class_names(self) -> set[str] | None:
        """Every class name the items will carry, when known without reading them
        (folder names), so an unknown class is refused before anything is
        written; None when only the items tell."""
        return None

    def options(self) -> dict[str, Any]:
        """Options that change what the source yields (part of the ingest key)."""
        return {}

    def describe(self) -> dict[str, Any]:
        """Kind, resolved path, item count and options."""
        return {
            "kind": self.kind,
            "path": str(self.path.resolve()),
            "n_items": len(self),
            "storage": self.storage,
            **self.options(),
        }


CANDIDATE_SOURCES: Registry[type[CandidateSource]] = Registry(
    "candidate source", entry_point_group="retest.sources"
)


def read_keywords_file(path: str | os.PathLike[str]) -> dict[str, str | None]:
    """Keywords (and their class, when given) from a file.

    Accepted formats: JSON ``{class: [keyword, ...]}`` or ``{class: {keyword: n}}``
    (the keyword-plan / ``keyword_counts_v6.json`` layout), a JSON list of
    keywords, or text with one keyword per line (``#`` starts a comment).

    Returns
    -------
    dict of str to (str or None)
        ``keyword → class name`` (``None`` when the file does not say), in file
        order.
    """
    p = Path(path)
    formats = (
        'expected JSON {"class": ["keyword", ...]}, a JSON list of keywords, or '
        "text with one keyword per line"
    )
    try:
        data = p.read_bytes()
    except IsADirectoryError:
        raise InputValidationError(
            f"keywords file {p} is a directory; {formats}."
        ) from None
    except OSError as err:
        raise InputValidationError(
            f"cannot read keywords file {p} ({err.strerror}); {formats}."
        ) from None
    text = decode_utf8(
        data,
        f"keywords file {p}",
        "save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8`).",
    )
    out: dict[str, str | None] = {}
    if p.suffix.lower() == ".json":
        try:
            doc = json.loads(text)
        except ValueError as err:
            where = (
                f" (line {err.lineno}, column {err.colno}: {err.msg})"
                if isinstance(err, json.JSONDecodeError)
                else ""
            )
            raise InputValidationError(
                f"keywords file {p} is not valid JSON{where}; {formats}. Fix or "
                "complete the file."
            ) from None
        if isinstance(doc, dict):
            for cls, kws in doc.items():
                if isinstance(kws, dict):
                    kws = list(kws)
                if not isinstance(kws, list) or not all(
                    isinstance(k, str) for k in kws
                ):
                    raise InputValidationError(
                        f"keywords file {p}: class {cls!r} maps to "
                        f"{type(kws).__name__} {json.dumps(kws)[:40]}; expected a "
                        'list of keyword strings ["k1", "k2"] or an object '
                        '{"k1": count}.'
                    )
                out.update((kw, str(cls)) for kw in kws)
        elif isinstance(doc, list):
            bad = [k for k in doc if not isinstance(k, str)]
            if bad:
                raise InputValidationError(
                    f"keywords file {p}: {json.dumps(bad[0])[:40]} is not a keyword "
                    "string; expected a JSON list of strings."
                )
            out.update(dict.fromkeys(doc))
        else:
            raise InputValidationError(
                f"keywords file {p} holds a JSON {type(doc).__name__}; {formats}."
            )
    else:
        for row in text.splitlines():
            word = row.split("#", 1)[0].strip()
            if word:
                out[word] = None
    if not out:
        raise ConfigError(
            f"keywords file {p} holds no keywords; {formats}, or pass --keywords a,b."
        )
    return out


def make_source(
    kind: str, path: str | os.PathLike[str], **options: Any
) -> CandidateSource:
    """Build the source registered as ``kind`` (unknown kinds get suggestions).

    An option the kind's constructor does not take (e.g. ``--class`` for a
    plug-in source without ``class_name``) is a one-line error, not a TypeError.
    """
    cls = CANDIDATE_SOURCES.get(kind)
    params = inspect.signature(cls).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        bad = sorted(set(options) - set(params))
        if bad:
            takes = [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY]
            raise ConfigError(
                f"source kind {kind!r} does not take {', '.join(bad)}; its options: "
                f"{', '.join(takes) or 'none'}."
            )
    return cls(path, **options)
