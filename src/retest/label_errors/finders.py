"""Label-error finders: the five methods of the confident-learning paper.

The methods follow docs/algorithms.md#label-error-methods (cleanlab v0.1.0, as used for
the paper's CIFAR-10 benchmark). ``prune-by-class``, ``prune-by-noise-rate`` and
``both`` call cleanlab 2.9 (``cleanlab.filter.find_label_issues``) for arrays that fit
the memory budget, and an equivalent chunked engine otherwise; the two engines give
identical masks (tested). ``argmax`` and ``confident-joint`` are a few lines and
are implemented here exactly as v0.1.0 does (docs/algorithms.md#label-error-methods).

Mapping to cleanlab 2.9 and the differences from v0.1.0
---------------------------------------------------------------------
========================  ==========================  ============================================
retest name               cleanlab 2.9 ``filter_by``  difference from v0.1.0; what we do
========================  ==========================  ============================================
``argmax`` (C_confusion)  ``predicted_neq_given``     none (error iff argmax ≠ given); own code.
``confident-joint``       ``confident_learning``      2.9 clips thresholds below at 2e-6 and then
(C_{ỹ,y*})                                            unsets errors whose argmax (with the given
                                                      label favoured by 1e-6) is the given label;
                                                      v0.1.0 has neither step, so a row whose only
                                                      confident class differs from the given label
                                                      stays an error even when argmax == given.
                                                      We implement v0.1.0 exactly (own code).
``prune-by-class`` (PBC)  ``prune_by_class``          v0.1.0 keeps classes with ≤ 5 examples
``prune-by-noise-rate``   ``prune_by_noise_rate``     unpruned (``MIN_NUM_PER_CLASS=5``); 2.9's
(PBNR)                                                default is 1, so we pass
``both`` (C+NR)           ``both``                    ``min_examples_per_class=5`` (changeable).
========================  ==========================  ============================================

cleanlab's own spellings (:data:`CLEANLAB_FILTERS`, as ``filter_by=`` or as the
method name) run the method that answers exactly as cleanlab 2.9's
``find_label_issues`` on the same float32 values, with cleanlab's default
minimum class size 1: the pruners above, ``confident-learning`` (2.9's
``confident_learning``), ``predicted-neq-given`` (argmax ≠ given with ties
toward the given label) and ``low-self-confidence`` / ``low-normalized-margin``.
The paper's spellings keep v0.1.0's 5 (:func:`resolve_method`).

Remaining differences for 3–5, kept from cleanlab 2.9 because no user would
notice them on real-valued probabilities, documented here for the record:
(a) 2.9 raises every diagonal count of the confident joint to ≥ 1 before
calibration; (b) v0.1.0 selects the ``n`` lowest scores with ``np.partition``
and a strict/loose comparison against the n-th value (ties can add or drop a
row), 2.9 takes exactly ``argsort(...)[:n]``; (c) the final "unset where
argmax == given" step favours the given label by 1e-6 in 2.9 (exact argmax in
v0.1.0), so exact ties between the given label and another class are never
flagged. On the released CIFAR-10 data (float16 probabilities upcast to
float32) a v0.1.0-style recomputation (partition thresholds, exact-argmax
unset) differs from ours in 3 of 24,334 (PBC), 2 of 20,856 (PBNR) and 2 of
20,498 (both) flagged rows.

References
----------
Northcutt, Jiang, Chuang. "Confident Learning: Estimating Uncertainty in Dataset
Labels." JAIR 70 (2021).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._validation import check_labels
from retest.errors import ConfigError, InputValidationError, RetestWarning
from retest.registry import Registry

__all__ = [
    "CLEANLAB_FILTERS",
    "LABEL_ERROR_METHODS",
    "ConfidentJoint",
    "LabelErrorMethod",
    "ProbabilitySumWarning",
    "check_label_error_inputs",
    "compute_confident_joint",
    "find_label_errors",
    "iter_row_chunks",
    "resolve_method",
]

Engine = Literal["auto", "cleanlab", "chunked"]
_ELEMENTS_IN_MEMORY = 1 << 24  # float32 arrays up to 64 MiB go to cleanlab directly
_DEFAULT_CHUNK = 65536
_FPC = 1e-6  # cleanlab.internal.constants.FLOATING_POINT_COMPARISON
_THRESHOLD_LOWER_BOUND = 2e-6  # cleanlab CONFIDENT_THRESHOLDS_LOWER_BOUND
_BIG_VALUE = 2.0  # cleanlab's threshold of a class without examples


class ProbabilitySumWarning(RetestWarning):
    """Probability rows do not sum to 1 (beyond the tolerance); they are used as given."""


@dataclass(frozen=True, slots=True)
class RowStats:
    """Per-row facts gathered while validating: self-confidence and argmax."""

    self_confidence: NDArray[np.float32]
    argmax: NDArray[np.int64]


class LabelErrorMethod(Protocol):
    """A finder: boolean mask (True = suspected label error) from labels and probs.

    ``row_stats`` (when given) holds what the validation pass already computed,
    so a method need not read a large matrix again.
    """

    def __call__(
        self,
        labels: NDArray[np.int64],
        pred_probs: Any,
        *,
        min_examples_per_class: int,
        engine: Engine,
        chunk_rows: int,
        row_stats: RowStats | None = None,
    ) -> NDArray[np.bool_]: ...


LABEL_ERROR_METHODS: Registry[LabelErrorMethod] = Registry(
    "label-error method", entry_point_group="retest.label_error_methods"
)


@functools.cache
def _float16_table() -> NDArray[np.float32]:
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    return bits.view(np.float16).astype(np.float32)


def as_float32(a: Any) -> NDArray[np.float32]:
    """Exact float32 copy; float16 goes through a 65,536-entry table (faster than a cast)."""
    arr = np.asarray(a)
    if arr.dtype == np.float16:
        return _float16_table()[arr.view(np.uint16)]
    return arr.astype(np.float32, copy=False)


def iter_row_chunks(
    pred_probs: Any, chunk_rows: int = _DEFAULT_CHUNK
) -> Iterator[tuple[int, NDArray[np.float32]]]:
    """Yield ``(start, rows as float32)`` so a float16 or memory-mapped matrix is never upcast whole."""
    n = int(pred_probs.shape[0])
    for start in range(0, n, chunk_rows):
        yield (
            start,
            as_float32(pred_probs[start : start + chunk_rows]),
        )


def check_label_error_inputs(
    labels: ArrayLike,
    pred_probs: Any,
    *,
    atol: float = 1e-2,
    chunk_rows: int = _DEFAULT_CHUNK,
) -> tuple[NDArray[np.int64], Any]:
    """Validate labels and an (N, K) probability matrix; return labels as int64.

    Checks, in order: 2-d numeric matrix; same length as ``labels``; at least 2
    classes; labels in ``[0, K)``, at least 2 of them different; entries finite and in ``[0, 1]`` (to 1e-6, cleanlab's own rule). Rows need
    not sum to 1: published probabilities stored as float16 sum to 0.986–1.0003
    and cleanlab accepts them, so rows off by more than ``atol`` only raise one
    :class:`ProbabilitySumWarning` naming the worst row. The matrix is scanned in
    row chunks and returned unchanged (no float32 copy of a large array).
    """
    probs = pred_probs if hasattr(pred_probs, "shape") else np.asarray(pred_probs)
    if len(probs.shape) != 2:
        raise InputValidationError(
            f"pred_probs must have shape (n_samples, n_classes). Got {tuple(probs.shape)}."
        )
    if np.dtype(probs.dtype).kind not in "fiu":
        raise InputValidationError(
            f"pred_probs must be numeric. Got dtype {probs.dtype}."
        )
    n, k = int(probs.shape[0]), int(probs.shape[1])
    arr = np.asarray(labels)
    if arr.ndim == 1 and arr.shape[0] != n:
        raise InputValidationError(
            f"labels and pred_probs must have the same length: {arr.shape[0]} labels, "
            f"{n} rows of probabilities. Pass the probabilities of the same examples."
        )
    if k < 2:
        raise InputValidationError(
            f"pred_probs must have at least 2 classes (columns). Got {k}."
        )
    y = check_labels(arr, n_classes=k, name="labels")
    if y.size and (y == y[0]).all():
        raise InputValidationError(
            f"labels must contain at least 2 different classes (as cleanlab requires); "
            f"every one of the {y.size} labels is {int(y[0])}."
        )
    # A class no example is given (real subsets of ImageNet have them) is kept,
    # as cleanlab keeps it: no example is confidently counted in it, and dropping
    # its column would change the other classes' answers.
    if atol != float("inf"):  # inf: structure only (callers that scan rows themselves)
        _validate_and_scan(y, probs, atol, chunk_rows)
    return y, probs


def _validate_and_scan(
    labels: NDArray[np.int64], probs: Any, atol: float, chunk_rows: int
) -> RowStats:
    """One pass: row checks, self-confidence and argmax (ties → lowest class)."""
    n = labels.shape[0]
    sc = np.empty(n, dtype=np.float32)
    am = np.empty(n, dtype=np.int64)
    worst = _WorstRow()
    for start, c in iter_row_chunks(probs, chunk_rows):
        if atol != float("inf"):
            _check_prob_rows(c, start, atol, worst)
        stop = start + c.shape[0]
        sc[start:stop] = c[np.arange(c.shape[0]), labels[start:stop]]
        am[start:stop] = c.argmax(axis=1)
    if worst.n_off:
        warnings.warn(
            f"pred_probs rows do not all sum to 1: row {worst.row} sums to "
            f"{worst.total:.4f} ({worst.n_off} of {n} rows off by more than {atol:g}, "
            "as in probabilities stored at low precision); used as given, as cleanlab "
            "does. If these are scores, apply a softmax first.",
            ProbabilitySumWarning,
            stacklevel=3,
        )
    return RowStats(sc, am)


@dataclass(slots=True)
class _WorstRow:
    """The row whose sum is farthest from 1, over all chunks of one scan."""

    row: int = -1
    total: float = 1.0
    n_off: int = 0


def _check_prob_rows(
    chunk: NDArray[np.float32], start: int, atol: float, worst: _WorstRow
) -> None:
    """Refuse what cleanlab refuses; note rows whose sum is off (warned once).

    cleanlab (``assert_valid_inputs``) only requires every entry to lie in
    ``[0, 1]`` up to 1e-6 and does not look at row sums, so published float16
    probabilities whose rows sum to 0.986–1.0003 are valid input. NaN and
    infinities are refused as well: they pass cleanlab's min/max test but make
    every threshold meaningless.
    """
    if not np.isfinite(chunk).all():
        row = start + int(np.flatnonzero(~np.isfinite(chunk).all(axis=1))[0])
        raise InputValidationError(
            f"pred_probs contains NaN or infinite values (row {row})."
        )
    if (chunk < -_FPC).any():
        row = start + int(np.flatnonzero((chunk < -_FPC).any(axis=1))[0])
        raise InputValidationError(
            f"pred_probs contains negative values (row {row}); expected probabilities "
            "in [0, 1]. Apply a softmax to scores or logits first."
        )
    if (chunk > 1 + _FPC).any():
        row = start + int(np.flatnonzero((chunk > 1 + _FPC).any(axis=1))[0])
        raise InputValidationError(
            f"pred_probs contains values above 1 (row {row}); expected probabilities "
            "in [0, 1]. Apply a softmax to scores or logits first."
        )
    dev = np.abs(chunk.sum(axis=1, dtype=np.float64) - 1.0)
    off = dev > atol
    if off.any():
        i = int(dev.argmax())
        worst.n_off += int(off.sum())
        if dev[i] > abs(worst.total - 1.0) or worst.row < 0:
            worst.row = start + i
            worst.total = float(chunk[i].sum(dtype=np.float64))


# -- shared passes over the matrix ---------------------------------------------


def _row_stats(
    labels: NDArray[np.int64], pred_probs: Any, chunk_rows: int, given: RowStats | None
) -> RowStats:
    if given is not None:
        return given
    return _validate_and_scan(labels, pred_probs, float("inf"), chunk_rows)


def _thresholds(
    labels: NDArray[np.int64], self_conf: NDArray[np.float32], k: int, *, clip: bool
) -> NDArray[np.floating[Any]]:
    # np.mean over the same float32 values in the same order as cleanlab's
    # pred_probs[:, k][labels == k], so the thresholds match bit for bit; a class
    # without examples gets cleanlab's BIG_VALUE 2, which no probability reaches.
    t = np.asarray(
        [
            np.mean(self_conf[sel]) if (sel := labels == j).any() else _BIG_VALUE
            for j in range(k)
        ]
    )  # float32 means; float64 once BIG_VALUE (an int) joins them, as in cleanlab
    if clip:
        np.clip(t, _THRESHOLD_LOWER_BOUND, None, out=t)
    return t


@dataclass(frozen=True, slots=True)
class ConfidentJoint:
    """Raw confident joint and where its off-diagonal examples are.

    Attributes
    ----------
    counts : ndarray of shape (K, K)
        ``counts[i, j]`` = examples with given label ``i`` confidently counted as
        class ``j``, uncalibrated, with the diagonal raised to at least 1 as
        cleanlab 2.9's ``compute_confident_joint`` raises it (so no class has a
        zero noise-rate denominator, cleanlab issue 158).
    thresholds : ndarray of shape (K,)
        Per-class thresholds ``t_j = mean(pred_probs[labels == j, j])``.
    off_diagonal : ndarray of int
        Indices of confidently counted examples whose guess differs from the given label.
    guess : ndarray of shape (N,)
        Confident class per example, ``-1`` where no class is confident.
    """

    counts: NDArray[np.int64]
    thresholds: NDArray[np.floating[Any]]
    off_diagonal: NDArray[np.int64]
    guess: NDArray[np.int64]


def compute_confident_joint(
    labels: NDArray[np.int64],
    pred_probs: Any,
    *,
    clip_thresholds: bool = False,
    chunk_rows: int = _DEFAULT_CHUNK,
    _self_conf: NDArray[np.float32] | None = None,
) -> ConfidentJoint:
    """Confident joint C_{ỹ,y*} (uncalibrated), computed in row chunks.

    docs/algorithms.md#label-error-methods item 2:
    ``confident = pred_probs >= t - 1e-6``; the guess is the argmax when more than one
    class is confident, else the single confident class. ``clip_thresholds=True``
    applies cleanlab 2.9's lower bound (2e-6).
    """
    k = int(pred_probs.shape[1])
    sc = _self_conf
    if sc is None:
        sc = _row_stats(labels, pred_probs, chunk_rows, None).self_confidence
    t = _thresholds(labels, sc, k, clip=clip_thresholds)
    guess = np.full(labels.shape[0], -1, dtype=np.int64)
    for start, c in iter_row_chunks(pred_probs, chunk_rows):
        conf = c >= t - 1e-6
        ncf = conf.sum(axis=1)
        g = np.where(ncf > 1, c.argmax(axis=1), conf.argmax(axis=1))
        guess[start : start + c.shape[0]] = np.where(ncf > 0, g, -1)
    ok = guess >= 0
    # Built as the transpose of a (guess, given) table, like cleanlab's
    # confusion_matrix(...).T: calibration sums depend on the memory layout, and the
    # same (Fortran) layout makes the pruning counts match cleanlab's bit for bit.
    counts = np.bincount(guess[ok] * k + labels[ok], minlength=k * k).reshape(k, k).T
    np.fill_diagonal(counts, counts.diagonal().clip(min=1))
    off = np.flatnonzero(ok & (guess != labels))
    return ConfidentJoint(counts.astype(np.int64, order="K"), t, off, guess)


def _calibrated_prune_counts(
    labels: NDArray[np.int64],
    cj: NDArray[np.int64],
    min_examples_per_class: int,
    *,
    given: NDArray[Any] | None = None,
    num_to_remove_per_class: NDArray[np.int64] | None = None,
) -> NDArray[np.int64]:
    """Calibrated confident joint, transposed and adjusted as cleanlab does for
    pruning; a ``given`` (precomputed) confident joint is used as it is, and
    ``num_to_remove_per_class`` rescales the noise rates as cleanlab does."""
    from cleanlab.count import calibrate_confident_joint
    from cleanlab.filter import _keep_at_least_n_per_class
    from cleanlab.internal.util import round_preserving_row_totals

    if given is None:
        c = cj.copy(order="K")
        np.fill_diagonal(c, c.diagonal().clip(min=1))
        given = calibrate_confident_joint(c, labels)
    out = _keep_at_least_n_per_class(given.T, n=min_examples_per_class, frac_noise=1.0)
    if num_to_remove_per_class is not None:
        k = out.shape[0]
        # cleanlab's arithmetic, warnings and all: a class with no estimated
        # noise divides by zero there, and the engines must agree on it too
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            psy = out / np.sum(out, axis=1)
            noise_per_s = psy.sum(axis=1) - psy.diagonal()
            tmp = (psy.T * num_to_remove_per_class / noise_per_s).T
            np.fill_diagonal(
                tmp, np.bincount(labels, minlength=k) - num_to_remove_per_class
            )
            out = round_preserving_row_totals(tmp)
    return np.asarray(out, dtype=np.int64)


# -- the five methods ------------------------------------------------------------


@LABEL_ERROR_METHODS.register("argmax")
def _argmax(
    labels: NDArray[np.int64],
    pred_probs: Any,
    *,
    min_examples_per_class: int = 5,
    engine: Engine = "auto",
    chunk_rows: int = _DEFAULT_CHUNK,
    row_stats: RowStats | None = None,
) -> NDArray[np.bool_]:
    """C_confusion: error iff ``argmax(pred_probs_i) != labels_i`` (ties → lowest class)."""
    am = _row_stats(labels, pred_probs, chunk_rows, row_stats).argmax
    return np.asarray(am != labels)


@LABEL_ERROR_METHODS.register("confident-joint")
def _confident_joint(
    labels: NDArray[np.int64],
    pred_probs: Any,
    *,
    min_examples_per_class: int = 5,
    engine: Engine = "auto",
    chunk_rows: int = _DEFAULT_CHUNK,
    row_stats: RowStats | None = None,
) -> NDArray[np.bool_]:
    """C_{ỹ,y*}: the off-diagonal examples of the confident joint, method 2.

    See docs/algorithms.md#label-error-methods.
    """
    sc = _row_stats(labels, pred_probs, chunk_rows, row_stats).self_confidence
    cj = compute_confident_joint(
        labels, pred_probs, chunk_rows=chunk_rows, _self_conf=sc
    )
    mask = np.zeros(labels.shape[0], dtype=bool)
    mask[cj.off_diagonal] = True
    return mask


def _make_pruner(filter_by: str) -> LabelErrorMethod:
    def method(
        labels: NDArray[np.int64],
        pred_probs: Any,
        *,
        min_examples_per_class: int = 5,
        engine: Engine = "auto",
        chunk_rows: int = _DEFAULT_CHUNK,
        row_stats: RowStats | None = None,
        num_to_remove_per_class: NDArray[np.int64] | None = None,
        confident_joint: NDArray[Any] | None = None,
    ) -> NDArray[np.bool_]:
        n, k = int(pred_probs.shape[0]), int(pred_probs.shape[1])
        if engine == "auto":
            small = n * k <= _ELEMENTS_IN_MEMORY and not isinstance(
                pred_probs, np.memmap
            )
            engine = "cleanlab" if small else "chunked"
        opts = {
            "num_to_remove_per_class": num_to_remove_per_class,
            "confident_joint": confident_joint,
        }
        if engine == "cleanlab":
            return _prune_with_cleanlab(
                labels, pred_probs, filter_by, min_examples_per_class, **opts
            )
        if engine != "chunked":
            raise ConfigError(
                f"engine must be 'auto', 'cleanlab' or 'chunked'. Got {engine!r}."
            )
        stats = _row_stats(labels, pred_probs, chunk_rows, row_stats)
        return _prune_chunked(
            labels,
            pred_probs,
            filter_by,
            min_examples_per_class,
            chunk_rows,
            stats,
            **opts,
        )

    method.__doc__ = f"cleanlab ``filter_by={filter_by!r}``."
    return method


def _prune_with_cleanlab(
    labels: NDArray[np.int64],
    pred_probs: Any,
    filter_by: str,
    min_examples: int,
    *,
    num_to_remove_per_class: NDArray[np.int64] | None = None,
    confident_joint: NDArray[Any] | None = None,
) -> NDArray[np.bool_]:
    from cleanlab.filter import find_label_issues

    probs = np.ascontiguousarray(pred_probs, dtype=np.float32)
    with warnings.catch_warnings():
        # "May not flag all label issues in class k": reported via skipped classes instead.
        warnings.simplefilter("ignore")
        mask = find_label_issues(
            labels,
            probs,
            filter_by=filter_by,
            min_examples_per_class=min_examples,
            num_to_remove_per_class=None
            if num_to_remove_per_class is None
            else num_to_remove_per_class.tolist(),
            confident_joint=confident_joint,
            n_jobs=1,
        )
    return np.asarray(mask, dtype=bool)


def _prune_chunked(
    labels: NDArray[np.int64],
    pred_probs: Any,
    filter_by: str,
    min_examples: int,
    chunk_rows: int,
    stats: RowStats,
    *,
    num_to_remove_per_class: NDArray[np.int64] | None = None,
    confident_joint: NDArray[Any] | None = None,
) -> NDArray[np.bool_]:
    """Same result as cleanlab's find_label_issues, with O(N + n_k·K) extra memory."""
    n, k = int(pred_probs.shape[0]), int(pred_probs.shape[1])
    sc = stats.self_confidence
    raw = np.zeros((k, k), dtype=np.int64)
    if confident_joint is None:
        raw = compute_confident_joint(
            labels,
            pred_probs,
            clip_thresholds=True,
            chunk_rows=chunk_rows,
            _self_conf=sc,
        ).counts
    prune = _calibrated_prune_counts(
        labels,
        raw,
        min_examples,
        given=confident_joint,
        num_to_remove_per_class=num_to_remove_per_class,
    )
    by_class = np.zeros(n, dtype=bool)
    by_rate = np.zeros(n, dtype=bool)
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(k + 1))
    for c in range(k):
        rows = order[bounds[c] : bounds[c + 1]]
        if rows.size <= min_examples:
            continue
        if filter_by in ("prune_by_class", "both"):
            num = int(rows.size - prune[c, c])
            if num >= 1:
                by_class[rows[np.argsort(sc[rows])[:num]]] = True
        if filter_by in ("prune_by_noise_rate", "both"):
            by_rate[rows[_prune_class_by_rate(pred_probs, rows, c, prune[:, c])]] = True
    mask = {"prune_by_class": by_class, "prune_by_noise_rate": by_rate}.get(
        filter_by, by_class & by_rate
    )
    return _unset_where_given_is_argmax(mask, labels, pred_probs)


