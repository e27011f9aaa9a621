"""The model-runner contract, the ``MODELS`` registry and the shared batching code.

A *runner* turns images (uint8, ``(N, H, W[, C])``) or feature rows into
:class:`~retest.records.Predictions` (top-5 class ids, plus scores when the model
gives them). Trainable runners also have ``fit``. Runners are small picklable
objects, so a Dask worker can run them; heavy third-party objects (an ONNX
session, a TorchScript module) are rebuilt lazily from their file.

Built-in models (the small-image testbed) are registered in :data:`MODELS` under
their names; :func:`get_model` builds one. Loaders for user models live in
:data:`RUNNER_KINDS` ("sklearn", "torchscript", "torch", "onnx", "predictions").
"""

from __future__ import annotations

import hashlib
import importlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from retest._progress import ProgressCallback, report
from retest._validation import check_batch_size, check_labels
from retest.errors import ConfigError, InputValidationError
from retest.records import Predictions
from retest.registry import Registry

__all__ = [
    "MODELS",
    "RUNNER_KINDS",
    "BatchedRunner",
    "ModelRunner",
    "ModelSpec",
    "TrainableRunner",
    "array_digest",
    "fixed_threads",
    "get_model",
    "list_models",
    "load_model",
    "runner_fingerprint",
]

DEFAULT_BATCH_SIZE = 2048
TOP_K = 5


@runtime_checkable
class ModelRunner(Protocol):
    """Anything that predicts classes for a batch of images or feature rows."""

    name: str
    n_classes: int

    def predict(
        self,
        images: NDArray[Any],
        *,
        dataset: str = "data",
        batch_size: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> Predictions: ...

    def describe(self) -> dict[str, Any]:
        """JSON-able parameters that identify the model (used as a cache key)."""
        ...


@runtime_checkable
class TrainableRunner(ModelRunner, Protocol):
    """A runner that can be trained on images (or features) and labels."""

    fitted: bool

    def fit(
        self,
        images: NDArray[Any],
        labels: NDArray[Any],
        *,
        progress: ProgressCallback | None = None,
    ) -> TrainableRunner: ...


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A registered model: how to build it and what it is.

    Parameters
    ----------
    name : str
        Registry name (``retest models list``).
    kind : str
        Runner family ("sklearn", "torch", ...).
    description : str
        One line for listings.
    factory : callable
        ``factory(n_classes=..., random_state=..., **options) -> ModelRunner``.
    presets : tuple of str
        Testbed presets that include this model ("quick", "full").
    """

    name: str
    kind: str
    description: str
    factory: Callable[..., ModelRunner] = field(repr=False)
    presets: tuple[str, ...] = ("full",)


MODELS: Registry[ModelSpec] = Registry("model", entry_point_group="retest.models")
RUNNER_KINDS: Registry[Callable[..., ModelRunner]] = Registry("model runner kind")

_BUILTIN_MODULES = (
    "retest.models.testbed",
    "retest.models.sklearn_runner",
    "retest.models.torch_runner",
    "retest.models.onnx_runner",
    "retest.models.prediction_files",
)


def _ensure_builtins() -> None:
    # Explicit import of the modules that register built-ins (no import-time magic
    # in this module, and `retest.models.base` stays light).
    for mod in _BUILTIN_MODULES:
        importlib.import_module(mod)


def get_model(
    name: str, *, n_classes: int, random_state: int = 0, **options: Any
) -> ModelRunner:
    """Build the registered model ``name`` (unknown names get suggestions)."""
    _ensure_builtins()
    spec = MODELS.get(name)
    return spec.factory(n_classes=n_classes, random_state=random_state, **options)


def list_models(pattern: str = "*", *, preset: str | None = None) -> list[ModelSpec]:
    """Registered models matching ``pattern`` (and in ``preset`` if given)."""
    _ensure_builtins()
    specs = [MODELS.get(n) for n in MODELS.names(pattern)]
    return [s for s in specs if preset is None or preset in s.presets]


def load_model(
    kind: str, path: str, *, name: str, n_classes: int, **options: Any
) -> ModelRunner:
    """Load a user model from ``path`` with the runner ``kind`` (e.g. "onnx")."""
    _ensure_builtins()
    return RUNNER_KINDS.get(kind)(path, name=name, n_classes=n_classes, **options)


def array_digest(*arrays: NDArray[Any]) -> str:
    """sha256 over dtype, shape and bytes of each array (a content id)."""
    h = hashlib.sha256()
    for a in arrays:
        arr = np.ascontiguousarray(a)
        h.update(f"{arr.dtype.str}{arr.shape}".encode())
        h.update(arr.tobytes())  # contiguous copy; the digest is cheap next to training
    return h.hexdigest()


def runner_fingerprint(runner: ModelRunner, *, train_digest: str | None = None) -> str:
    """A stable id of (model, parameters, training data): the prediction-cache key."""
    desc = dict(runner.describe())
    if train_digest is not None:
        desc["train_digest"] = train_digest
    blob = json.dumps(
        {"name": runner.name, "n_classes": runner.n_classes, **desc},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


@contextmanager
def fixed_threads(n_threads: int | None) -> Iterator[None]:
    """Pin BLAS/OpenMP thread pools so results do not depend on the machine's load."""
    if n_threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=int(n_threads)):
        yield


