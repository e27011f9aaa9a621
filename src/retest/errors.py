"""Exceptions and warnings raised by retest.

Every error a user can reach is a :class:`RetestError`; the CLI prints its message
on one line and exits non-zero, tracebacks appear only with ``--debug``. Several
errors also subclass a built-in so an existing ``except ValueError`` still works::

    RetestError
    ├── ConfigError(RetestError, ValueError)            bad parameters / config values
    │   └── UnknownNameError(ConfigError, KeyError)     a name no registry knows, with suggestions
    ├── InputValidationError(RetestError, ValueError)   arrays/records of wrong shape, dtype or range
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
    "SchemaUpgradeWarning",
    "SmallSampleWarning",
    "StageError",
    "StoreError",
    "UnknownNameError",
]


class RetestError(Exception):
    """Base class of every error retest raises on purpose.

    Examples
    --------
    One ``except`` catches every error a user can cause, with a message that says
    what to do:

    >>> import retest
    >>> from retest.errors import RetestError
    >>> try:
    ...     retest.read_labels("no-such-labels.npy")
    ... except RetestError as err:
    ...     print(type(err).__name__, "-", err)
    DataIntegrityError - no-such-labels.npy: predictions/labels array file not found. Check the path.
    """


class ConfigError(RetestError, ValueError):
    """A parameter or configuration value is invalid.

    Examples
    --------
    >>> import retest
    >>> from retest.errors import ConfigError
    >>> from retest.sampling.eligibility import CandidateInfo
    >>> pool = [CandidateInfo("x1", "cat", 0.9, 10)]
    >>> try:
    ...     retest.sample(pool, "class-balanced", threshold=0.5, random_state=0)
    ... except ValueError as err:  # a ConfigError is a ValueError too
    ...     print(isinstance(err, ConfigError), err)
    True sampler 'class-balanced' does not take threshold; it takes ...
    """


class InputValidationError(RetestError, ValueError):
    """An array, record or file content has the wrong shape, dtype or range.

    Examples
    --------
    >>> import retest
    >>> from retest.errors import InputValidationError
    >>> try:
    ...     retest.accuracy([0, 1], [0, 1, 1])
    ... except InputValidationError as err:
    ...     print(err)
    predictions: 3 predictions but 2 labels; predictions and labels must describe the same examples in the same order.
    """


class UnknownNameError(ConfigError, KeyError):
    """A name was not found in a registry; carries close matches.

    An unknown name is a bad parameter value, so it is a :class:`ConfigError` (and
    a ``ValueError``), and a ``KeyError`` for callers that look names up.

    Examples
    --------
    >>> import retest
    >>> from retest.errors import UnknownNameError
    >>> try:
    ...     retest.load_dataset("cifar11")
    ... except KeyError as err:  # an UnknownNameError is a KeyError too
    ...     print(isinstance(err, UnknownNameError), err.name, err.suggestions)
    ...     print(err)
    True cifar11 ['cifar10_1', 'cifar10']
    Unknown dataset 'cifar11'. Did you mean 'cifar10_1', 'cifar10'?
    >>> from retest.errors import ConfigError
    >>> try:
    ...     retest.load_dataset("cifar11")
    ... except ValueError as err:  # and a ConfigError, so a ValueError
    ...     print(isinstance(err, ConfigError))
    True
    """

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
    """A file is missing, empty, truncated or fails its checksum.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import retest
    >>> from retest.errors import DataIntegrityError
    >>> path = Path(tempfile.mkdtemp()) / "labels.npy"
    >>> _ = path.write_bytes(b"\\x93NU")  # a truncated .npy file
    >>> try:
    ...     retest.read_labels(path)
    ... except DataIntegrityError as err:
    ...     print(str(err).replace(str(path), "labels.npy"))
    labels.npy: not a readable .npy predictions/labels array (...); the file is probably truncated or corrupt. Re-create or re-download it.
    """


class MissingDependencyError(RetestError, ImportError):
    """An optional package a feature needs is not installed; says how to install it."""


class StoreError(RetestError):
    """The project store cannot complete an operation.

    Examples
    --------
    Its subclass :class:`NotFoundError` is the common case (a row that does not
    exist):

    >>> import tempfile
    >>> import retest
    >>> from retest.errors import StoreError
    >>> with retest.init_project(tempfile.mkdtemp() + "/p", classes=["a", "b"]) as p:
    ...     try:
    ...         p.store.revisions.get("r9")
    ...     except StoreError as err:
    ...         print(type(err).__name__, "-", err)
    NotFoundError - revision 'r9' does not exist (revisions: none).
    """


class NotFoundError(StoreError, LookupError):
    """A requested row (revision, candidate, model, ...) does not exist.

    Examples
    --------
    >>> import tempfile
    >>> import retest
    >>> from retest.errors import NotFoundError
    >>> with retest.init_project(tempfile.mkdtemp() + "/p", classes=["a", "b"]) as p:
    ...     try:
    ...         p.store.revisions.get("r9")
    ...     except LookupError as err:  # a NotFoundError is a LookupError too
    ...         print(isinstance(err, NotFoundError), err)
    True revision 'r9' does not exist (revisions: none).
    """


class StageError(RetestError):
    """A pipeline stage cannot run because its inputs are not ready.

    Examples
    --------
    >>> import tempfile
    >>> import retest
    >>> from retest.errors import StageError
    >>> from retest.stages.dedup._dedup import run_dedup
    >>> with retest.init_project(tempfile.mkdtemp() + "/p", classes=["a", "b"]) as p:
    ...     try:
    ...         run_dedup(p)  # nothing ingested yet
    ...     except StageError as err:
    ...         print(err)
    the project has no (non-blacklisted) candidates to check.
    """


class RetestWarning(UserWarning):
    """Base class of retest's warnings."""


class SmallSampleWarning(RetestWarning):
    """A statistic rests on very few samples."""


class ClassImbalanceWarning(RetestWarning):
    """Classes are far from balanced where balance was expected."""


class SchemaUpgradeWarning(RetestWarning):
    """A large project's database is being upgraded to this retest's schema
    (once, on first open; it can take minutes)."""


class DroppedModelWarning(RetestWarning):
    """A model was dropped because it is missing from one of the test sets."""