def _prune_class_by_rate(
    pred_probs: Any, rows: NDArray[np.int64], c: int, counts: NDArray[np.int64]
) -> NDArray[np.bool_]:
    sub = as_float32(pred_probs[rows])
    flagged = np.zeros(rows.size, dtype=bool)
    for j in np.flatnonzero(counts > 0):
        if j == c:
            continue
        margin = sub[:, j] - sub[:, c]
        flagged[np.argsort(-margin)[: int(counts[j])]] = True
    return flagged


def _unset_where_given_is_argmax(
    mask: NDArray[np.bool_], labels: NDArray[np.int64], pred_probs: Any
) -> NDArray[np.bool_]:
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return mask
    p = as_float32(pred_probs[idx])
    p[np.arange(idx.size), labels[idx]] += _FPC
    out = mask.copy()
    out[idx[p.argmax(axis=1) == labels[idx]]] = False
    return out


def _own_chunks(
    pred_probs: Any, chunk_rows: int
) -> Iterator[tuple[int, NDArray[np.float32]]]:
    """Row chunks as float32 that may be written to (never the caller's array)."""
    for start, c in iter_row_chunks(pred_probs, chunk_rows):
        yield start, (c.copy() if np.may_share_memory(c, pred_probs) else c)


@LABEL_ERROR_METHODS.register("predicted-neq-given")
def _predicted_neq_given(
    labels: NDArray[np.int64],
    pred_probs: Any,
    *,
    min_examples_per_class: int = 1,
    engine: Engine = "auto",
    chunk_rows: int = _DEFAULT_CHUNK,
    row_stats: RowStats | None = None,
) -> NDArray[np.bool_]:
    """cleanlab 2.9 ``predicted_neq_given``: argmax ≠ given, where a tie between
    the given label and another class goes to the given label (``argmax``
    breaks it toward the lowest class, as v0.1.0)."""
    out = np.empty(labels.shape[0], dtype=bool)
    for start, c in _own_chunks(pred_probs, chunk_rows):
        y = labels[start : start + c.shape[0]]
        c[np.arange(c.shape[0]), y] += _FPC
        out[start : start + c.shape[0]] = c.argmax(axis=1) != y
    return out


