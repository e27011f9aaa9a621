"""The ``label-errors`` stage: find, rank and report suspected label errors.

Inputs are resolved into a :class:`LabelErrorInputs` (labels + an (N, K)
probability matrix + optional true labels, images and class names) by
:func:`load_label_error_inputs`; a project-based resolver (a revision, the
original test set) only needs to build the same record. :func:`run_label_errors`
then writes, atomically, into ``out_dir``:

``label_errors.csv`` / ``label_errors.json``
    Every flagged example, most suspicious first: rank, index, given label,
    suggested label, score (label quality, lower = worse), self-confidence,
    probability of the suggested class (+ class names when known).
``report.json``
    Method, counts, estimated errors per class (confident learning), the
    detection report (precision / recall / F1) when true labels are known, and
    where the probabilities came from (file or ensemble of which models).
``contact_sheet.png``
    The top suspects with given vs suggested class, when images are given.

Rerunning with the same inputs rewrites identical files (idempotent).
"""

from __future__ import annotations

import csv
import io
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest._atomic import atomic_write_bytes
from retest._output import RULES, check_output, claim_output_dir
from retest._validation import check_class_names, check_labels
from retest.datasets.npy import load_npy
from retest.datasets.predictions import read_labels, read_testbed
from retest.errors import InputValidationError, StageError
from retest.label_errors.ensemble import ensemble_pred_probs
from retest.label_errors.finders import (
    ProbabilitySumWarning,
    check_label_error_inputs,
    find_label_errors,
    resolve_method,
)
from retest.label_errors.ranking import (
    DetectionReport,
    LabelError,
    RankBy,
    detection_report,
    estimate_noise,
    rank_label_errors,
    resolve_rank_by,
)

__all__ = [
    "LabelErrorInputs",
    "LabelErrorRun",
    "NpyFoldCache",
    "load_label_error_inputs",
    "run_label_errors",
    "suspect_row",
]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class LabelErrorInputs:
    """Everything the stage needs, already loaded and length-checked."""

    labels: NDArray[np.int64]
    pred_probs: Any
    source: dict[str, Any]
    true_labels: NDArray[np.int64] | None = None
    images: NDArray[np.uint8] | None = field(default=None, repr=False)
    class_names: tuple[str, ...] | None = None
    item_ids: tuple[str, ...] | None = field(default=None, repr=False)
    """The project's id of each example (a revision's members): written with
    each flagged row, so ``retest review queue-label-errors`` queues them as is."""


@dataclass(frozen=True, slots=True)
class LabelErrorRun:
    """What the stage found and wrote."""

    method: str
    n_examples: int
    ranked: tuple[LabelError, ...]
    detection: DetectionReport | None
    report: dict[str, Any]
    paths: dict[str, Path]
    class_names: tuple[str, ...] | None = None


class NpyFoldCache:
    """:class:`~retest.label_errors.crossval.FoldCache` backed by ``<dir>/<key>.npy`` files."""

    def __init__(self, directory: PathLike) -> None:
        self.directory = Path(directory)

    def load(self, key: str) -> NDArray[np.float32] | None:
        p = self.directory / f"{key}.npy"
        if not p.is_file():
            return None
        try:
            return np.asarray(np.load(p, allow_pickle=False), dtype=np.float32)
        except (OSError, ValueError):  # truncated by a crash: recompute that fold
            return None

    def save(self, key: str, probs: NDArray[np.float32]) -> None:
        buf = io.BytesIO()
        np.save(buf, np.asarray(probs, dtype=np.float32), allow_pickle=False)
        atomic_write_bytes(self.directory / f"{key}.npy", buf.getvalue())


def _load_npy(path: PathLike, what: str) -> NDArray[Any]:
    return load_npy(path, what=what)


