"""Exceptions and warnings raised by retest.

Every error a user can reach is a :class:`RetestError`; the CLI prints its message
on one line and exits non-zero, tracebacks appear only with ``--debug``. Several
errors also subclass a built-in so an existing ``except ValueError`` still works::

    RetestError
    ├── ConfigError(RetestError, ValueError)            bad parameters / config values
    ├── InputValidationError(RetestError, ValueError)   arrays/records of wrong shape, dtype or range
    ├── UnknownNameError(RetestError, KeyError)         registry miss, with suggestions
    ├── DataIntegrityError(RetestError)                 missing/truncated file or checksum mismatch
    ├── MissingDependencyError(RetestError, ImportError) an optional package is not installed
    ├── StoreError(RetestError)
    │   └── NotFoundError(StoreError, LookupError)      no such row / revision / candidate
    └── StageError(RetestError)                         a pipeline stage's preconditions are not met

    RetestWarning(UserWarning)
    ├── SmallSampleWarning
    ├── ClassImbalanceWarning
    └── DroppedModelWarning                             a model present on one test set only
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ClassImbalanceWarning",
    "ConfigError",
    "DataIntegrityError",
    "DroppedModelWarning",
    "InputValidationError",
    "MissingDependencyError",
    "NotFoundError",
    "RetestError",
    "RetestWarning",
    "SmallSampleWarning",
    "StageError",
    "StoreError",
    "UnknownNameError",
]


class RetestError(Exception):
    """Base class of every error retest raises on purpose."""


class ConfigError(RetestError, ValueError):
    """A parameter or configuration value is invalid."""


class InputValidationError(RetestError, ValueError):
    """An array, record or file content has the wrong shape, dtype or range."""


class UnknownNameError(RetestError, KeyError):
    """A name was not found in a registry; carries close matches."""

    def __init__(
        self,
        kind: str,
        name: str,
        suggestions: Sequence[str] = (),
        available: Sequence[str] = (),
    ) -> None:
        self.kind = kind
        self.name = name
        self.suggestions = list(suggestions)
        self.available = list(available)
        super().__init__(str(self))

    def __str__(self) -> str:
        msg = f"Unknown {self.kind} {self.name!r}."
        if self.suggestions:
            msg += " Did you mean " + ", ".join(repr(s) for s in self.suggestions) + "?"
        elif self.available:
            shown = ", ".join(self.available[:20])
            more = (
                ""
                if len(self.available) <= 20
                else f", … ({len(self.available)} in all)"
            )
            msg += f" Available: {shown}{more}."
        return msg


class DataIntegrityError(RetestError):
    """A file is missing, empty, truncated or fails its checksum."""


class MissingDependencyError(RetestError, ImportError):
    """An optional package a feature needs is not installed; says how to install it."""


class StoreError(RetestError):
    """The project store cannot complete an operation."""


class NotFoundError(StoreError, LookupError):
    """A requested row (revision, candidate, model, ...) does not exist."""


class StageError(RetestError):
    """A pipeline stage cannot run because its inputs are not ready."""


class RetestWarning(UserWarning):
    """Base class of retest's warnings."""


class SmallSampleWarning(RetestWarning):
    """A statistic rests on very few samples."""


class ClassImbalanceWarning(RetestWarning):
    """Classes are far from balanced where balance was expected."""


class DroppedModelWarning(RetestWarning):
    """A model was dropped because it is missing from one of the test sets."""