def _cleanlab_off_diagonal(
    labels: NDArray[np.int64], pred_probs: Any, chunk_rows: int, stats: RowStats
) -> NDArray[np.bool_]:
    """cleanlab 2.9's ``confident_learning`` mask: off-diagonal of the confident
    joint with clipped thresholds, unset where the given label is the argmax."""
    cj = compute_confident_joint(
        labels,
        pred_probs,
        clip_thresholds=True,
        chunk_rows=chunk_rows,
        _self_conf=stats.self_confidence,
    )
    mask = np.zeros(labels.shape[0], dtype=bool)
    mask[cj.off_diagonal] = True
    return _unset_where_given_is_argmax(mask, labels, pred_probs)


@LABEL_ERROR_METHODS.register("confident-learning")
def _confident_learning(
    labels: NDArray[np.int64],
    pred_probs: Any,
    *,
    min_examples_per_class: int = 1,
    engine: Engine = "auto",
    chunk_rows: int = _DEFAULT_CHUNK,
    row_stats: RowStats | None = None,
) -> NDArray[np.bool_]:
    """cleanlab 2.9 ``confident_learning`` (``confident-joint`` is v0.1.0's)."""
    stats = _row_stats(labels, pred_probs, chunk_rows, row_stats)
    return _cleanlab_off_diagonal(labels, pred_probs, chunk_rows, stats)


