"""``evaluate --workers N`` with saved prediction files (no images).

A cluster cut each dataset into image shards and asked the prediction-file
runner for each shard, which answered with all rows of the file: "800 predictions
but dataset has 200 images". Saved predictions are now read whole, beside the
cluster; a mix of file and computed models still uses the cluster for the others.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retest.datasets.predictions import write_predictions
from retest.models.prediction_files import PredictionFileRunner
from retest.records import LabeledSet, Predictions
from retest.stages.evaluate import evaluate_sets

N, K = 800, 4


def test_prediction_files_with_workers_match_in_process(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    sets, files = [], {}
    for name in ("original", "new"):
        y = rng.integers(0, K, N)
        pred = rng.integers(0, K, N)
        write_predictions(
            Predictions.from_labels("m", name, pred, n_classes=K),
            tmp_path / f"{name}.npy",
        )
        files[name] = tmp_path / f"{name}.npy"
        sets.append(LabeledSet(name, y, tuple("abcd")))
    runner = PredictionFileRunner("m", files, n_classes=K)
    local = evaluate_sets([runner], sets, cache_dir=tmp_path / "c1")
    par = evaluate_sets([runner], sets, cache_dir=tmp_path / "c2", workers=2)
    for a, b in zip(local["m"], par["m"], strict=True):
        assert b.n == N and np.array_equal(a.top1, b.top1)


def test_files_and_computed_models_together_on_a_cluster(tmp_path: Path) -> None:
    class Parity:  # local: the workers get it by value (cloudpickle)
        """A trained 'model' computed on the images: class = first pixel mod K."""

        name, n_classes, fitted = "parity", K, True

        def describe(self) -> dict[str, object]:
            return {"runner": "parity", "k": K}

        def predict(self, images, *, dataset="data", batch_size=None, progress=None):  # type: ignore[no-untyped-def]
            cls = images.reshape(len(images), -1)[:, 0].astype(np.int64) % K
            return Predictions.from_labels(self.name, dataset, cls, n_classes=K)

    rng = np.random.default_rng(8)
    x = rng.integers(0, 256, (N, 4, 4), dtype=np.uint8)
    y = rng.integers(0, K, N)
    ds = LabeledSet("original", y, tuple("abcd"), images=x)
    write_predictions(
        Predictions.from_labels("m", "original", y, n_classes=K), tmp_path / "m.npy"
    )
    models = [PredictionFileRunner("m", {"original": tmp_path / "m.npy"}, n_classes=K),
              Parity()]  # fmt: skip
    got = evaluate_sets(models, [ds], cache_dir=tmp_path / "c", workers=2)
    assert np.array_equal(got["m"][0].top1, y)
    assert np.array_equal(got["parity"][0].top1, x[:, 0, 0] % K)
