"""scikit-learn estimators as model runners (built in code or loaded from joblib).

Inputs are uint8 images (flattened and scaled to [0, 1]) or float feature rows.
Scores come from ``predict_proba`` when the estimator has it, else from
``decision_function`` (kept as raw scores), else only the predicted class.

Training progress: forests grow in stages (``warm_start``), histogram gradient
boosting adds iterations in stages, an MLP trains epoch by epoch
(``partial_fit``); other estimators report one step. Iteration caps are part of
the testbed's time budget, so convergence warnings during ``fit`` are silenced
on purpose.
"""

from __future__ import annotations

import hashlib
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.ensemble._forest import BaseForest
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline

from retest._progress import ProgressCallback, report
from retest.errors import DataIntegrityError, InputValidationError
from retest.models.base import (
    RUNNER_KINDS,
    BatchedRunner,
    array_digest,
    check_train_labels,
    fixed_threads,
)
from retest.models.features import to_features

__all__ = ["SklearnRunner", "load_sklearn", "stratified_subset"]

_STAGES = 10


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class SklearnRunner(BatchedRunner):
    """Wrap a scikit-learn classifier (or pipeline).

    Parameters
    ----------
    name : str
        Model name.
    estimator : sklearn estimator
        Fitted or not; ``fit`` trains a clone-free copy in place.
    n_classes : int
        Number of classes; the estimator's ``classes_`` must be ``0..n_classes-1``.
    threads : int or None
        BLAS/OpenMP threads during fit and predict (fixed for reproducibility).
    fitted : bool, optional
        Whether ``estimator`` is already trained (default: it has ``classes_``).
    max_train : int, optional
        Train on a class-stratified subset of at most this many examples
        (drawn with ``random_state``), to bound the training time.
    random_state : int
        Seed of that subset.
    """

    def __init__(
        self,
        name: str,
        estimator: BaseEstimator,
        *,
        n_classes: int,
        threads: int | None = 1,
        fitted: bool | None = None,
        source_sha256: str | None = None,
        max_train: int | None = None,
        random_state: int = 0,
    ) -> None:
        super().__init__(name, n_classes=n_classes, threads=threads)
        self.estimator = estimator
        self.fitted = bool(hasattr(estimator, "classes_") if fitted is None else fitted)
        self.source_sha256 = source_sha256
        self.train_digest: str | None = None
        self.scores_are_probabilities = hasattr(estimator, "predict_proba")
        self.max_train = max_train
        self.random_state = random_state

    @classmethod
    def from_joblib(
        cls, path: str | Path, *, name: str, n_classes: int, threads: int | None = 1
    ) -> SklearnRunner:
        """Load a fitted estimator saved with ``joblib.dump`` (a pickle: trusted files only)."""
        import joblib

        p = Path(path)
        if not p.is_file():
            raise DataIntegrityError(
                f"model file {p} does not exist; expected a joblib file of a fitted estimator."
            )
        try:
            est = joblib.load(p)
        except Exception as err:
            raise DataIntegrityError(
                f"cannot read model file {p} with joblib ({type(err).__name__}: {err})."
            ) from err
        if not hasattr(est, "predict"):
            raise InputValidationError(
                f"{p} holds a {type(est).__name__}, not an estimator with predict()."
            )
        runner = cls(name, est, n_classes=n_classes, threads=threads, fitted=True)
        runner.source_sha256 = _file_sha256(p)
        runner._check_classes()
        return runner

    def describe(self) -> dict[str, Any]:
        return {
            "runner": "sklearn",
            "estimator": _estimator_params(self.estimator),
            "source_sha256": self.source_sha256,
            "train_digest": self.train_digest,
            "max_train": self.max_train,
            "random_state": self.random_state,
        }

    def fit(
        self,
        images: NDArray[Any],
        labels: NDArray[Any],
        *,
        progress: ProgressCallback | None = None,
    ) -> SklearnRunner:
        """Train on images (or features) and labels in ``[0, n_classes)``."""
        x = to_features(images)
        y = check_train_labels(
            labels, x.shape[0], n_classes=self.n_classes, model=self.name
        )
        missing = np.setdiff1d(np.arange(self.n_classes), np.unique(y))
        if missing.size:
            raise InputValidationError(
                f"training labels of model {self.name!r} lack classes {missing[:10].tolist()}; "
                "every class needs at least one training example."
            )
        train_digest = array_digest(np.asarray(images), y)
        if self.max_train is not None and x.shape[0] > self.max_train:
            keep = stratified_subset(y, self.max_train, random_state=self.random_state)
            x, y = x[keep], y[keep]
        task = f"train {self.name}"
        with fixed_threads(self.threads), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            _staged_fit(self.estimator, x, y, lambda d, t: report(progress, task, d, t))
        self.fitted = True
        self.train_digest = train_digest
        self._check_classes()
        return self

    def _check_classes(self) -> None:
        classes = getattr(self.estimator, "classes_", None)
        if classes is None:
            return
        if len(classes) != self.n_classes or not np.array_equal(
            np.asarray(classes), np.arange(self.n_classes)
        ):
            raise InputValidationError(
                f"model {self.name!r} was trained for {len(classes)} classes "
                f"({np.asarray(classes)[:10].tolist()}…) but the dataset has "
                f"{self.n_classes} classes 0..{self.n_classes - 1}."
            )

    def _scores(self, batch: NDArray[Any]) -> NDArray[Any]:
        x = to_features(batch)
        est = self.estimator
        if hasattr(est, "predict_proba"):
            return np.asarray(est.predict_proba(x))
        if hasattr(est, "decision_function"):
            s = np.asarray(est.decision_function(x), dtype=np.float64)
            return np.stack([-s, s], axis=1) if s.ndim == 1 else s
        return np.asarray(est.predict(x)).astype(np.int64)