def _make_low_score(score: str) -> LabelErrorMethod:
    def method(
        labels: NDArray[np.int64],
        pred_probs: Any,
        *,
        min_examples_per_class: int = 1,
        engine: Engine = "auto",
        chunk_rows: int = _DEFAULT_CHUNK,
        row_stats: RowStats | None = None,
    ) -> NDArray[np.bool_]:
        stats = _row_stats(labels, pred_probs, chunk_rows, row_stats)
        n_issues = int(
            _cleanlab_off_diagonal(labels, pred_probs, chunk_rows, stats).sum()
        )
        scores = stats.self_confidence
        if score == "normalized_margin":
            scores = np.empty(labels.shape[0], dtype=np.float32)
            for start, c in _own_chunks(pred_probs, chunk_rows):
                rows = np.arange(c.shape[0])
                y = labels[start : start + c.shape[0]]
                sc = c[rows, y]
                c[rows, y] = -np.inf
                scores[start : start + c.shape[0]] = (sc - c.max(axis=1) + 1) / 2
        mask = np.zeros(labels.shape[0], dtype=bool)
        # np.argsort's default sort on the same float32 scores, as cleanlab
        mask[np.argsort(scores)[:n_issues]] = True
        return mask

    method.__doc__ = (
        f"cleanlab 2.9 ``low_{score}``: the examples with the lowest {score} "
        "score, as many as ``confident-learning`` flags."
    )
    return method


