"""Ranking suspected label errors, estimating the noise, scoring a detector.

* :func:`label_quality_scores` — cleanlab's ``self_confidence`` and
  ``normalized_margin`` scores (``cleanlab.rank.get_label_quality_scores``),
  applied row chunk by row chunk so a large matrix is never copied whole.
* :func:`rank_label_errors` — the flagged rows as :class:`LabelError` records,
  most suspicious first.
* :func:`estimate_noise` — calibrated confident joint, joint ``P(given, true)``,
  noise matrix ``P(given | true)``, inverse noise matrix, latent prior and the
  estimated number of label errors per given class (``cleanlab.count``).
* :func:`detection_report` — precision / recall / F1 against known errors
  (docs/algorithms.md#detection-scores).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest.errors import ConfigError, InputValidationError
from retest.label_errors.finders import (
    check_label_error_inputs,
    compute_confident_joint,
)

__all__ = [
    "RANK_BY",
    "DetectionReport",
    "LabelError",
    "NoiseEstimate",
    "RankBy",
    "detection_report",
    "estimate_noise",
    "label_quality_scores",
    "rank_label_errors",
    "resolve_rank_by",
]

#: The label-quality scores flagged rows are ranked by, in retest's spelling
#: (hyphens, as every name a user picks: methods, samplers, metrics). cleanlab's
#: spellings, ``self_confidence`` and ``normalized_margin``, are accepted too.
RANK_BY = ("self-confidence", "normalized-margin")
RankBy = Literal[
    "self-confidence", "normalized-margin", "self_confidence", "normalized_margin"
]


def resolve_rank_by(rank_by: str) -> str:
    """retest's spelling of a ``rank_by`` score given in either spelling.

    Raises
    ------
    ConfigError
        Not a score of :data:`RANK_BY` in either spelling.

    Examples
    --------
    >>> resolve_rank_by("self_confidence"), resolve_rank_by("normalized-margin")
    ('self-confidence', 'normalized-margin')
    """
    name = rank_by.replace("_", "-") if isinstance(rank_by, str) else rank_by
    if name not in RANK_BY:
        raise ConfigError(
            f"rank_by must be one of {', '.join(RANK_BY)} (or cleanlab's "
            f"self_confidence, normalized_margin). Got {rank_by!r}."
        )
    return str(name)


@dataclass(frozen=True, slots=True)
class LabelError:
    """One suspected label error.

    ``suggested`` is the most probable class other than the given one; ``score``
    is the label-quality score of the given label (lower = more suspicious);
    ``rank`` starts at 1.
    """

    rank: int
    index: int
    given: int
    suggested: int
    score: float
    self_confidence: float
    suggested_prob: float

    def as_dict(self, class_names: tuple[str, ...] | None = None) -> dict[str, Any]:
        d: dict[str, Any] = {
            "rank": self.rank,
            "index": self.index,
            "given": self.given,
            "suggested": self.suggested,
            "score": round(self.score, 6),
            "self_confidence": round(self.self_confidence, 6),
            "suggested_prob": round(self.suggested_prob, 6),
        }
        if class_names is not None:
            d["given_name"] = class_names[self.given]
            d["suggested_name"] = class_names[self.suggested]
        return d


def label_quality_scores(
    labels: NDArray[np.int64],
    pred_probs: Any,
    *,
    method: RankBy = "self-confidence",
    chunk_rows: int = 65536,
) -> NDArray[np.float64]:
    """Per-example label quality in [0, 1], lower = more likely mislabeled.

    ``self-confidence`` = ``pred_probs[i, labels[i]]``; ``normalized-margin`` =
    ``(p_given − max_{j≠given} p_j + 1) / 2`` (cleanlab.rank; its spellings
    ``self_confidence``, ``normalized_margin`` are accepted too).
    """
    cleanlab_name = resolve_rank_by(method).replace("-", "_")
    from cleanlab.rank import get_label_quality_scores

    out = np.empty(labels.shape[0], dtype=np.float64)
    for start in range(0, labels.shape[0], chunk_rows):
        stop = start + chunk_rows
        out[start:stop] = get_label_quality_scores(
            labels[start:stop],
            _own_precision(pred_probs[start:stop]),
            method=cleanlab_name,
            adjust_pred_probs=False,
        )
    return out


def _own_precision(rows: Any) -> NDArray[np.floating[Any]]:
    """Rows as float32 or float64, whichever holds them exactly: scores rounded to
    float32 tie (and fall back to the index) where float64 inputs differ."""
    a = np.asarray(rows)
    return a.astype(np.promote_types(a.dtype, np.float32), copy=False)


def rank_label_errors(
    labels: ArrayLike,
    pred_probs: Any,
    mask: ArrayLike,
    *,
    rank_by: RankBy = "self-confidence",
    chunk_rows: int = 65536,
) -> tuple[LabelError, ...]:
    """Flagged rows as records, most suspicious first.

    Order: ascending ``rank_by`` score, ties broken by the other score
    (normalized margin / self-confidence), then by index — so discrete
    probabilities such as ensemble vote shares still give a total order.

    Parameters
    ----------
    labels : array-like of int, shape (n_samples,)
        Given labels.
    pred_probs : ndarray of shape (n_samples, n_classes)
        The probabilities the mask was found with.
    mask : array-like of bool, shape (n_samples,)
        Rows to rank, e.g. the result of
        :func:`~retest.label_errors.finders.find_label_errors`.
    rank_by : {"self-confidence", "normalized-margin"}
        Label-quality score to sort by (lower = more suspicious); cleanlab's
        spellings ``self_confidence`` and ``normalized_margin`` are accepted.
    chunk_rows : int
        Rows scored at a time.

    Returns
    -------
    tuple of LabelError
        One per flagged row: ``rank`` (from 1), ``index``, ``given``,
        ``suggested`` (most probable other class), ``score``; empty when
        nothing is flagged.

    Raises
    ------
    InputValidationError
        Labels, probabilities and mask that do not describe the same rows.
    ConfigError
        An unknown ``rank_by``.

    Examples
    --------
    >>> from retest import rank_label_errors
    >>> import numpy as np
    >>> from retest.label_errors.finders import find_label_errors
    >>> p = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.2, 0.8], [0.6, 0.4]])
    >>> y = [0, 1, 1, 1, 1]
    >>> mask = find_label_errors(y, p, method="argmax")
    >>> [(e.rank, e.index, e.given, e.suggested) for e in rank_label_errors(y, p, mask)]
    [(1, 1, 1, 0), (2, 4, 1, 0)]
    """
    rank_by = resolve_rank_by(rank_by)  # type: ignore[assignment]
    y, probs = check_label_error_inputs(labels, pred_probs, chunk_rows=chunk_rows)
    m = np.asarray(mask, dtype=bool)
    if m.shape != y.shape:
        raise InputValidationError(
            f"mask must have one entry per example ({y.shape[0]}). Got shape {m.shape}."
        )
    idx = np.flatnonzero(m)
    if idx.size == 0:
        return ()
    p = _own_precision(probs[idx])
    g = y[idx]
    primary = label_quality_scores(g, p, method=rank_by)
    other: RankBy = (
        "normalized-margin" if rank_by == "self-confidence" else "self-confidence"
    )
    secondary = label_quality_scores(g, p, method=other)
    order = np.lexsort((idx, secondary, primary))
    alt = p.copy()
    alt[np.arange(idx.size), g] = -np.inf
    suggested = alt.argmax(axis=1)
    return tuple(
        LabelError(
            rank=r + 1,
            index=int(idx[o]),
            given=int(g[o]),
            suggested=int(suggested[o]),
            score=float(primary[o]),
            self_confidence=float(p[o, g[o]]),
            suggested_prob=float(p[o, suggested[o]]),
        )
        for r, o in enumerate(order)
    )


@dataclass(frozen=True, slots=True)
class NoiseEstimate:
    """Latent noise estimated with confident learning.

    Attributes
    ----------
    confident_joint : ndarray of shape (K, K)
        Calibrated counts ``C[given, true]``; rows sum to the given-label counts.
    joint : ndarray of shape (K, K)
        ``P(given, true)`` = ``confident_joint / N``.
    noise_matrix : ndarray of shape (K, K)
        ``P(given | true)``; columns sum to 1.
    inverse_noise_matrix : ndarray of shape (K, K)
        ``P(true | given)``; columns sum to 1 (cleanlab's convention).
    py : ndarray of shape (K,)
        Latent prior ``P(true)``.
    errors_per_class : ndarray of shape (K,)
        Estimated label errors among the examples given each label.
    n_errors : int
        Estimated total number of label errors.
    """

    confident_joint: NDArray[np.int64]
    joint: NDArray[np.float64]
    noise_matrix: NDArray[np.float64]
    inverse_noise_matrix: NDArray[np.float64]
    py: NDArray[np.float64]
    errors_per_class: NDArray[np.int64]
    n_errors: int


def estimate_noise(
    labels: ArrayLike, pred_probs: Any, *, chunk_rows: int = 65536
) -> NoiseEstimate:
    """Estimate the noise from the calibrated confident joint (cleanlab.count)."""
    from cleanlab.count import calibrate_confident_joint, estimate_latent

    y, probs = check_label_error_inputs(labels, pred_probs, chunk_rows=chunk_rows)
    cj = compute_confident_joint(
        y, probs, clip_thresholds=True, chunk_rows=chunk_rows
    ).counts.copy(order="K")
    np.fill_diagonal(cj, cj.diagonal().clip(min=1))  # as cleanlab 2.9
    cal = np.asarray(calibrate_confident_joint(cj, y), dtype=np.int64)
    py, nm, inv = estimate_latent(cal, y, py_method="cnt")
    per_class = cal.sum(axis=1) - cal.diagonal()
    return NoiseEstimate(
        confident_joint=cal,
        joint=cal / float(cal.sum()),
        noise_matrix=np.asarray(nm, dtype=np.float64),
        inverse_noise_matrix=np.asarray(inv, dtype=np.float64),
        py=np.asarray(py, dtype=np.float64),
        errors_per_class=per_class.astype(np.int64),
        n_errors=int(per_class.sum()),
    )


@dataclass(frozen=True, slots=True)
class DetectionReport:
    """2×2 confusion of (true error, flagged) and the derived scores."""

    tp: int
    fp: int
    fn: int
    tn: int
    precision: float
    recall: float
    f1: float
    accuracy: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "tn": self.tn,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "accuracy": self.accuracy,
        }


def detection_report(mask: ArrayLike, true_errors: ArrayLike) -> DetectionReport:
    """Precision, recall, F1 and accuracy of a flagged mask against known errors.

    Precision is 0 when nothing is flagged and recall 0 when there are no errors
    (no division warnings).
    """
    m = np.asarray(mask, dtype=bool)
    e = np.asarray(true_errors, dtype=bool)
    if m.shape != e.shape or m.ndim != 1:
        raise InputValidationError(
            f"mask and true_errors must be 1-d of equal length. Got {m.shape} and {e.shape}."
        )
    tp = int((m & e).sum())
    fp = int((m & ~e).sum())
    fn = int((~m & e).sum())
    tn = int((~m & ~e).sum())
    prec = tp / (tp + fp) if tp + fp else 0.0
    rec = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return DetectionReport(tp, fp, fn, tn, prec, rec, f1, (tp + tn) / m.size)
