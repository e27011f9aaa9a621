"""Analyses beyond the comparison table (docs/algorithms.md#evaluation). Pure functions.

* :func:`accuracy_by_selection_frequency` — accuracy of each model on the images
  of each selection-frequency bin, on the original and the new test set
  (paper Figs 15–17).
* :func:`accuracy_across_revisions` — fixed models evaluated on every revision
  of a test set (paper Fig. 7), with the number of images changed per revision;
  :func:`revision_matrix` pivots it into a model × revision table.
* :func:`discriminate_datasets` — a classifier trained to tell original from new
  images on a class-balanced sample; accuracy with its Clopper-Pearson interval
  (50 % = indistinguishable; paper Tables 5 and 14).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from retest._progress import ProgressCallback, report
from retest._validation import (
    RandomStateLike,
    check_fraction,
    check_labels,
    check_random_state,
)
from retest.errors import InputValidationError
from retest.evaluate.intervals import clopper_pearson
from retest.evaluate.metrics import correct
from retest.records import Predictions
from retest.sampling.histogram import DEFAULT_BINS, bin_indices, check_bins

__all__ = [
    "BinnedAccuracy",
    "DiscriminatorResult",
    "RevisionAccuracy",
    "accuracy_across_revisions",
    "accuracy_by_selection_frequency",
    "discriminate_datasets",
    "revision_matrix",
]


@dataclass(frozen=True, slots=True)
class BinnedAccuracy:
    """Accuracy of ``model`` on the images of ``dataset`` whose frequency is in a bin.

    ``overall`` is the model's accuracy on the whole original test set (the x axis
    of paper Figs 15 and 16); ``accuracy``/``ci_*`` are NaN for an empty bin.
    """

    model: str
    dataset: str
    bin: int
    low: float
    high: float
    n: int
    correct: int
    accuracy: float
    ci_low: float
    ci_high: float
    overall: float


def _counts_ci(k: int, n: int, confidence: float) -> tuple[float, float, float]:
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    lo, hi = clopper_pearson(k, n, confidence=confidence)
    return k / n, float(lo), float(hi)


def _binned_rows(
    preds: Mapping[str, Predictions],
    labels: NDArray[np.int64],
    freq: NDArray[np.float64],
    dataset: str,
    edges: tuple[float, ...],
    overall: Mapping[str, float],
    metric: str,
    confidence: float,
) -> list[BinnedAccuracy]:
    annotated = ~np.isnan(freq)
    idx = np.full(freq.shape, -1, np.int64)
    idx[annotated] = bin_indices(freq[annotated], edges)
    bounds = (0.0, *edges, 1.0)
    rows = []
    for model in sorted(preds):
        ok = correct(labels, preds[model], metric=metric)
        for b in range(len(edges) + 1):
            sel = idx == b
            n, k = int(sel.sum()), int(ok[sel].sum())
            acc, lo, hi = _counts_ci(k, n, confidence)
            rows.append(
                BinnedAccuracy(
                    model,
                    dataset,
                    b,
                    bounds[b],
                    bounds[b + 1],
                    n,
                    k,
                    acc,
                    lo,
                    hi,
                    overall[model],
                )
            )
    return rows


def _check_freq(freq: ArrayLike, n: int, name: str) -> NDArray[np.float64]:
    f = np.asarray(freq, dtype=np.float64)
    if f.shape != (n,):
        raise InputValidationError(
            f"{name} must have one value per image ({n}). Got shape {f.shape}."
        )
    bad = f[~np.isnan(f) & ((f < 0) | (f > 1))]
    if bad.size:
        raise InputValidationError(
            f"{name} must lie in [0, 1] (NaN = not annotated). Got {bad[:3].tolist()}."
        )
    return f


def accuracy_by_selection_frequency(
    original: Mapping[str, Predictions],
    new: Mapping[str, Predictions],
    labels_original: ArrayLike,
    labels_new: ArrayLike,
    *,
    frequencies_original: ArrayLike | None = None,
    frequencies_new: ArrayLike | None = None,
    bins: Sequence[float] = DEFAULT_BINS,
    metric: str = "top1",
    confidence: float = 0.95,
) -> list[BinnedAccuracy]:
    """Per model and bin: accuracy on original and new images of that bin.

    See docs/algorithms.md#binned-accuracy.

    Bins follow docs/algorithms.md#bins-and-rounding: an image with frequency ``f`` is
    in the first bin ``i`` with ``f < bins[i]``, else the last (so ``[0.8, 1.0]`` is
    closed). NaN marks an unannotated image, left out of every bin (the original set is
    often only partly annotated). A side without frequencies contributes no rows.

    Returns
    -------
    list of BinnedAccuracy
        Original rows first, then new; models sorted; bins ascending.

    Examples
    --------
    >>> p = Predictions.from_labels("m", "new", [0, 1, 1, 0])
    >>> rows = accuracy_by_selection_frequency(
    ...     {"m": Predictions.from_labels("m", "orig", [0, 1])}, {"m": p}, [0, 1],
    ...     [0, 1, 0, 0], frequencies_new=[0.1, 0.5, 0.5, 0.9])
    >>> [(r.bin, r.n, r.correct) for r in rows if r.n]
    [(0, 1, 1), (2, 2, 1), (4, 1, 1)]
    """
    edges = check_bins(bins)
    y_o = check_labels(labels_original, name="labels of the original test set")
    y_n = check_labels(labels_new, name="labels of the new test set")
    missing = sorted(set(original) ^ set(new))
    if missing:
        raise InputValidationError(
            f"models must have predictions on both test sets; missing on one: {', '.join(missing)}."
        )
    overall = {
        m: float(correct(y_o, p, metric=metric).mean()) for m, p in original.items()
    }
    rows: list[BinnedAccuracy] = []
    for preds, y, f, ds in (
        (original, y_o, frequencies_original, "original"),
        (new, y_n, frequencies_new, "new"),
    ):
        if f is not None:
            freq = _check_freq(f, y.shape[0], f"selection frequencies of the {ds} set")
            rows += _binned_rows(preds, y, freq, ds, edges, overall, metric, confidence)
    return rows


@dataclass(frozen=True, slots=True)
class RevisionAccuracy:
    """Accuracy of ``model`` on one revision; ``n_changed`` = images added or
    removed since the previous revision (``None`` for the first or without ids)."""

    revision: str
    model: str
    n: int
    correct: int
    accuracy: float
    ci_low: float
    ci_high: float
    n_changed: int | None


def accuracy_across_revisions(
    predictions: Mapping[str, Mapping[str, Predictions]],
    labels: Mapping[str, ArrayLike],
    *,
    ids: Mapping[str, Sequence[str]] | None = None,
    models: Sequence[str] | None = None,
    metric: str = "top1",
    confidence: float = 0.95,
) -> list[RevisionAccuracy]:
    """Accuracy of fixed models on every revision, in the order given.

    See docs/algorithms.md#revision-impact.

    Parameters
    ----------
    predictions : mapping revision → {model → Predictions}
        Revisions in chronological order (mapping order).
    labels : mapping revision → labels
    ids : mapping revision → image ids, optional
        To count the images changed between consecutive revisions.
    models : sequence of str, optional
        The fixed models (default: those present on every revision).
    """
    revs = list(predictions)
    if set(labels) != set(revs):
        raise InputValidationError(
            f"labels must be given for exactly the revisions with predictions ({', '.join(revs)})."
        )
    common = set.intersection(*(set(predictions[r]) for r in revs)) if revs else set()
    chosen = sorted(common) if models is None else list(models)
    rows = []
    for i, rev in enumerate(revs):
        n_changed = None
        if ids is not None and i > 0:
            now, before = set(ids[rev]), set(ids[revs[i - 1]])
            n_changed = len(now ^ before)
        for m in chosen:
            if m not in predictions[rev]:
                raise InputValidationError(
                    f"model {m!r} has no predictions on revision {rev!r}."
                )
            ok = correct(labels[rev], predictions[rev][m], metric=metric)
            k, n = int(ok.sum()), int(ok.size)
            acc, lo, hi = _counts_ci(k, n, confidence)
            rows.append(RevisionAccuracy(rev, m, n, k, acc, lo, hi, n_changed))
    return rows


def revision_matrix(
    rows: Sequence[RevisionAccuracy],
) -> tuple[list[str], list[str], NDArray[np.float64]]:
    """``(models, revisions, accuracy[model, revision])`` from :func:`accuracy_across_revisions`."""
    revs = list(dict.fromkeys(r.revision for r in rows))
    models = sorted({r.model for r in rows})
    mat = np.full((len(models), len(revs)), np.nan)
    for r in rows:
        mat[models.index(r.model), revs.index(r.revision)] = r.accuracy
    return models, revs, mat


@dataclass(frozen=True, slots=True)
class DiscriminatorResult:
    """Held-out accuracy of an original-vs-new classifier (0.5 = indistinguishable)."""

    accuracy: float
    correct: int
    n_test: int
    n_train: int
    ci_low: float
    ci_high: float
    confidence: float
    per_class_pairs: dict[int, int]

    @property
    def indistinguishable(self) -> bool:
        """True when the interval contains 50 %."""
        return self.ci_low <= 0.5 <= self.ci_high


def _balanced_split(
    y_o: NDArray[np.int64],
    y_n: NDArray[np.int64],
    test_fraction: float,
    rng: np.random.Generator,
) -> tuple[list[tuple[NDArray[np.intp], NDArray[np.intp]]], dict[int, int]]:
    """Per class: equal numbers of original and new, split into train / test."""
    train_o: list[NDArray[np.intp]] = []
    train_n: list[NDArray[np.intp]] = []
    test_o: list[NDArray[np.intp]] = []
    test_n: list[NDArray[np.intp]] = []
    pairs: dict[int, int] = {}
    for c in np.union1d(y_o, y_n):
        io = rng.permutation(np.flatnonzero(y_o == c))
        inn = rng.permutation(np.flatnonzero(y_n == c))
        m = min(io.size, inn.size)
        t = round(m * test_fraction)
        if m < 2 or t < 1 or t >= m:
            continue
        pairs[int(c)] = m
        test_o.append(io[:t])
        test_n.append(inn[:t])
        train_o.append(io[t:m])
        train_n.append(inn[t:m])
    if not pairs:
        raise InputValidationError(
            "no class has at least 2 original and 2 new images; cannot train a discriminator."
        )
    cat = np.concatenate
    return [(cat(train_o), cat(train_n)), (cat(test_o), cat(test_n))], pairs


def _features(images: ArrayLike) -> NDArray[np.float32]:
    x = np.asarray(images)
    flat = x.reshape(x.shape[0], -1)
    return (
        (flat.astype(np.float32) / 255.0)
        if x.dtype == np.uint8
        else flat.astype(np.float32)
    )


def discriminate_datasets(
    images_original: ArrayLike,
    labels_original: ArrayLike,
    images_new: ArrayLike,
    labels_new: ArrayLike,
    *,
    classifier: Any = None,
    test_fraction: float = 0.2,
    confidence: float = 0.95,
    random_state: RandomStateLike = 0,
    progress: ProgressCallback | None = None,
) -> DiscriminatorResult:
    """Train a classifier to tell original (0) from new (1) images.

    See docs/algorithms.md#discriminator.

    Per class, equally many original and new images are drawn (the smaller count
    of the two, in a seeded random order); ``test_fraction`` of them of each kind
    are held out, so the train and test sets are balanced per class and overall.
    Accuracy on the held-out pairs gets a Clopper-Pearson interval; one containing
    50 % means the classifier cannot tell the sets apart.

    Parameters
    ----------
    images_original, images_new : array of shape (n, ...)
        uint8 pixels (scaled to [0, 1]) or features, flattened per image.
    labels_original, labels_new : array of int
        Classes, used only for balancing.
    classifier : sklearn-style estimator, optional
        Cloned before fitting; default a logistic regression on pixels (C = 0.1).
    """
    check_fraction(test_fraction, "test_fraction", closed="neither")
    rng = check_random_state(random_state)
    xo, xn = _features(images_original), _features(images_new)
    y_o = check_labels(labels_original, name="labels of the original images")
    y_n = check_labels(labels_new, name="labels of the new images")
    if (
        xo.shape[0] != y_o.shape[0]
        or xn.shape[0] != y_n.shape[0]
        or xo.shape[1:] != xn.shape[1:]
    ):
        raise InputValidationError(
            f"images and labels must match in number, and both sets in feature size: "
            f"original {xo.shape} / {y_o.shape[0]} labels, new {xn.shape} / {y_n.shape[0]} labels."
        )
    ((tr_o, tr_n), (te_o, te_n)), pairs = _balanced_split(y_o, y_n, test_fraction, rng)
    x_tr = np.concatenate([xo[tr_o], xn[tr_n]])
    t_tr = np.r_[np.zeros(tr_o.size, np.int64), np.ones(tr_n.size, np.int64)]
    x_te = np.concatenate([xo[te_o], xn[te_n]])
    t_te = np.r_[np.zeros(te_o.size, np.int64), np.ones(te_n.size, np.int64)]
    seed = int(rng.integers(2**31 - 1))
    clf = (
        clone(classifier)
        if classifier is not None
        else LogisticRegression(C=0.1, max_iter=500)
    )
    if "random_state" in clf.get_params():
        clf.set_params(random_state=seed)
    report(progress, "train discriminator", 0, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(x_tr, t_tr)
    report(progress, "train discriminator", 1, 1)
    k = int((np.asarray(clf.predict(x_te)) == t_te).sum())
    acc, lo, hi = _counts_ci(k, int(t_te.size), confidence)
    return DiscriminatorResult(
        acc, k, int(t_te.size), int(t_tr.size), lo, hi, confidence, pairs
    )