def _staged_fit(
    estimator: BaseEstimator,
    x: NDArray[np.float32],
    y: NDArray[np.int64],
    tick: Any,
) -> None:
    """Fit, reporting progress in stages where the estimator allows it."""
    final = estimator
    xt = x
    if isinstance(estimator, Pipeline):
        final = estimator.steps[-1][1]
        if _stageable(final):
            head = estimator[:-1]
            xt = head.fit_transform(x, y) if len(estimator.steps) > 1 else x
    if isinstance(final, BaseForest | HistGradientBoostingClassifier):
        attr = "n_estimators" if isinstance(final, BaseForest) else "max_iter"
        total = int(getattr(final, attr))
        steps = np.unique(np.linspace(0, total, min(_STAGES, total) + 1).astype(int))[
            1:
        ]
        warm = final.get_params()["warm_start"]
        final.set_params(warm_start=True)
        tick(0, total)
        for n in steps:
            final.set_params(**{attr: int(n)})
            final.fit(xt, y)
            tick(int(n), total)
        final.set_params(warm_start=warm)  # the parameters must not change by fitting
        return
    if isinstance(final, MLPClassifier):
        epochs = int(final.max_iter)
        classes = np.unique(y)
        tick(0, epochs)
        for e in range(epochs):
            final.partial_fit(xt, y, classes=classes)
            tick(e + 1, epochs)
        return
    tick(0, 1)
    estimator.fit(x, y)
    tick(1, 1)


def stratified_subset(
    labels: NDArray[np.int64], size: int, *, random_state: int
) -> NDArray[np.intp]:
    """Sorted indices of a seeded subset with class shares as in ``labels``.

    Per-class quotas are ``floor(size * share)``; the remaining slots go to the
    classes with the largest remainders (ties → lower class id).
    """
    rng = np.random.default_rng(random_state)
    classes, counts = np.unique(labels, return_counts=True)
    exact = size * counts / counts.sum()
    quota = np.floor(exact).astype(int)
    order = np.lexsort((classes, -(exact - quota)))
    quota[order[: size - quota.sum()]] += 1
    quota = np.minimum(quota, counts)
    picks = [
        rng.choice(np.flatnonzero(labels == c), size=q, replace=False)
        for c, q in zip(classes, quota, strict=True)
    ]
    return np.sort(np.concatenate(picks))


def _estimator_params(est: BaseEstimator) -> dict[str, str]:
    """Every (nested) parameter as a string: a full, untruncated identity.

    Memory addresses (``<function f at 0x7f…>`` of a FunctionTransformer) are
    dropped: they differ in every process, and the prediction cache key built
    from this would never hit again.
    """
    params = est.get_params(deep=True)
    out = {"class": f"{type(est).__module__}.{type(est).__qualname__}"}
    for key in sorted(params):
        val = params[key]
        out[key] = (
            f"{type(val).__module__}.{type(val).__qualname__}"
            if isinstance(val, BaseEstimator)
            else re.sub(r" at 0x[0-9a-fA-F]+", "", repr(val))
        )
    return out


def _stageable(est: Any) -> bool:
    return isinstance(est, BaseForest | HistGradientBoostingClassifier | MLPClassifier)


def load_sklearn(
    path: str, *, name: str, n_classes: int, threads: int | None = 1
) -> SklearnRunner:
    """Runner kind "sklearn": a joblib file of a fitted estimator."""
    return SklearnRunner.from_joblib(
        path, name=name, n_classes=n_classes, threads=threads
    )


if "sklearn" not in RUNNER_KINDS:
    RUNNER_KINDS.add("sklearn", load_sklearn)