def _check_images(images: NDArray[Any], model: str) -> NDArray[Any]:
    arr = np.asarray(images)
    if arr.ndim < 2 or arr.shape[0] == 0:
        raise InputValidationError(
            f"model {model!r}: inputs must be (N, H, W[, C]) images or (N, D) "
            f"features with N > 0. Got shape {arr.shape}."
        )
    return arr


def check_train_labels(
    labels: NDArray[Any], n: int, *, n_classes: int, model: str
) -> NDArray[np.int64]:
    """Training labels as int64 in ``[0, n_classes)``, one per image."""
    y = check_labels(
        labels, n_classes=n_classes, name=f"training labels of model {model!r}"
    )
    if y.shape[0] != n:
        raise InputValidationError(
            f"model {model!r}: {n} training images but {y.shape[0]} labels."
        )
    return y


class BatchedRunner(ABC):
    """Base class: batching, progress, output checks and ``Predictions`` assembly.

    Subclasses implement ``_scores(batch) -> (b, n_classes)`` (or ``(b,)`` class ids
    when the model gives no scores) and set ``scores_are_probabilities``.
    """

    name: str
    n_classes: int
    scores_are_probabilities: bool = True
    threads: int | None = 1
    default_batch_size: int = DEFAULT_BATCH_SIZE

    def __init__(self, name: str, *, n_classes: int, threads: int | None = 1) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"model name must be a non-empty string. Got {name!r}.")
        if int(n_classes) < 2:
            raise ConfigError(
                f"model {name!r}: n_classes must be >= 2. Got {n_classes!r}."
            )
        self.name = name
        self.n_classes = int(n_classes)
        self.threads = threads

    def describe(self) -> dict[str, Any]:
        return {"runner": type(self).__name__}

    @abstractmethod
    def _scores(self, batch: NDArray[Any]) -> NDArray[Any]:
        """Class scores (N, K) of one preprocessed batch."""

    def predict(
        self,
        images: NDArray[Any],
        *,
        dataset: str = "data",
        batch_size: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> Predictions:
        """Predict in batches of ``batch_size``; top-5 ids and scores per image."""
        x = _check_images(images, self.name)
        bs = check_batch_size(batch_size) or self.default_batch_size
        n = x.shape[0]
        task = f"predict {self.name} on {dataset}"
        chunks: list[NDArray[Any]] = []
        report(progress, task, 0, n)
        with fixed_threads(self.threads):
            for start in range(0, n, bs):
                out = np.asarray(self._scores(x[start : start + bs]))
                chunks.append(self._check_output(out, min(bs, n - start)))
                report(progress, task, min(start + bs, n), n)
        scores = np.concatenate(chunks, axis=0)
        return self._to_predictions(scores, dataset)

    def _check_output(self, out: NDArray[Any], rows: int) -> NDArray[Any]:
        if out.shape[0] != rows:
            raise InputValidationError(
                f"model {self.name!r} returned {out.shape[0]} rows for a batch of {rows}."
            )
        if out.ndim == 2 and out.shape[1] != self.n_classes:
            raise InputValidationError(
                f"model {self.name!r} outputs {out.shape[1]} classes but the dataset has "
                f"{self.n_classes}. Check that the model was trained for this dataset's classes."
            )
        if out.ndim not in (1, 2):
            raise InputValidationError(
                f"model {self.name!r} returned an output of shape {out.shape}; "
                "expected (batch, n_classes) scores or (batch,) class ids."
            )
        return out.astype(np.float32) if out.ndim == 2 else out

    def _to_predictions(self, scores: NDArray[Any], dataset: str) -> Predictions:
        if scores.ndim == 1:
            return Predictions.from_labels(
                self.name, dataset, scores.astype(np.int64), n_classes=self.n_classes
            )
        return Predictions.from_scores(
            self.name,
            dataset,
            scores,
            k=TOP_K,
            probabilities=self.scores_are_probabilities,
        )


def softmax(logits: NDArray[Any]) -> NDArray[np.float32]:
    """Row-wise softmax in float64, returned as float32 rows summing to 1."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def as_mapping(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(obj) if obj is not None else {}
