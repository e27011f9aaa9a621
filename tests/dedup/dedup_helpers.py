"""The dedup tests' project: Fashion-MNIST references and candidates in a real store.

Imported by the test modules (``from dedup_helpers import ...``), not a conftest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from retest.datasets.idx import read_idx
from retest.project._project import Project
from retest.store.artifacts import PixelArray
from retest.store.rows import CandidateRow, ReferenceRow, content_id

__all__ = [
    "brighter",
    "fm_images",
    "fm_project",
    "fm_with_copies",
    "forget_checkpoints",
]


def fm_images(fm: Path, n_ref: int, n_new: int) -> tuple[np.ndarray, ...]:
    """The first ``n_ref`` training images and labels, the first ``n_new`` test images."""
    return (
        read_idx(fm / "train-images-idx3-ubyte.gz")[:n_ref],
        read_idx(fm / "train-labels-idx1-ubyte.gz")[:n_ref],
        read_idx(fm / "t10k-images-idx3-ubyte.gz")[:n_new],
    )


def brighter(images: np.ndarray, by: int = 12) -> np.ndarray:
    """Near-copies pixel L2 should find: every pixel ``by`` brighter (clipped)."""
    return np.clip(images.astype(int) + by, 0, 255).astype(np.uint8)


def fm_with_copies(fm: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """200 training images and labels, and 24 candidates: test images whose first
    4 are replaced by brighter copies of the first 4 training images."""
    train, labels, test = fm_images(fm, 200, 24)
    cands = test.copy()
    cands[:4] = brighter(train[:4])
    return train, labels, cands


def fm_project(
    root: Path,
    refs: np.ndarray,
    labels: np.ndarray,
    candidates: np.ndarray,
    *,
    split: str = "train",
    source: str = "fm",
) -> Project:
    """A Fashion-MNIST project whose references are ``refs`` (split ``split``,
    labelled) and whose candidates (class 0, source ``source``, refs ``"0"``,
    ``"1"``, ...) are ``candidates``, all in one pixel array ``fm``."""
    p = Project.init(root, name="t", classes_from="fashion-mnist")
    px = PixelArray.create(p.arrays_dir, "fm", shape=(28, 28))
    rows = px.append(refs)
    p.store.references.add(
        ReferenceRow(
            split,
            i,
            int(labels[i]),  # the default features embedder trains on the labels
            content_id(refs[i]),
            array_name="fm",
            array_row=r,
        )
        for i, r in enumerate(rows)
    )
    crow = px.append(candidates)
    p.store.candidates.add(
        CandidateRow(
            content_id(img), source, str(i), class_id=0, array_name="fm", array_row=r
        )
        for i, (img, r) in enumerate(zip(candidates, crow, strict=True))
    )
    return p


def forget_checkpoints(project: Project, result: Any) -> None:
    """Forget the finished chunks of every metric of a dedup run (``result``, a
    DedupResult): each metric's chunks are a checkpoint run of its own."""
    for state in result.states.values():
        project.store.stages.reset(f"dedup:{state['metric_fingerprint']}")