def load_label_error_inputs(
    *,
    labels: PathLike,
    pred_probs: PathLike | None = None,
    predictions_dir: PathLike | None = None,
    true_labels: PathLike | None = None,
    images: PathLike | None = None,
    class_names: tuple[str, ...] | None = None,
    smoothing: float = 0.1,
) -> LabelErrorInputs:
    """Read the arrays a user brings (exactly one of ``pred_probs`` / ``predictions_dir``).

    ``predictions_dir`` is a testbed folder (one file per model, read by
    :func:`retest.datasets.predictions.read_testbed`); the models are pooled with
    :func:`retest.label_errors.ensemble_pred_probs` (mean probabilities, else votes).
    """
    if (pred_probs is None) == (predictions_dir is None):
        raise InputValidationError(
            "give exactly one of pred_probs (an (N, K) .npy file) or predictions_dir "
            "(a folder of per-model prediction files)."
        )
    if class_names is not None:
        class_names = check_class_names(class_names)
    k = len(class_names) if class_names else None
    y = read_labels(labels, n_classes=k)
    source: dict[str, Any] = {"labels": str(labels)}
    if pred_probs is not None:
        probs: Any = _load_npy(pred_probs, "pred_probs")
        source["pred_probs"] = str(pred_probs)
    else:
        assert predictions_dir is not None
        k = k or int(y.max()) + 1
        testbed = read_testbed(predictions_dir, n_classes=k)
        ens = ensemble_pred_probs(
            list(testbed.values()), n_classes=k, smoothing=smoothing
        )
        probs = ens.pred_probs
        source.update(
            predictions_dir=str(predictions_dir),
            ensemble=ens.mode,
            smoothing=smoothing if ens.mode == "votes" else None,
            models=list(ens.models),
        )
    y_true = read_labels(true_labels, n_classes=k) if true_labels is not None else None
    if true_labels is not None:
        source["true_labels"] = str(true_labels)
    if y_true is not None and y_true.shape != y.shape:
        raise InputValidationError(
            f"{true_labels}: {y_true.size} true labels but {y.size} given labels."
        )
    imgs = _load_npy(images, "images") if images is not None else None
    if imgs is not None and (imgs.shape[0] != y.size or imgs.dtype != np.uint8):
        raise InputValidationError(
            f"{images}: expected uint8 images (N={y.size}, H, W[, C]). "
            f"Got {imgs.dtype} {imgs.shape}."
        )
    return LabelErrorInputs(y, probs, source, y_true, imgs, class_names)


def _csv_bytes(rows: list[dict[str, Any]]) -> bytes:
    buf = io.StringIO()
    cols = list(rows[0]) if rows else ["rank", "index", "given", "suggested", "score"]
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue().encode()


def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2) + "\n").encode()


def _name(c: int, names: tuple[str, ...] | None) -> str:
    return names[c] if names else str(c)


def suspect_row(
    e: LabelError, names: tuple[str, ...] | None, ids: tuple[str, ...] | None
) -> dict[str, Any]:
    """A flagged example's output row; ``item_id`` after ``index`` when known."""
    d = e.as_dict(names)
    if ids is None:
        return d
    return {k: v for k, v in d.items() if k in ("rank", "index")} | {
        "item_id": ids[e.index],
        **{k: v for k, v in d.items() if k not in ("rank", "index")},
    }


def _contact_sheet(
    inputs: LabelErrorInputs, ranked: tuple[LabelError, ...], top: int, path: Path
) -> Path | None:
    if inputs.images is None or not ranked:
        # a sheet from an earlier run into this folder would show other suspects
        path.unlink(missing_ok=True)
        return None
    from retest.stages.report import save_contact_sheet

    shown = ranked[:top]
    names = inputs.class_names
    caps = [
        f"#{e.index}\ngiven {_name(e.given, names)}\n→ {_name(e.suggested, names)} "
        f"({e.suggested_prob:.2f})"
        for e in shown
    ]
    return save_contact_sheet(
        [inputs.images[e.index] for e in shown],
        caps,
        path,
        ncols=8,
        title=f"top {len(shown)} suspected label errors",
    )