LABEL_ERROR_METHODS.add("low-self-confidence", _make_low_score("self_confidence"))
LABEL_ERROR_METHODS.add("low-normalized-margin", _make_low_score("normalized_margin"))
LABEL_ERROR_METHODS.add("prune-by-class", _make_pruner("prune_by_class"))
LABEL_ERROR_METHODS.add("prune-by-noise-rate", _make_pruner("prune_by_noise_rate"))
LABEL_ERROR_METHODS.add("both", _make_pruner("both"))


#: cleanlab 2.9's ``filter_by`` spellings → the method that behaves as cleanlab's.
CLEANLAB_FILTERS: dict[str, str] = {
    "prune_by_noise_rate": "prune-by-noise-rate",
    "prune_by_class": "prune-by-class",
    "both": "both",
    "confident_learning": "confident-learning",
    "predicted_neq_given": "predicted-neq-given",
    "low_self_confidence": "low-self-confidence",
    "low_normalized_margin": "low-normalized-margin",
}
#: Methods that take ``num_to_remove_per_class`` and ``confident_joint`` (as in cleanlab).
_PRUNERS = ("prune-by-class", "prune-by-noise-rate", "both")
#: v0.1.0's MIN_NUM_PER_CLASS, which the paper's CIFAR-10 benchmark ran with.
V010_MIN_EXAMPLES = 5


