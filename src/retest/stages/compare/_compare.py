"""The ``compare`` stage: prediction folders + label files → table, fit, figure.

Reads both testbeds, checks every file against its labels (so a bad file is
named in the error), builds the comparison table, fits new vs original accuracy
with a bootstrap, and writes the report. Re-running with the same inputs and
seed rewrites identical files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from retest._output import RULES, check_output, claim_output_dir
from retest._progress import ProgressCallback
from retest._validation import (
    check_fraction,
    check_not_shifted,
    looks_one_based,
    one_based_message,
)
from retest.datasets.predictions import (
    list_prediction_files,
    read_labels,
    read_model_names,
    read_predictions,
)
from retest.errors import ConfigError, InputValidationError, StageError
from retest.evaluate.fits import AXES, LinearFit, fit_new_vs_orig
from retest.evaluate.metrics import METRICS
from retest.evaluate.table import ComparisonTable, compare
from retest.records import Predictions
from retest.stages.report import write_report

__all__ = ["CompareResult", "check_compare_options", "fit_table", "run_compare"]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class CompareResult:
    """What :func:`run_compare` computed and where it wrote it."""

    table: ComparisonTable
    fit: LinearFit
    paths: dict[str, Path]


def _dataset_name(labels_path: Path) -> str:
    stem = labels_path.stem
    return stem[: -len("_labels")] if stem.endswith("_labels") else stem


def _read_side(
    directory: PathLike,
    labels: NDArray[np.int64],
    labels_path: Path,
    *,
    dataset: str,
    model_names: Mapping[str, str] | None,
    metric: str,
) -> tuple[dict[str, Predictions], dict[str, Path]]:
    files = list_prediction_files(directory, model_names=model_names)
    need = int(getattr(METRICS.get(metric), "required_k", 1))
    testbed = {}
    for m, f in files.items():
        p = read_predictions(f, model=m, dataset=dataset)
        if p.n != labels.shape[0]:
            raise InputValidationError(
                f"{f}: {p.n} predictions but {labels_path} has {labels.shape[0]} labels; "
                "predictions and labels must cover the same images in the same order."
            )
        if p.k < need and (p.n_classes is None or p.k < p.n_classes):
            raise InputValidationError(
                f"{f}: metric {metric!r} needs the top {need} classes per image but "
                f"the file has {p.k}. Use --metric top1 or top-{need} predictions/scores."
            )
        testbed[m] = p
    return testbed, files


def _check_classes(
    n_classes: int,
    labels: Sequence[tuple[NDArray[np.int64], Path]],
    files: Mapping[str, Path],
    testbeds: Sequence[Mapping[str, Predictions]],
) -> None:
    for y, path in labels:
        if looks_one_based(y, n_classes):
            raise InputValidationError(
                one_based_message(f"labels in {path}", n_classes)
            )
        if int(y.max()) >= n_classes:
            raise InputValidationError(
                f"{path}: labels must be class ids in [0, {n_classes}). Got max "
                f"{int(y.max())}. Fix the labels or pass the right --num-classes."
            )
    for tb in testbeds:
        for m, p in tb.items():
            if p.n_classes is not None and p.n_classes != n_classes:
                raise InputValidationError(
                    f"{files[m]}: scores for {p.n_classes} classes, expected {n_classes}."
                )
            if int(p.topk.max()) >= n_classes:
                raise InputValidationError(
                    f"{files[m]}: predicted class {int(p.topk.max())} is outside "
                    f"[0, {n_classes}). Fix the file or pass the right --num-classes."
                )


def _check_not_shifted(
    labels: NDArray[np.int64],
    labels_path: Path,
    testbed: Mapping[str, Predictions],
    n_classes: int,
) -> None:
    """Refuse labels numbered 1..K against predictions numbered 0..K-1.

    Without ``--num-classes`` or score matrices K is inferred from the labels
    themselves, so 1-based labels would pass every range check and give each
    model a near-zero accuracy with a clean exit. The tell: class 0 never occurs
    among the labels, and the largest label is one more than the largest
    predicted class.
    """
    if int(labels.max()) < n_classes - 1:  # K given: labels fit 0..K-1 as they are
        return
    check_not_shifted(
        labels,
        max((int(p.topk.max()) for p in testbed.values()), default=-1),
        f"labels in {labels_path}",
        hint=" If class 0 really never occurs, pass --num-classes.",
    )


def _infer_classes(
    n_classes: int | None,
    labels: Sequence[NDArray[np.int64]],
    testbeds: Sequence[Mapping[str, Predictions]],
) -> int:
    if n_classes is not None:
        return int(n_classes)
    from_scores = {p.n_classes for tb in testbeds for p in tb.values() if p.n_classes}
    if len(from_scores) == 1:
        return int(from_scores.pop())
    # Without score matrices K is the largest label + 1 over both sets.
    return max(int(y.max()) for y in labels) + 1


def fit_table(
    table: ComparisonTable,
    *,
    axes: str = "linear",
    n_boot: int = 100_000,
    random_state: int = 0,
    progress: ProgressCallback | None = None,
) -> LinearFit:
    """Fit new vs original accuracy over the table's models (see ``fit_new_vs_orig``)."""
    return fit_new_vs_orig(
        table.column("orig_acc"),
        table.column("new_acc"),
        names=table.models,
        axes=axes,
        n_orig=table.column("orig_n"),
        n_new=table.column("new_n"),
        n_boot=n_boot,
        confidence=table.confidence,
        random_state=random_state,
        progress=progress,
    )


