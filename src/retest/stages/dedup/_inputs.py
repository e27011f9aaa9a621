"""Inputs of the ``dedup`` stage.

:func:`gather_inputs` loads candidate and reference pixels (resized, channel
counts matched) and validates them before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest.errors import InputValidationError, StageError
from retest.project import Project
from retest.store.rows import CandidateRow, ReferenceRow

__all__ = [
    "BASE_METRICS",
    "SHORTLIST_METRICS",
    "DedupInputs",
    "gather_inputs",
    "load_images",
]

BASE_METRICS = ("l2", "features")
"""Built-in metrics computed against every reference (exact kNN)."""
SHORTLIST_METRICS = ("dssim", "warp")
"""Built-in metrics computed on the union of the exact metrics' neighbour lists."""
_SPLITS = {"original-train": "train", "original-test": "test"}


def _resize(img: NDArray[np.uint8], size: int) -> NDArray[np.uint8]:
    from PIL import Image

    if img.shape[0] == size and img.shape[1] == size:
        return img
    mode_img = Image.fromarray(
        img[..., 0] if img.ndim == 3 and img.shape[2] == 1 else img
    )
    out = np.asarray(mode_img.resize((size, size), Image.Resampling.BILINEAR), np.uint8)
    return out.reshape(size, size, -1)


def _load_pixels(
    project: Project, rows: Sequence[CandidateRow | ReferenceRow], ids: Sequence[str]
) -> list[NDArray[np.uint8]]:
    out: list[Any] = [None] * len(rows)
    by_array: dict[str, list[tuple[int, int]]] = {}
    files = []
    for i, r in enumerate(rows):
        if r.array_name is not None and r.array_row is not None:
            by_array.setdefault(r.array_name, []).append((i, r.array_row))
        else:
            files.append(i)
    for name, pairs in by_array.items():
        imgs = project.pixel_array(name).read([row for _, row in pairs])
        for (i, _), img in zip(pairs, imgs, strict=True):
            out[i] = img
    if files:
        for i, img in zip(files, project.pixels([ids[i] for i in files]), strict=True):
            out[i] = img
    return out


def _stack(
    images: list[NDArray[np.uint8]], resize: int | None, what: str, channels: int
) -> NDArray[np.uint8]:
    fixed = []
    for img in images:
        a = img if img.ndim == 3 else img[..., None]
        if resize is not None:
            a = _resize(a, resize)
        if a.shape[2] != channels:
            a = np.repeat(a[..., :1], channels, axis=2)
        fixed.append(a)
    shapes = sorted({a.shape for a in fixed})
    if len(shapes) > 1:
        raise InputValidationError(
            f"{what} have different sizes ({', '.join(map(str, shapes[:4]))}); pass "
            "--resize N to compare them at N×N."
        )
    return np.stack(fixed) if fixed else np.zeros((0, 1, 1, channels), np.uint8)


def load_images(
    project: Project,
    rows: Sequence[CandidateRow | ReferenceRow],
    resize: int | None,
    what: str,
    channels: int,
) -> NDArray[np.uint8]:
    """Pixels of ``rows`` stacked as (n, H, W, channels), resized like the run's."""
    ids = [r.id for r in rows]
    return _stack(_load_pixels(project, rows, ids), resize, what, channels)


@dataclass
class DedupInputs:
    """Candidate and reference ids and pixels (references include the pool)."""

    cand_ids: list[str]
    ref_ids: list[str]
    cand_px: NDArray[np.uint8]
    ref_px: NDArray[np.uint8]
    exclude: NDArray[np.int64] | None


def gather_inputs(
    project: Project, against: Sequence[str], resize: int | None
) -> DedupInputs:
    store = project.store
    black = set(store.blacklist.current())
    cands = [c for c in store.candidates.iter() if c.id not in black]
    cands.sort(key=lambda c: c.id)
    if not cands:
        raise StageError("the project has no (non-blacklisted) candidates to check.")
    refs: list[ReferenceRow] = []
    for a in against:
        if a in _SPLITS:
            refs.extend(store.references.list(split=_SPLITS[a]))
    cand_ids = [c.id for c in cands]
    ref_ids = [r.id for r in refs]
    c_img = _load_pixels(project, cands, cand_ids)
    r_img = _load_pixels(project, refs, ref_ids)
    ch = max([i.shape[2] if i.ndim == 3 else 1 for i in c_img + r_img])
    cand_px = _stack(c_img, resize, "candidate images", ch)
    ref_px = _stack(r_img, resize, "original images", ch) if r_img else cand_px[:0]
    if ref_px.shape[0] and ref_px.shape[1:] != cand_px.shape[1:]:
        raise InputValidationError(
            f"candidate images are {cand_px.shape[1:]} but original images are "
            f"{ref_px.shape[1:]}; pass --resize N to compare them at N×N."
        )
    exclude = None
    if "pool" in against:
        exclude = np.arange(len(ref_ids), len(ref_ids) + len(cand_ids), dtype=np.int64)
        ref_px = np.concatenate([ref_px, cand_px])
        ref_ids = ref_ids + cand_ids
    if not ref_ids:
        raise InputValidationError(
            f"the reference set ({', '.join(against)}) is empty; register original "
            "images with `retest reference add` or include pool."
        )
    return DedupInputs(cand_ids, ref_ids, cand_px, ref_px, exclude)
