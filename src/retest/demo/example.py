"""A bundled example testbed, generated on disk with the paper's model.

See docs/algorithms.md#probit-model.

``retest compare --example`` writes two label files and two folders of
CIFAR-10.1-style prediction files (``<model>_predictions.json``) for a testbed of
simulated models, then runs the ordinary comparison on them. The new test set is
harder and more spread out than the original (μ, σ), so the probit relation has
slope ``u < 1`` and the linear fit looks like the paper's CIFAR-10 one (slope
≈ 1.7 on percent axes). Everything is seeded: same seed, same files.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import special

from retest._progress import ProgressCallback, report
from retest._validation import check_random_state
from retest.datasets.predictions import write_labels, write_testbed
from retest.evaluate.simulate import (
    simulate_correctness,
    simulate_predicted_labels,
)
from retest.records import Predictions
from retest.stages.compare import CompareResult, run_compare

__all__ = ["EXAMPLE_MODELS", "ExampleData", "make_example", "run_example"]

# Ordered from weakest to strongest; names only evoke a real testbed.
EXAMPLE_MODELS: tuple[str, ...] = (
    "linear_pixels",
    "random_features_32k",
    "random_features_256k",
    "cudaconvnet",
    "alexnet_small",
    "vgg_11",
    "vgg_13",
    "vgg_15_bn",
    "vgg16_keras",
    "resnet_20",
    "resnet_32",
    "resnet_44",
    "resnet_56",
    "resnet_110",
    "resnet_preact_110",
    "densenet_40",
    "resnet_preact_164",
    "densenet_bc_100",
    "wrn_16_8",
    "resnext_29_4x64d",
    "wrn_28_10",
    "resnext_29_8x64d",
    "densenet_bc_190",
    "pyramidnet_110_84",
    "wrn_28_10_cutout",
    "shake_shake_32d",
    "pyramidnet_110_270",
    "shake_shake_64d",
    "shake_drop",
    "shake_shake_96d_cutout",
)
# Test-set difficulty (μ, σ): original and new (docs/algorithms.md#probit-model).
ORIGINAL = (0.0, 1.0)
NEW = (0.715, 1.107)


@dataclass(frozen=True, slots=True)
class ExampleData:
    """Paths of a generated example testbed."""

    labels_orig: Path
    labels_new: Path
    predictions_orig: Path
    predictions_new: Path
    skills: tuple[float, ...]


def make_example(
    directory: str | os.PathLike[str],
    *,
    seed: int = 0,
    n_classes: int = 10,
    n_orig: int = 10_000,
    n_new: int = 2_000,
    n_models: int = 30,
    progress: ProgressCallback | None = None,
) -> ExampleData:
    """Write a simulated testbed (labels + per-model JSON predictions) under ``directory``.

    Skills are spread so that original accuracies run from about 80 % to 98 % and the
    new ones follow roughly the paper's CIFAR-10 line ``1.69·x − 72.7``.
    """
    rng = check_random_state(seed)
    d = Path(directory)
    names = _model_names(n_models)
    # Original accuracy Φ(s/√2) evenly spread in probit space, with a little jitter.
    z = np.linspace(special.ndtri(0.80), special.ndtri(0.98), n_models)
    skills = np.sqrt(ORIGINAL[1] ** 2 + 1) * z + ORIGINAL[0]
    skills = skills + rng.normal(0.0, 0.03, n_models)
    out: dict[str, Path] = {}
    ys = []
    for i, (key, n, (mu, sigma)) in enumerate(
        (("original", n_orig, ORIGINAL), ("new", n_new, NEW))
    ):
        y = rng.integers(0, n_classes, size=n)
        ok = simulate_correctness(skills, mu, sigma, n, random_state=rng)
        preds = simulate_predicted_labels(y, ok, n_classes, random_state=rng)
        testbed = {
            m: Predictions.from_labels(m, key, preds[j], n_classes=n_classes)
            for j, m in enumerate(names)
        }
        out[key] = d / "predictions" / key
        write_testbed(testbed, out[key], fmt="json")
        ys.append(write_labels(y, d / f"{key}_labels.npy"))
        report(progress, "example testbed", i + 1, 2)
    return ExampleData(
        ys[0], ys[1], out["original"], out["new"], tuple(map(float, skills))
    )


def _model_names(n: int) -> list[str]:
    if n <= len(EXAMPLE_MODELS):
        idx = np.round(np.linspace(0, len(EXAMPLE_MODELS) - 1, n)).astype(int)
        return [EXAMPLE_MODELS[i] for i in idx]
    return [f"model_{i:03d}" for i in range(n)]


def run_example(
    out: str | os.PathLike[str],
    *,
    seed: int = 0,
    metric: str = "top1",
    axes: str = "linear",
    confidence: float = 0.95,
    n_boot: int = 100_000,
    label_models: Sequence[str] = (),
    progress: ProgressCallback | None = None,
) -> tuple[ExampleData, CompareResult]:
    """Generate the example testbed under ``out/example_data`` and compare it into ``out``."""
    data = make_example(Path(out) / "example_data", seed=seed, progress=progress)
    result = run_compare(
        labels_orig=data.labels_orig,
        labels_new=data.labels_new,
        predictions_orig=data.predictions_orig,
        predictions_new=data.predictions_new,
        out=out,
        metric=metric,
        axes=axes,
        confidence=confidence,
        n_boot=n_boot,
        seed=seed,
        label_models=label_models,
        progress=progress,
    )
    return data, result