def resolve_method(
    method: str | None = None, filter_by: str | None = None
) -> tuple[str, int]:
    """The registered method to run and its default ``min_examples_per_class``.

    cleanlab's spellings (``filter_by="prune_by_noise_rate"``, or the same name as
    ``method``) run the method that behaves as cleanlab 2.9's, with cleanlab's
    default minimum class size 1. retest's spellings (``prune-by-noise-rate``,
    ``both`` as ``method``) keep v0.1.0's 5, with which the paper's benchmark ran:
    classes of at most 5 examples are not pruned.

    Examples
    --------
    >>> resolve_method(filter_by="prune_by_noise_rate"), resolve_method("both")
    (('prune-by-noise-rate', 1), ('both', 5))
    """
    if method is not None and filter_by is not None:
        raise ConfigError(
            f"give method or filter_by, not both. Got method={method!r}, "
            f"filter_by={filter_by!r}."
        )
    if filter_by is not None:
        if filter_by not in CLEANLAB_FILTERS:
            raise ConfigError(
                f"filter_by must be one of cleanlab's {', '.join(CLEANLAB_FILTERS)}. "
                f"Got {filter_by!r}."
            )
        return CLEANLAB_FILTERS[filter_by], 1
    name = method or "prune-by-noise-rate"
    if name in CLEANLAB_FILTERS and name != "both":
        return CLEANLAB_FILTERS[name], 1
    LABEL_ERROR_METHODS.get(name)  # unknown names fail with suggestions
    return name, V010_MIN_EXAMPLES