def run_label_errors(
    inputs: LabelErrorInputs,
    out_dir: PathLike,
    *,
    method: str = "prune-by-noise-rate",
    rank_by: RankBy = "self-confidence",
    top: int = 20,
    min_examples_per_class: int | None = None,
) -> LabelErrorRun:
    """Find label errors with ``method``, rank them and write the stage's files.

    Probabilities are validated as cleanlab validates them; rows that do not sum
    to 1 give one :class:`~retest.label_errors.ProbabilitySumWarning` (not one per pass).
    """
    out = check_output(out_dir, RULES["label-errors"])
    rank_by = resolve_rank_by(rank_by)  # type: ignore[assignment]
    try:
        y, probs = check_label_error_inputs(inputs.labels, inputs.pred_probs)
    except InputValidationError as err:
        # the checks speak of "labels" and "pred_probs"; name the file at fault
        src = inputs.source
        probs_file = src.get("pred_probs") or src.get("predictions_dir")
        if probs_file is None:
            raise
        msg = str(err)  # "labels and pred_probs …" blames neither file alone
        if msg.startswith("labels ") and not msg.startswith("labels and"):
            k = getattr(inputs.pred_probs, "shape", (0,))[-1]
            raise InputValidationError(
                f"{src.get('labels')}: {msg} (the probabilities in {probs_file} "
                f"have {k} columns)"
            ) from None
        raise InputValidationError(
            f"{probs_file}: {err} (labels from {src.get('labels')})"
        ) from None
    if inputs.class_names is not None and len(inputs.class_names) != probs.shape[1]:
        raise InputValidationError(
            f"{len(inputs.class_names)} class names for {probs.shape[1]} classes "
            "(columns of the probabilities)."
        )
    if min_examples_per_class is None:  # 5 for the paper's names, 1 for cleanlab's
        min_examples_per_class = resolve_method(method)[1]
    y_true = inputs.true_labels
    if y_true is not None:  # 1-based true labels would score every flag as wrong
        where = inputs.source.get("true_labels", "true_labels")
        y_true = check_labels(
            y_true, n_classes=probs.shape[1], name=f"true labels in {where}"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProbabilitySumWarning)  # warned just above
        mask = find_label_errors(
            y, probs, method=method, min_examples_per_class=min_examples_per_class
        )
        ranked = rank_label_errors(y, probs, mask, rank_by=rank_by)
        noise = estimate_noise(y, probs)
    det = detection_report(mask, y_true != y) if y_true is not None else None
    names = inputs.class_names
    rows = [suspect_row(e, names, inputs.item_ids) for e in ranked]
    report = {
        "method": method,
        "rank_by": rank_by,
        "min_examples_per_class": min_examples_per_class,
        "n_examples": int(y.size),
        "n_classes": int(probs.shape[1]),
        "n_flagged": int(mask.sum()),
        "estimated_errors": noise.n_errors,
        "estimated_errors_per_class": noise.errors_per_class.tolist(),
        "class_names": list(names) if names else None,
        "detection": det.as_dict() if det is not None else None,
        "source": inputs.source,
    }
    try:
        claim_output_dir(out, RULES["label-errors"])
        paths = {
            "csv": atomic_write_bytes(out / "label_errors.csv", _csv_bytes(rows)),
            "json": atomic_write_bytes(
                out / "label_errors.json",
                _json_bytes({"method": method, "errors": rows}),
            ),
            "report": atomic_write_bytes(out / "report.json", _json_bytes(report)),
        }
        sheet = _contact_sheet(inputs, ranked, top, out / "contact_sheet.png")
    except OSError as err:
        raise StageError(
            f"cannot write the label-error report to {out}: {err.strerror or err}. "
            "Choose another --out or fix its permissions."
        ) from None
    if sheet is not None:
        paths["contact_sheet"] = sheet
    return LabelErrorRun(method, int(y.size), ranked, det, report, paths, names)
