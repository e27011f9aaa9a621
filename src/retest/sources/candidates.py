"""Candidate sources: where new images come from (issue 3, SPEC §1).

Every source is registered in :data:`CANDIDATE_SOURCES` under its kind and offers
the same small surface (*describe → iterate*):

* :meth:`CandidateSource.describe` — kind, path, number of items, options;
* :meth:`CandidateSource.iter_batches` — :class:`SourceBatch` objects covering the
  source's items in one deterministic order, starting at any position, so an
  interrupted ingest resumes where it stopped.

Array-like sources (arrays, IDX, CIFAR pickles, TinyImages, small folder images)
deliver pixels; file sources (large folder images, Flickr downloads) deliver the
file bytes. Items that cannot be read are returned as :class:`SkippedItem` so the
ingest reports them instead of stopping. Persistence is the pipeline's job
(:mod:`retest.pipeline.ingest`).
"""

from __future__ import annotations

import os
from typing import Any

from retest.sources.candidate_arrays import (
    ArraySource,
    CifarSource,
    IdxSource,
    TinyImagesSource,
)
from retest.sources.candidate_base import (
    CANDIDATE_SOURCES,
    CandidateSource,
    ColumnItems,
    SkippedItem,
    SourceBatch,
    SourceItem,
    read_keywords_file,
)
from retest.sources.candidate_files import FlickrSource, FolderSource

__all__ = [
    "CANDIDATE_SOURCES",
    "ArraySource",
    "CandidateSource",
    "CifarSource",
    "ColumnItems",
    "FlickrSource",
    "FolderSource",
    "IdxSource",
    "SkippedItem",
    "SourceBatch",
    "SourceItem",
    "TinyImagesSource",
    "make_source",
    "read_keywords_file",
]


def make_source(
    kind: str, path: str | os.PathLike[str], **options: Any
) -> CandidateSource:
    """Build the source registered as ``kind`` (unknown kinds get suggestions)."""
    cls = CANDIDATE_SOURCES.get(kind)
    return cls(path, **options)
