"""The paper's results table: original vs new accuracy of every model (Table 1/11).

Pure: labels and predictions in, a frozen :class:`ComparisonTable` out. Rows are
ordered by original rank; every number is kept unrounded (formatting belongs to
:mod:`retest.stages.report._report`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._validation import check_not_shifted
from retest.errors import DroppedModelWarning, InputValidationError
from retest.evaluate.intervals import difference_interval
from retest.evaluate.metrics import Accuracy, accuracy, error_ratio, rank
from retest.records import LabeledSet, Predictions

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ComparisonRow", "ComparisonTable", "Testbed", "as_testbed", "compare"]

Testbed: TypeAlias = Mapping[str, Predictions] | Sequence[Predictions]


@dataclass(frozen=True, slots=True)
class ComparisonRow:
    """One model: accuracies on both sets, the gap (fractions) and ranks."""

    model: str
    orig: Accuracy
    new: Accuracy
    gap: float
    gap_lo: float
    gap_hi: float
    rank_orig: int
    rank_new: int
    rank_delta: int
    error_ratio: float

    def as_dict(self) -> dict[str, Any]:
        """Flat JSON-ready dict (fractions, unrounded)."""
        er = self.error_ratio
        return {
            "model": self.model,
            "orig_k": self.orig.k,
            "orig_n": self.orig.n,
            "orig_acc": self.orig.value,
            "orig_lo": self.orig.lo,
            "orig_hi": self.orig.hi,
            "new_k": self.new.k,
            "new_n": self.new.n,
            "new_acc": self.new.value,
            "new_lo": self.new.lo,
            "new_hi": self.new.hi,
            "gap": self.gap,
            "gap_lo": self.gap_lo,
            "gap_hi": self.gap_hi,
            "rank_orig": self.rank_orig,
            "rank_new": self.rank_new,
            "rank_delta": self.rank_delta,
            "error_ratio": er if np.isfinite(er) else None,
        }


@dataclass(frozen=True, slots=True)
class ComparisonTable:
    """Rows ordered by original rank, plus what was compared and what was dropped."""

    rows: tuple[ComparisonRow, ...]
    metric: str
    confidence: float
    dataset_orig: str
    dataset_new: str
    dropped: tuple[str, ...] = ()

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(r.model for r in self.rows)

    def column(self, name: str) -> NDArray[Any]:
        """One column of :meth:`ComparisonRow.as_dict` as an array (e.g. ``"orig_acc"``)."""
        return np.array([r.as_dict()[name] for r in self.rows])

    def row(self, model: str) -> ComparisonRow:
        for r in self.rows:
            if r.model == model:
                return r
        raise KeyError(model)

    def to_records(self) -> list[dict[str, Any]]:
        return [r.as_dict() for r in self.rows]

    def to_frame(self) -> pd.DataFrame:
        """The table as a pandas DataFrame (one row per model)."""
        import pandas as pd

        return pd.DataFrame.from_records(self.to_records())


def as_testbed(testbed: Testbed, *, name: str = "testbed") -> dict[str, Predictions]:
    """Normalise a mapping or sequence of predictions into ``{model: Predictions}``.

    Raises
    ------
    InputValidationError
        If ``testbed`` is neither, holds something else than Predictions, or a
        sequence holds the same model name twice.
    """
    if isinstance(testbed, (str, bytes)) or not isinstance(
        testbed, (Mapping, Sequence)
    ):
        raise InputValidationError(
            f"{name} must be a mapping model name → Predictions or a list of "
            f"Predictions. Got {type(testbed).__name__}."
        )
    items = testbed.items() if isinstance(testbed, Mapping) else enumerate(testbed)
    for key, p in items:
        if not isinstance(p, Predictions):
            raise InputValidationError(
                f"{name}[{key!r}] is a {type(p).__name__}, not a Predictions; wrap "
                "it with Predictions.from_labels / from_scores."
            )
    if isinstance(testbed, Mapping):
        return dict(testbed)
    out: dict[str, Predictions] = {}
    for p in testbed:
        if p.model in out:
            raise InputValidationError(
                f"{name}: duplicate model name {p.model!r}; every model must appear once. "
                "Rename one of them."
            )
        out[p.model] = p
    return out


def _labels(labels: LabeledSet | ArrayLike) -> tuple[NDArray[np.int64], str | None]:
    if isinstance(labels, LabeledSet):
        return labels.labels, labels.name
    return np.asarray(labels), None


def _accuracies(
    labels: NDArray[np.int64],
    testbed: Mapping[str, Predictions],
    names: Sequence[str],
    what: str,
    **kw: Any,
) -> list[Accuracy]:
    out = []
    for m in names:
        try:
            out.append(accuracy(labels, testbed[m], **kw))
        except InputValidationError as err:
            raise InputValidationError(f"{what} test set: {err}") from None
    return out


def _check_not_shifted(
    labels: NDArray[np.int64],
    testbed: Mapping[str, Predictions],
    names: Sequence[str],
    what: str,
) -> None:
    """1-based labels against 0-based predicted classes (K not known)."""
    if any(testbed[m].n_classes for m in names):  # scores fix K: range checks catch it
        return
    top = max((int(testbed[m].topk.max()) for m in names if testbed[m].n), default=-1)
    check_not_shifted(np.asarray(labels), top, f"labels of the {what} test set")


def compare(
    labels_orig: LabeledSet | ArrayLike,
    labels_new: LabeledSet | ArrayLike,
    testbed_orig: Testbed,
    testbed_new: Testbed,
    *,
    metric: str = "top1",
    confidence: float = 0.95,
    interval: str = "clopper-pearson",
    n_classes: int | None = None,
) -> ComparisonTable:
    """Evaluate every model on both test sets and build the comparison table.

    Models present in only one testbed are dropped with a
    :class:`~retest.errors.DroppedModelWarning` that lists them.

    Parameters
    ----------
    labels_orig, labels_new : LabeledSet or array-like of int
        True classes of the original and new test sets.
    testbed_orig, testbed_new : mapping model → Predictions, or sequence of Predictions
        Predictions of each model on each test set (same example order as the labels).
    metric : {"top1", "top5"}
        Correctness criterion (see :data:`retest.evaluate.metrics.METRICS`).
    confidence : float
        Level of every interval.
    n_classes : int, optional
        Number of classes. Without it (and without score matrices), labels that
        look 1-based against the predictions (no class 0, largest label one more
        than the largest predicted class) are refused.

    Returns
    -------
    ComparisonTable
        Rows ordered by original rank (1 = best).
    """
    y_o, name_o = _labels(labels_orig)
    y_n, name_n = _labels(labels_new)
    tb_o = as_testbed(testbed_orig, name="original testbed")
    tb_n = as_testbed(testbed_new, name="new testbed")
    only_o = sorted(set(tb_o) - set(tb_n))
    only_n = sorted(set(tb_n) - set(tb_o))
    dropped = tuple(only_o + only_n)
    if dropped:
        parts = []
        if only_o:
            parts.append("only on the original set: " + ", ".join(only_o))
        if only_n:
            parts.append("only on the new set: " + ", ".join(only_n))
        warnings.warn(
            f"dropped {len(dropped)} model(s) present on one test set only ("
            + "; ".join(parts)
            + ").",
            DroppedModelWarning,
            stacklevel=2,
        )
    names = sorted(set(tb_o) & set(tb_n))
    if not names:
        raise InputValidationError(
            "no model has predictions on both test sets; check that the two "
            "prediction folders use the same model names."
        )
    kw: dict[str, Any] = {
        "metric": metric,
        "confidence": confidence,
        "interval": interval,
    }
    if n_classes is None:
        _check_not_shifted(y_o, tb_o, names, "original")
        _check_not_shifted(y_n, tb_n, names, "new")
    acc_o = _accuracies(y_o, tb_o, names, "original", **kw)
    acc_n = _accuracies(y_n, tb_n, names, "new", **kw)
    return _build(
        acc_o,
        acc_n,
        names,
        metric,
        confidence,
        interval,
        dropped,
        name_o or _dataset(tb_o, names, "original"),
        name_n or _dataset(tb_n, names, "new"),
    )


def _dataset(tb: Mapping[str, Predictions], names: Sequence[str], default: str) -> str:
    ds = {tb[m].dataset for m in names}
    return ds.pop() if len(ds) == 1 else default


def _build(
    acc_o: list[Accuracy],
    acc_n: list[Accuracy],
    names: list[str],
    metric: str,
    confidence: float,
    interval: str,
    dropped: tuple[str, ...],
    ds_o: str,
    ds_n: str,
) -> ComparisonTable:
    k1 = np.array([a.k for a in acc_o])
    n1 = np.array([a.n for a in acc_o])
    k2 = np.array([a.k for a in acc_n])
    n2 = np.array([a.n for a in acc_n])
    gap, g_lo, g_hi = difference_interval(
        k1, n1, k2, n2, confidence=confidence, interval=interval
    )
    r_o = rank(k1 / n1, names)
    r_n = rank(k2 / n2, names)
    ratio = error_ratio(k1 / n1, k2 / n2)
    rows = [
        ComparisonRow(
            model=m,
            orig=acc_o[i],
            new=acc_n[i],
            gap=float(gap[i]),
            gap_lo=float(g_lo[i]),
            gap_hi=float(g_hi[i]),
            rank_orig=int(r_o[i]),
            rank_new=int(r_n[i]),
            rank_delta=int(r_o[i] - r_n[i]),
            error_ratio=float(ratio[i]),
        )
        for i, m in enumerate(names)
    ]
    rows.sort(key=lambda r: r.rank_orig)
    return ComparisonTable(tuple(rows), metric, confidence, ds_o, ds_n, dropped)
