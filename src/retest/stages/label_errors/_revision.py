"""Label errors of a project's test set: a revision (or the original test set)
audited with the testbed predictions ``retest evaluate`` cached for it.

``retest evaluate`` records every model's predictions on every test set it
scores in the store (model, test set, cache entry); this module pools those of
one test set (:func:`retest.label_errors.ensemble_pred_probs`) into the
:class:`~retest.stages.label_errors._label_errors.LabelErrorInputs` the stage runs on, with
the members' item ids, so the user never handles the cache's file names and the
suspects can be queued for review as they are.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from retest.datasets.predictions import read_labels
from retest.errors import InputValidationError, NotFoundError
from retest.label_errors.ensemble import ensemble_pred_probs
from retest.project import Project
from retest.records import LabeledSet, Predictions
from retest.stages.evaluate import (
    ORIGINAL,
    PredictionCache,
    project_revisions,
    reference_set,
    revision_set,
)
from retest.stages.label_errors._label_errors import LabelErrorInputs
from retest.store.rows import reference_id

__all__ = ["cached_predictions", "revision_item_ids", "revision_label_error_inputs"]


def revision_item_ids(project: Project, revision: str) -> tuple[str, ...]:
    """The item id of each example of ``revision`` in the order ``retest
    evaluate`` and ``retest export`` use (``original``: the test split's
    originals by index), so an index into its labels names an image.

    Raises
    ------
    NotFoundError
        No such revision (the message lists the existing ones).
    """
    if revision == ORIGINAL:
        rows = sorted(
            project.store.references.list(split="test"), key=lambda r: r.index
        )
        return tuple(reference_id("test", r.index) for r in rows)
    project_revisions(project, [revision])
    return tuple(m.item_id for m in project.store.revisions.members(revision))


def cached_predictions(project: Project, test_set: str, n: int) -> list[Predictions]:
    """Every model's cached predictions on ``test_set`` (a revision or
    ``original``), by model name; entries whose file is gone or damaged (the
    cache warns) or that do not have ``n`` rows are left out."""
    cache = PredictionCache(project.arrays_dir / "predictions")
    out = []
    for rec in project.store.predictions.list(dataset=test_set):
        mk, dk = rec.extra.get("model_key"), rec.extra.get("dataset_key")
        if not isinstance(mk, str) or not isinstance(dk, str):
            continue
        pred = cache.load(mk, dk)
        if pred is not None and pred.n == n:
            out.append(pred)
    return out


def _images(project: Project, revision: str) -> LabeledSet | None:
    """The test set with its pixels (for the contact sheet), or None when its
    images cannot be stacked (mixed shapes): the audit does not need them."""
    try:
        if revision == ORIGINAL:
            return reference_set(project, "test", name=ORIGINAL)
        return revision_set(project, revision)
    except InputValidationError:
        return None


def revision_label_error_inputs(
    project: Project,
    revision: str,
    *,
    true_labels: str | os.PathLike[str] | None = None,
    smoothing: float = 0.1,
) -> LabelErrorInputs:
    """The label-error stage's inputs for a revision of ``project`` (or
    ``original``, its test split): the members' classes as given labels, the
    pooled cached predictions of every model ``retest evaluate`` scored on it,
    the members' pixels and ids, the project's class names.

    Raises
    ------
    NotFoundError
        No such revision, or no cached predictions for it (the message says
        which command makes them).
    """
    ids = revision_item_ids(project, revision)
    data = _images(project, revision)
    if data is None:
        data = (
            reference_set(project, "test", name=ORIGINAL, images=False)
            if revision == ORIGINAL
            else revision_set(project, revision, images=False)
        )
    preds = cached_predictions(project, revision, len(ids))
    if not preds:
        what = "" if revision == ORIGINAL else f" --revision {revision}"
        raise NotFoundError(
            f"no cached model predictions for {revision!r}: run `retest evaluate"
            f"{what} --preset quick` (or with your own models) first; label-errors "
            "pools the predictions evaluate caches."
        )
    k = len(project.class_names)
    ens = ensemble_pred_probs(preds, n_classes=k, smoothing=smoothing)
    source: dict[str, Any] = {
        "revision": revision,
        "project": str(project.root),
        "ensemble": ens.mode,
        "smoothing": smoothing if ens.mode == "votes" else None,
        "models": list(ens.models),
    }
    y_true = None
    if true_labels is not None:
        y_true = read_labels(true_labels, n_classes=k)
        source["true_labels"] = str(true_labels)
        if y_true.shape != data.labels.shape:
            raise InputValidationError(
                f"{true_labels}: {y_true.size} true labels but {revision!r} has "
                f"{data.labels.size} images."
            )
    images = data.images if data.images is not None and data.images.size else None
    return LabelErrorInputs(
        np.asarray(data.labels, np.int64),
        ens.pred_probs,
        source,
        y_true,
        images,
        tuple(project.class_names),
        item_ids=ids,
    )
