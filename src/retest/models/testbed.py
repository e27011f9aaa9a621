"""The built-in testbed for small images (28×28 / 32×32), trained on CPU.

Sixteen models of different families and strengths, so that a linear fit of new
vs original accuracy has points spread over a wide accuracy range: logistic
regression at three regularisation strengths, a linear SVM, k-NN (k = 1, 5),
random forest, extra trees, histogram gradient boosting, Gaussian naive Bayes,
an MLP, random ReLU features + ridge at three widths (the paper's
"random features" baselines), PCA + RBF-SVM and, when torch is installed, a
small CNN. Inputs are flattened and scaled to [0, 1]; the slower models work on
a PCA projection and/or a seeded, class-stratified training subset.

Two presets bound the time: ``full`` (every model, training subsets sized for a
few minutes in all on 2 cores with 50,000 28×28 images) and ``quick`` (ten
models on at most 6,000 training images each, well under a minute). Measured times
are in ``benchmarks/README.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.decomposition import PCA
from sklearn.ensemble import (
    ExtraTreesClassifier,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
)
from sklearn.linear_model import LogisticRegression, RidgeClassifier, SGDClassifier
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.svm import SVC

from retest._progress import ProgressCallback, report
from retest.errors import ConfigError
from retest.models.base import MODELS, ModelRunner, ModelSpec, list_models
from retest.models.features import RandomReluFeatures
from retest.models.sklearn_runner import SklearnRunner
from retest.models.torch_runner import TorchRunner, small_cnn, torch_available

__all__ = [
    "PRESETS",
    "TestbedModel",
    "build_testbed",
    "preset_models",
    "unavailable_models",
]

PRESETS = ("quick", "full")
#: Threads each model uses for BLAS/OpenMP. One: parallelism comes from running
#: models side by side (Dask workers); OpenMP with 2 threads on a busy 2-core
#: machine was measured 5x slower than 1 thread (spin-waiting).
TESTBED_THREADS = 1


@dataclass(frozen=True, slots=True)
class TestbedModel:
    """A testbed entry: an estimator builder and per-preset training-set caps."""

    name: str
    description: str
    build: Callable[[int, int, str], Any]
    max_train: dict[str, int | None]
    kind: str = "sklearn"


def _pca(k: int, seed: int) -> PCA:
    return PCA(k, svd_solver="randomized", random_state=seed)


def _float64(x: Any) -> NDArray[np.float64]:
    """Module-level (picklable for Dask workers) cast before GaussianNB.

    GaussianNB normalises its joint log-likelihoods with a logsumexp in the input
    dtype; on float32 features that spread over thousands of nats (30 PCA
    components of a tiny training set) its predict_proba rows summed to 0.6–3.
    """
    return np.asarray(x, dtype=np.float64)


def _logreg(c: float) -> Callable[[int, int, str], Any]:
    return lambda k, seed, preset: LogisticRegression(
        C=c, max_iter=60 if preset == "quick" else 100, tol=1e-3
    )


def _knn(n: int) -> Callable[[int, int, str], Any]:
    return lambda k, seed, preset: make_pipeline(
        _pca(50, seed), KNeighborsClassifier(n, n_jobs=1)
    )


def _relu(width: int) -> Callable[[int, int, str], Any]:
    return lambda k, seed, preset: make_pipeline(
        RandomReluFeatures(width, random_state=seed), RidgeClassifier(alpha=1.0)
    )


def _forest(cls: type) -> Callable[[int, int, str], Any]:
    def build(k: int, seed: int, preset: str) -> Pipeline:
        trees = 50 if preset == "quick" else 80
        return make_pipeline(_pca(50, seed), cls(trees, n_jobs=1, random_state=seed))

    return build


_ENTRIES: tuple[TestbedModel, ...] = (
    TestbedModel(
        "logreg-c0.001",
        "logistic regression on pixels, C=0.001 (strong L2)",
        _logreg(0.001),
        {"quick": 6000, "full": 20000},
    ),
    TestbedModel(
        "logreg-c0.01",
        "logistic regression on pixels, C=0.01",
        _logreg(0.01),
        {"quick": 6000, "full": 20000},
    ),
    TestbedModel(
        "logreg-c1",
        "logistic regression on pixels, C=1",
        _logreg(1.0),
        {"quick": 6000, "full": 20000},
    ),
    TestbedModel(
        "linear-svm",
        "linear SVM (hinge loss, SGD, 8 epochs) on pixels; decision-function scores",
        lambda k, seed, preset: SGDClassifier(
            loss="hinge", alpha=1e-4, max_iter=8, tol=None, random_state=seed
        ),
        {"quick": 6000, "full": 30000},
    ),
    TestbedModel(
        "knn-1",
        "1-nearest neighbour on 50 PCA components",
        _knn(1),
        {"quick": 6000, "full": None},
    ),
    TestbedModel(
        "knn-5",
        "5-nearest neighbours on 50 PCA components",
        _knn(5),
        {"quick": 6000, "full": None},
    ),
    TestbedModel(
        "random-forest",
        "random forest (80 trees) on 50 PCA components",
        _forest(RandomForestClassifier),
        {"quick": 6000, "full": 20000},
    ),
    TestbedModel(
        "extra-trees",
        "extra trees (80 trees) on 50 PCA components",
        _forest(ExtraTreesClassifier),
        {"quick": 6000, "full": 30000},
    ),
    TestbedModel(
        "hist-gb",
        "histogram gradient boosting (60 rounds) on 50 PCA components",
        lambda k, seed, preset: make_pipeline(
            _pca(50, seed),
            HistGradientBoostingClassifier(
                max_iter=30 if preset == "quick" else 60,
                early_stopping=False,
                random_state=seed,
            ),
        ),
        {"quick": 6000, "full": 30000},
    ),
    TestbedModel(
        "gaussian-nb",
        "Gaussian naive Bayes on 30 PCA components",
        lambda k, seed, preset: make_pipeline(
            _pca(30, seed), FunctionTransformer(_float64), GaussianNB()
        ),
        {"quick": 6000, "full": None},
    ),
    TestbedModel(
        "mlp",
        "MLP, one hidden layer of 256 ReLUs (Adam, 10 epochs)",
        lambda k, seed, preset: MLPClassifier(
            (256,), max_iter=5 if preset == "quick" else 10, random_state=seed
        ),
        {"quick": 6000, "full": None},
    ),
    TestbedModel(
        "random-relu-256",
        "256 random ReLU features + ridge classifier",
        _relu(256),
        {"quick": 6000, "full": None},
    ),
    TestbedModel(
        "random-relu-1024",
        "1024 random ReLU features + ridge classifier",
        _relu(1024),
        {"quick": 6000, "full": None},
    ),
    TestbedModel(
        "random-relu-4096",
        "4096 random ReLU features + ridge classifier",
        _relu(4096),
        {"quick": 6000, "full": 20000},
    ),
    TestbedModel(
        "pca-rbf-svm",
        "RBF-kernel SVM (C=10) on 50 PCA components; decision-function scores",
        lambda k, seed, preset: make_pipeline(
            _pca(50, seed), SVC(C=10.0, gamma="scale", random_state=seed)
        ),
        {"quick": 3000, "full": 10000},
    ),
    TestbedModel(
        "small-cnn",
        "small CNN (2 conv layers, Adam, batch 32, 2 epochs; needs torch)",
        lambda k, seed, preset: None,
        {"quick": 6000, "full": 30000},
        kind="torch",
    ),
)

#: Models of the quick preset (a cross-section of families and accuracies).
QUICK = (
    "logreg-c0.001",
    "logreg-c1",
    "linear-svm",
    "knn-5",
    "random-forest",
    "gaussian-nb",
    "mlp",
    "random-relu-1024",
    "pca-rbf-svm",
    "small-cnn",
)


def _factory(entry: TestbedModel) -> Callable[..., ModelRunner]:
    def make(
        *,
        n_classes: int,
        random_state: int = 0,
        preset: str = "full",
        threads: int | None = TESTBED_THREADS,
    ) -> ModelRunner:
        if preset not in PRESETS:
            raise ConfigError(f"preset must be one of {PRESETS}. Got {preset!r}.")
        cap = entry.max_train[preset]
        if entry.kind == "torch":
            return TorchRunner(
                entry.name,
                small_cnn,
                n_classes=n_classes,
                threads=threads,
                epochs=1 if preset == "quick" else 2,
                train_batch_size=32,
                random_state=random_state,
                max_train=cap,
            )
        est = entry.build(n_classes, random_state, preset)
        return SklearnRunner(
            entry.name,
            est,
            n_classes=n_classes,
            threads=threads,
            fitted=False,
            max_train=cap,
            random_state=random_state,
        )

    return make


def _presets_of(name: str) -> tuple[str, ...]:
    return ("quick", "full") if name in QUICK else ("full",)


# Built-in models this installation cannot run, with the reason: their presets
# simply lack them, so front ends say so (unavailable_models).
_UNAVAILABLE: dict[str, str] = {}

for _e in _ENTRIES:
    if _e.kind == "torch" and not torch_available():
        _UNAVAILABLE[_e.name] = "torch is not installed"
        continue
    if _e.name not in MODELS:
        presets = _presets_of(_e.name)
        MODELS.add(
            _e.name,
            ModelSpec(
                _e.name, f"testbed/{_e.kind}", _e.description, _factory(_e), presets
            ),
        )


def unavailable_models(preset: str = "full") -> dict[str, str]:
    """Built-in models of ``preset`` this installation cannot run, with the reason.

    >>> set(unavailable_models("quick")) <= set(unavailable_models("full"))
    True
    """
    return {n: why for n, why in _UNAVAILABLE.items() if preset in _presets_of(n)}


def preset_models(preset: str = "full") -> list[str]:
    """Names of the built-in testbed models in ``preset`` (registry order)."""
    if preset not in PRESETS:
        raise ConfigError(f"preset must be one of {PRESETS}. Got {preset!r}.")
    return [s.name for s in list_models(preset=preset) if s.kind.startswith("testbed/")]


def build_testbed(
    preset: str = "full",
    *,
    n_classes: int,
    random_state: int = 0,
    names: list[str] | None = None,
    progress: ProgressCallback | None = None,
) -> list[ModelRunner]:
    """Untrained runners of the testbed (``names`` overrides the preset's list)."""
    chosen = names if names is not None else preset_models(preset)
    out = []
    for i, name in enumerate(chosen):
        spec = MODELS.get(name)
        out.append(
            spec.factory(n_classes=n_classes, random_state=random_state, preset=preset)
        )
        report(progress, "build testbed", i + 1, len(chosen))
    return out
