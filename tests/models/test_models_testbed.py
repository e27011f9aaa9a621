"""The built-in testbed: every model trains, predicts, and is seeded."""

from __future__ import annotations

import numpy as np
import pytest

from retest.models.base import get_model, list_models
from retest.models.testbed import build_testbed, preset_models


def test_every_testbed_model_learns_digits(digits: tuple) -> None:
    x, y = digits
    accs = {}
    for r in build_testbed("quick", n_classes=10, names=preset_models("full")):
        r.fit(x[:1200], y[:1200])  # type: ignore[attr-defined]
        pred = r.predict(x[1200:], dataset="test")
        assert pred.k == 5 and pred.n == len(x) - 1200
        assert pred.probs is not None and pred.probs.shape == (pred.n, 10)
        accs[r.name] = float((pred.top1 == y[1200:]).mean())
    assert len(accs) >= 12
    # Well above chance (10 %) for every model; the CNN gets only ~40 Adam steps
    # here (it is sized for tens of thousands of images): see the next test.
    cnn = accs.pop("small-cnn", 1.0)
    assert cnn > 0.15 and min(accs.values()) > 0.8, accs
    assert max(accs.values()) > 0.9, accs


def test_small_cnn_learns_with_enough_steps(digits: tuple) -> None:
    pytest.importorskip("torch")
    from retest.models.torch_runner import TorchRunner, small_cnn

    x, y = digits
    r = TorchRunner(
        "cnn", small_cnn, n_classes=10, epochs=8, lr=3e-3, train_batch_size=32
    )
    r.fit(x[:1200], y[:1200])
    assert (r.predict(x[1200:]).top1 == y[1200:]).mean() > 0.85


@pytest.mark.parametrize(
    "name", ["random-forest", "extra-trees", "mlp", "random-relu-256", "small-cnn"]
)
def test_same_seed_same_predictions(name: str, digits: tuple) -> None:
    x, y = digits
    runs = []
    for _ in range(2):
        r = get_model(name, n_classes=10, preset="quick", random_state=5)
        r.fit(x[:600], y[:600])  # type: ignore[attr-defined]
        runs.append(r.predict(x[600:900]))
    np.testing.assert_array_equal(runs[0].topk, runs[1].topk)
    np.testing.assert_array_equal(runs[0].probs, runs[1].probs)
    other = get_model(name, n_classes=10, preset="quick", random_state=6)
    other.fit(x[:600], y[:600])  # type: ignore[attr-defined]
    assert not np.array_equal(other.predict(x[600:900]).probs, runs[0].probs)


def test_presets() -> None:
    quick, full = preset_models("quick"), preset_models("full")
    assert set(quick) < set(full) and len(full) >= 12 and len(quick) >= 6
    assert all(s.description for s in list_models())
