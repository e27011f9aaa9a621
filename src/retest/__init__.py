"""retest: rebuild a benchmark's test set and measure how classifiers generalize to it.

The public API is curated here; heavy modules are imported lazily by the
functions that need them.
"""

from __future__ import annotations

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
from retest.records import LabeledSet, Predictions
from retest.registry import Registry

__version__ = "0.1.0"

__all__ = [
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
]