MAX_CLASSES = 1_000_000
"""More classes than any benchmark has (ImageNet-21k: 21,841)."""


def check_compare_options(
    *,
    metric: str = "top1",
    axes: str = "probit",
    confidence: float = 0.95,
    num_classes: int | None = None,
    name_orig: str | None = None,
    name_new: str | None = None,
) -> None:
    """Refuse a bad option before any work: the CLI calls it before ``--example``
    computes its testbed, :func:`run_compare` before reading files."""
    from retest.names import validate_person_name

    METRICS.get(metric)
    AXES.get(axes)
    check_fraction(confidence, "confidence", closed="neither")
    if num_classes is not None and not 1 <= num_classes <= MAX_CLASSES:
        raise ConfigError(
            f"num_classes must be 1 to {MAX_CLASSES:,}. Got {num_classes}."
        )
    for flag, name in (("name_orig", name_orig), ("name_new", name_new)):
        if name is not None:  # shown in the table and the figure: one line of text
            validate_person_name(name, f"{flag} (a test set's)")


def run_compare(
    *,
    labels_orig: PathLike,
    labels_new: PathLike,
    predictions_orig: PathLike,
    predictions_new: PathLike,
    out: PathLike,
    model_names: PathLike | None = None,
    metric: str = "top1",
    axes: str = "linear",
    confidence: float = 0.95,
    n_boot: int = 100_000,
    seed: int = 0,
    num_classes: int | None = None,
    name_orig: str | None = None,
    name_new: str | None = None,
    label_models: Sequence[str] = (),
    figure_formats: Sequence[str] = ("png", "pdf"),
    progress: ProgressCallback | None = None,
) -> CompareResult:
    """Compare a testbed on an original and a new test set and write the report.

    Models present in one folder only are dropped with a
    :class:`~retest.errors.DroppedModelWarning`. The number of classes is
    ``num_classes``, else the width of the score matrices, else the largest label
    + 1 over both label files; labels and predictions outside ``[0, K)`` are errors
    naming the file. Test-set names (table title, figure axes) default to the
    labels file names without ``_labels`` and the suffix.

    Returns
    -------
    CompareResult
        The table, the fit and the written paths (see ``write_report``).
    """
    check_compare_options(
        metric=metric,
        axes=axes,
        confidence=confidence,
        num_classes=num_classes,
        name_orig=name_orig,
        name_new=name_new,
    )
    check_output(out, RULES["compare"])
    lp_o, lp_n = Path(labels_orig), Path(labels_new)
    y_o, y_n = read_labels(lp_o), read_labels(lp_n)
    names = read_model_names(model_names) if model_names is not None else None
    ds_o, ds_n = _dataset_name(lp_o), _dataset_name(lp_n)
    ds_o, ds_n = name_orig or ds_o, name_new or ds_n
    tb_o, f_o = _read_side(
        predictions_orig, y_o, lp_o, dataset=ds_o, model_names=names, metric=metric
    )
    tb_n, f_n = _read_side(
        predictions_new, y_n, lp_n, dataset=ds_n, model_names=names, metric=metric
    )
    k = _infer_classes(num_classes, [y_o, y_n], [tb_o, tb_n])
    if num_classes is None:
        _check_not_shifted(y_o, lp_o, tb_o, k)
        _check_not_shifted(y_n, lp_n, tb_n, k)
    _check_classes(k, [(y_o, lp_o), (y_n, lp_n)], f_o, [tb_o])
    _check_classes(k, [], f_n, [tb_n])
    table = compare(
        y_o, y_n, tb_o, tb_n, metric=metric, confidence=confidence, n_classes=k
    )
    unknown = sorted(set(label_models) - set(table.models))
    if unknown:
        raise InputValidationError(
            f"--label names models that are not in the table: {', '.join(unknown)}."
        )
    fit = fit_table(
        table, axes=axes, n_boot=n_boot, random_state=seed, progress=progress
    )
    try:
        claim_output_dir(out, RULES["compare"])
        paths = write_report(
            table, fit, out, label_models=label_models, figure_formats=figure_formats
        )
    except OSError as err:
        raise StageError(
            f"cannot write the comparison report to {out}: {err.strerror or err}. "
            "Choose another --out or fix its permissions."
        ) from None
    return CompareResult(table, fit, paths)
