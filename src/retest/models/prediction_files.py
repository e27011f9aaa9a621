"""Models known only by their saved predictions (e.g. the 30 CIFAR-10.1 models).

A :class:`PredictionFileRunner` maps dataset names to prediction files (formats
of :mod:`retest.datasets.predictions`); ``predict(images, dataset=...)`` reads the
file of that dataset and checks it has one row per image. The images themselves
are not looked at.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest._progress import ProgressCallback, report
from retest.datasets.predictions import list_prediction_files, read_predictions
from retest.errors import ConfigError, DataIntegrityError, InputValidationError
from retest.models.base import RUNNER_KINDS
from retest.records import Predictions

__all__ = ["PredictionFileRunner", "runners_from_folders"]


class PredictionFileRunner:
    """A "model" whose predictions on each dataset are files.

    Parameters
    ----------
    name : str
        Model name.
    files : mapping dataset name → path
        One prediction file per dataset this model was evaluated on.
    n_classes : int
        Class ids in the files must lie in ``[0, n_classes)``.
    """

    fitted = True

    def __init__(
        self, name: str, files: Mapping[str, str | Path], *, n_classes: int
    ) -> None:
        if not files:
            raise ConfigError(f"model {name!r}: no prediction files given.")
        self.name = name
        self.n_classes = int(n_classes)
        self.files = {str(k): Path(v) for k, v in files.items()}

    def describe(self) -> dict[str, Any]:
        sums = {}
        for ds, p in sorted(self.files.items()):
            if not p.is_file():
                raise DataIntegrityError(
                    f"prediction file {p} of model {self.name!r} does not exist."
                )
            sums[ds] = hashlib.sha256(p.read_bytes()).hexdigest()
        return {"runner": "predictions", "files": sums}

    def predict(
        self,
        images: NDArray[Any],
        *,
        dataset: str = "data",
        batch_size: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> Predictions:
        """Read the predictions of ``dataset``; ``images`` only fixes the row count."""
        if dataset not in self.files:
            raise ConfigError(
                f"model {self.name!r} has no prediction file for dataset {dataset!r}; "
                f"it has files for: {', '.join(sorted(self.files))}."
            )
        path = self.files[dataset]
        task = f"predict {self.name} on {dataset}"
        report(progress, task, 0, 1)
        pred = read_predictions(
            path, model=self.name, dataset=dataset, n_classes=self.n_classes
        )
        if pred.probs is not None and pred.probs.shape[1] != self.n_classes:
            raise InputValidationError(
                f"{path}: model {self.name!r} outputs {pred.probs.shape[1]} classes but the "
                f"dataset has {self.n_classes}."
            )
        n = int(np.asarray(images).shape[0])
        if pred.n != n:
            raise InputValidationError(
                f"{path}: {pred.n} predictions but dataset {dataset!r} has {n} images; "
                "the file must hold one row per image, in dataset order."
            )
        report(progress, task, 1, 1)
        return pred


def runners_from_folders(
    folders: Mapping[str, str | Path],
    *,
    n_classes: int,
    model_names: Mapping[str, str] | None = None,
) -> list[PredictionFileRunner]:
    """One runner per model found in every folder (``{dataset: folder}``).

    Models missing from some folder are left out (they could not be compared).
    """
    listed = {
        ds: list_prediction_files(d, model_names=model_names)
        for ds, d in folders.items()
    }
    common = sorted(set.intersection(*(set(v) for v in listed.values())))
    return [
        PredictionFileRunner(
            m, {ds: files[m] for ds, files in listed.items()}, n_classes=n_classes
        )
        for m in common
    ]


def load_prediction_file(
    path: str, *, name: str, n_classes: int, dataset: str = "data"
) -> PredictionFileRunner:
    """Runner kind "predictions": one file, for the dataset named ``dataset``."""
    return PredictionFileRunner(name, {dataset: path}, n_classes=n_classes)


if "predictions" not in RUNNER_KINDS:
    RUNNER_KINDS.add("predictions", load_prediction_file)
