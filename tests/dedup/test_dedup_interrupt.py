"""Ctrl-C while the reference MLP trains: the interrupt propagates, nothing is cached.

scikit-learn's MLPClassifier catches KeyboardInterrupt inside ``fit``, warns and
returns the half-trained model; retest used to cache that model and reuse it on
every later run. The interrupt is simulated from inside sklearn's epoch loop
(``_update_no_improvement_count`` runs once per epoch, within the try block that
swallows the interrupt).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from dedup_helpers import fm_images, fm_project  # type: ignore[import-not-found]
from sklearn.neural_network import MLPClassifier

from retest.models.reference_features import MLPSettings, fit_reference_mlp
from retest.project import Project
from retest.stages.dedup import run_dedup

N_REF, N_NEW = 200, 12


def _interrupt_on_epoch(monkeypatch: pytest.MonkeyPatch, epoch: int) -> list[int]:
    seen: list[int] = []
    orig = MLPClassifier._update_no_improvement_count

    def hook(self, *a, **kw):  # called after every epoch inside sklearn's try
        seen.append(self.n_iter_)
        if self.n_iter_ >= epoch:
            raise KeyboardInterrupt
        return orig(self, *a, **kw)

    monkeypatch.setattr(MLPClassifier, "_update_no_improvement_count", hook)
    return seen


def test_fit_reference_mlp_reraises_interrupt(monkeypatch) -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(60, 8, 8), dtype=np.uint8)
    labels = np.arange(60) % 3
    seen = _interrupt_on_epoch(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        fit_reference_mlp(
            images, labels, name="x", settings=MLPSettings(hidden=(8,), max_iter=5)
        )
    assert seen == [1, 2]  # the interrupt really came from inside sklearn's loop


def _project(root: Path, fm: Path) -> Project:
    train, labels, test = fm_images(fm, N_REF, N_NEW)
    return fm_project(root, train, labels, test, source="fm-test")


def test_interrupted_dedup_caches_no_model(
    tmp_path: Path, fashion_mnist_dir: Path, monkeypatch
) -> None:
    p = _project(tmp_path / "proj", fashion_mnist_dir)
    try:
        cache = p.arrays_dir / "dedup" / "embedders"
        _interrupt_on_epoch(monkeypatch, 1)
        with pytest.raises(KeyboardInterrupt):
            run_dedup(p, metrics=["features"], k=3, backend="numpy")
        assert not list(cache.glob("*.npz")) if cache.exists() else True
        assert not [
            a
            for a in p.store.artifacts.list(stage="dedup")
            if a.name.startswith("dedup/embedder/")
        ]
        monkeypatch.undo()
        res = run_dedup(p, metrics=["features"], k=3, backend="numpy")
        files = [f.stem for f in cache.glob("reference-mlp-*.npz")]
        assert files == [res.states["features"]["embedder"]]
    finally:
        p.close()


def test_cli_output_keeps_brackets_and_empty_project_names_source_add(
    tmp_path: Path, fashion_mnist_dir: Path
) -> None:
    from typer.testing import CliRunner

    from retest.cli.main import app

    runner = CliRunner()
    p = _project(tmp_path / "proj", fashion_mnist_dir)
    p.close()
    res = runner.invoke(
        app, ["dedup", "-p", str(tmp_path / "proj"), "--metrics", "l2", "--k", "2"]
    )
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())  # the title may wrap
    assert "(retest.toml [thresholds] overrides)" in flat  # rich ate it before

    Project.init(tmp_path / "empty", name="e", classes=["a", "b"]).close()
    res = runner.invoke(
        app, ["dedup", "-p", str(tmp_path / "empty"), "--metrics", "l2"]
    )
    assert res.exit_code == 1
    line = res.output.strip()
    assert "\n" not in line and "retest source add" in line, line
