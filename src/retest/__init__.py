"""retest: rebuild a benchmark's test set and measure how classifiers generalize to it.

The curated public API::

    from retest import compare, find_label_errors, knn, ssim, sample, open_project

Every name in ``__all__`` is loaded on first use (PEP 562), so ``import retest``
imports neither numpy nor any pipeline stage; ``retest.__all__`` lists the names
and each one's docstring has parameters and a runnable example.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Public name → the module that defines it (the one import path inside retest).
_EXPORTS: dict[str, str] = {
    "__version__": "retest._version",
    # errors, records, registry
    "ConfigError": "retest.errors",
    "DataIntegrityError": "retest.errors",
    "InputValidationError": "retest.errors",
    "NotFoundError": "retest.errors",
    "RetestError": "retest.errors",
    "StageError": "retest.errors",
    "StoreError": "retest.errors",
    "UnknownNameError": "retest.errors",
    "LabeledSet": "retest.records",
    "Predictions": "retest.records",
    "Registry": "retest.registry",
    # projects
    "init_project": "retest.project._project",
    "open_project": "retest.project._project",
    "status": "retest.stages.status._status",
    # reference datasets and prediction files
    "load_dataset": "retest.datasets.base",
    "read_labels": "retest.datasets.predictions",
    "read_testbed": "retest.datasets.predictions",
    # evaluation
    "accuracy": "retest.evaluate.metrics",
    "clopper_pearson": "retest.evaluate.intervals",
    "compare": "retest.api",
    "linear_fit": "retest.evaluate.fits",
    # label errors
    "ensemble_pred_probs": "retest.label_errors.ensemble",
    "find_label_errors": "retest.label_errors.finders",
    "rank_label_errors": "retest.label_errors.ranking",
    # near-duplicates
    "dssim": "retest.api",
    "knn": "retest.dedup.knn",
    "ssim": "retest.api",
    # sampling
    "CandidateInfo": "retest.sampling.eligibility",
    "sample": "retest.api",
}

__all__ = [
    "CandidateInfo",
    "ConfigError",
    "DataIntegrityError",
    "InputValidationError",
    "LabeledSet",
    "NotFoundError",
    "Predictions",
    "Registry",
    "RetestError",
    "StageError",
    "StoreError",
    "UnknownNameError",
    "__version__",
    "accuracy",
    "clopper_pearson",
    "compare",
    "dssim",
    "ensemble_pred_probs",
    "find_label_errors",
    "init_project",
    "knn",
    "linear_fit",
    "load_dataset",
    "open_project",
    "rank_label_errors",
    "read_labels",
    "read_testbed",
    "sample",
    "ssim",
    "status",
]

if TYPE_CHECKING:  # static checkers see the real objects
    from retest._version import __version__
    from retest.api import (
        compare,
        dssim,
        sample,
        ssim,
    )
    from retest.datasets.base import load_dataset
    from retest.datasets.predictions import read_labels, read_testbed
    from retest.dedup.knn import knn
    from retest.errors import (
        ConfigError,
        DataIntegrityError,
        InputValidationError,
        NotFoundError,
        RetestError,
        StageError,
        StoreError,
        UnknownNameError,
    )
    from retest.evaluate.fits import linear_fit
    from retest.evaluate.intervals import clopper_pearson
    from retest.evaluate.metrics import accuracy
    from retest.label_errors.ensemble import ensemble_pred_probs
    from retest.label_errors.finders import find_label_errors
    from retest.label_errors.ranking import rank_label_errors
    from retest.project import init_project, open_project
    from retest.records import LabeledSet, Predictions
    from retest.registry import Registry
    from retest.sampling.eligibility import CandidateInfo
    from retest.stages.status import status


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'retest' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