def _check_prune_options(
    name: str,
    k: int,
    labels: NDArray[np.int64],
    num_to_remove_per_class: ArrayLike | None,
    confident_joint: ArrayLike | None,
) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    if num_to_remove_per_class is None and confident_joint is None:
        return opts
    if name not in _PRUNERS:
        raise ConfigError(
            f"num_to_remove_per_class and confident_joint apply to "
            f"{', '.join(_PRUNERS)} (as in cleanlab). Got method {name!r}."
        )
    if num_to_remove_per_class is not None:
        r = np.asarray(num_to_remove_per_class)
        if r.ndim == 0:  # one number for every class, as cleanlab broadcasts it
            r = np.full(k, r)
        counts = np.bincount(labels, minlength=k)
        if (
            r.shape != (k,)
            or r.dtype.kind not in "iu"
            or (r < 0).any()
            or (r > counts).any()
        ):
            raise ConfigError(
                f"num_to_remove_per_class must hold {k} whole numbers, each between 0 "
                f"and its class's number of examples {counts.tolist()}. Got "
                f"{np.asarray(num_to_remove_per_class).tolist()!r}."
            )
        opts["num_to_remove_per_class"] = r.astype(np.int64)
    if confident_joint is not None:
        cj = np.asarray(confident_joint)
        if cj.shape != (k, k) or cj.dtype.kind not in "iuf" or (cj < 0).any():
            raise ConfigError(
                f"confident_joint must be a ({k}, {k}) matrix of non-negative counts "
                f"(cleanlab.count.compute_confident_joint). Got shape {cj.shape}."
            )
        opts["confident_joint"] = cj
    return opts


_MAX_MIN_EXAMPLES = 2**31 - 1
"""Above it numpy's int64 arithmetic inside the pruners overflows (cleanlab's too)."""


def find_label_errors(
    labels: ArrayLike,
    pred_probs: Any,
    *,
    method: str | None = None,
    filter_by: str | None = None,
    min_examples_per_class: int | None = None,
    num_to_remove_per_class: ArrayLike | None = None,
    confident_joint: ArrayLike | None = None,
    engine: Engine = "auto",
    atol: float = 1e-2,
    chunk_rows: int = _DEFAULT_CHUNK,
) -> NDArray[np.bool_]:
    """Boolean mask of suspected label errors (True = probably mislabeled).

    Parameters
    ----------
    labels : array-like of shape (n_samples,)
        Given labels, class ids in ``[0, n_classes)``; a class may have no
        example (it is kept, as cleanlab keeps it).
    pred_probs : ndarray of shape (n_samples, n_classes)
        Out-of-sample predicted probabilities (float16/32/64, may be memory-mapped).
    method : str
        A name in ``LABEL_ERROR_METHODS``: the paper's ``argmax``,
        ``confident-joint``, ``prune-by-class``, ``prune-by-noise-rate``
        (default) or ``both``; cleanlab 2.9's ``predicted-neq-given``,
        ``confident-learning``, ``low-self-confidence``,
        ``low-normalized-margin``; or a cleanlab spelling (see ``filter_by``).
    filter_by : str, optional
        cleanlab's name instead of ``method``: ``prune_by_noise_rate``,
        ``prune_by_class``, ``both``, ``confident_learning``,
        ``predicted_neq_given``, ``low_self_confidence``,
        ``low_normalized_margin``; the answer is cleanlab 2.9's.
    min_examples_per_class : int, optional
        Classes with at most this many given labels are not pruned. Default: 1
        (cleanlab's) for cleanlab's spellings, 5 for retest's: v0.1.0's value,
        with which the paper's CIFAR-10 benchmark ran.
    num_to_remove_per_class : int or array-like of int, shape (n_classes,), optional
        Pruners only: how many examples to flag per given class (cleanlab's
        option; one number applies to every class).
    confident_joint : ndarray of shape (n_classes, n_classes), optional
        Pruners only: a precomputed (calibrated) confident joint, used as given.
    engine : {"auto", "cleanlab", "chunked"}
        For the pruning methods: cleanlab on an in-memory float32 copy, or the
        chunked equivalent (memory-bounded). ``auto`` picks cleanlab up to 2**24 entries.
    atol : float
        Row sums further than this from 1 give a :class:`ProbabilitySumWarning`
        (they are still used, as cleanlab uses them).
    chunk_rows : int
        Rows read at a time by the validation scan and the chunked engine.

    Returns
    -------
    ndarray of bool, shape (n_samples,)
        True where the given label is probably wrong; order the flagged rows
        with :func:`~retest.label_errors.ranking.rank_label_errors`.

    Raises
    ------
    InputValidationError
        Labels and probabilities that do not match in length or classes, or
        entries that are not finite values in [0, 1].
    UnknownNameError
        ``method`` is not a registered method (with close matches).
    ConfigError
        A negative ``min_examples_per_class``, ``chunk_rows`` below 1, an
        unknown ``filter_by``, or pruning options for a method without them.

    Examples
    --------
    >>> from retest import find_label_errors
    >>> import numpy as np
    >>> p = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.2, 0.8]])
    >>> find_label_errors([0, 1, 1, 1], p, method="argmax").tolist()
    [False, True, False, False]
    >>> tie = np.array([[0.5, 0.5], [0.5, 0.5]])  # argmax: lowest class; cleanlab: given
    >>> find_label_errors([1, 0], tie, method="argmax").tolist()
    [True, False]
    >>> find_label_errors([1, 0], tie, filter_by="predicted_neq_given").tolist()
    [False, False]
    """
    name, default_min = resolve_method(method, filter_by)
    fn = LABEL_ERROR_METHODS.get(name)
    if min_examples_per_class is None:
        min_examples_per_class = default_min
    if not 0 <= min_examples_per_class <= _MAX_MIN_EXAMPLES:
        raise ConfigError(
            f"min_examples_per_class must be between 0 and {_MAX_MIN_EXAMPLES} (a "
            f"class's example count). Got {min_examples_per_class}."
        )
    if chunk_rows < 1:
        raise ConfigError(f"chunk_rows must be >= 1. Got {chunk_rows}.")
    y, probs = check_label_error_inputs(
        labels, pred_probs, atol=float("inf"), chunk_rows=chunk_rows
    )  # structure only: the row checks run in the scan below
    opts = _check_prune_options(
        name, int(probs.shape[1]), y, num_to_remove_per_class, confident_joint
    )
    stats = _validate_and_scan(y, probs, atol, chunk_rows)
    return fn(
        y,
        probs,
        min_examples_per_class=min_examples_per_class,
        engine=engine,
        chunk_rows=chunk_rows,
        row_stats=stats,
        **opts,
    )
