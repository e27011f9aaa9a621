"""Each runner kind end to end on real files in their real formats."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from retest.datasets.predictions import write_predictions
from retest.errors import ConfigError, InputValidationError, UnknownNameError
from retest.models.base import (
    RUNNER_KINDS,
    ModelRunner,
    TrainableRunner,
    get_model,
    list_models,
    load_model,
    runner_fingerprint,
)
from retest.models.prediction_files import PredictionFileRunner, runners_from_folders
from retest.models.sklearn_runner import SklearnRunner, stratified_subset
from retest.records import Predictions


@pytest.fixture
def torch() -> Any:
    return pytest.importorskip("torch", reason="torch models need the [torch] extra")


@pytest.fixture
def onnx_extra() -> None:
    """onnx builds the test models; onnxruntime runs them (both: the [onnx] extra)."""
    for name in ("onnx", "onnxruntime"):
        pytest.importorskip(name, reason=f"ONNX models need {name} (the [onnx] extra)")


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _check_top5(pred: Predictions, probs: np.ndarray) -> None:
    order = np.argsort(-probs, axis=1, kind="stable")[:, :5]
    assert pred.k == 5
    np.testing.assert_array_equal(pred.top1, probs.argmax(axis=1))
    # Top-5 sets agree (order within near-ties may differ between float paths).
    assert all(set(a) == set(b) for a, b in zip(pred.topk, order, strict=True))


def test_sklearn_joblib_roundtrip(tmp_path: Path, digits: tuple) -> None:
    x, y = digits
    feats = x.reshape(len(x), -1).astype(np.float32) / 255
    est = LogisticRegression(max_iter=500).fit(feats[:1000], y[:1000])
    path = tmp_path / "logreg.joblib"
    joblib.dump(est, path)
    runner = load_model("sklearn", str(path), name="logreg", n_classes=10)
    assert isinstance(runner, ModelRunner)
    pred = runner.predict(x[1000:], dataset="test", batch_size=97)  # uneven batches
    expected = est.predict_proba(feats[1000:])
    np.testing.assert_allclose(pred.probs, expected, atol=1e-6)
    _check_top5(pred, expected)
    assert pred.model == "logreg" and pred.dataset == "test" and pred.n == len(x) - 1000
    assert (pred.top1 == y[1000:]).mean() > 0.85
    # A model trained for 10 classes is refused on a 5-class dataset.
    with pytest.raises(InputValidationError, match="trained for 10 classes"):
        load_model("sklearn", str(path), name="logreg", n_classes=5)


def test_sklearn_progress_and_label_range(digits: tuple) -> None:
    x, y = digits
    runner = get_model("random-forest", n_classes=10, preset="quick")
    assert isinstance(runner, TrainableRunner) and not runner.fitted
    seen: list[tuple[str, int, int | None]] = []
    runner.fit(x[:500], y[:500], progress=lambda t, d, n: seen.append((t, d, n)))
    train_ticks = [s for s in seen if s[0] == "train random-forest"]
    assert train_ticks[0][1] == 0 and train_ticks[-1][1:] == (50, 50)
    assert len(train_ticks) > 3  # staged, not one jump
    bad = y[:500].copy()
    bad[3] = 12
    with pytest.raises(
        InputValidationError,
        match=r"training labels of model 'random-forest'.*\[0, 10\)",
    ):
        get_model("random-forest", n_classes=10).fit(x[:500], bad)


def _tiny_net(torch: Any) -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))


def test_torch_state_dict_and_torchscript(
    tmp_path: Path, digits: tuple, torch: Any
) -> None:
    x, _ = digits
    net = _tiny_net(torch)
    weights = tmp_path / "w.pt"
    torch.save(net.state_dict(), weights)
    fresh = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))
    r1 = load_model("torch", str(weights), name="tiny", n_classes=10, module=fresh)
    p1 = r1.predict(x[:300], dataset="d", batch_size=64)
    with torch.no_grad():
        logits = net(torch.from_numpy(x[:300, None].astype(np.float32) / 255)).numpy()
    np.testing.assert_allclose(p1.probs, _softmax(logits.astype(np.float64)), atol=1e-5)
    scripted = tmp_path / "tiny.ts"
    torch.jit.script(net).save(str(scripted))
    r2 = load_model("torchscript", str(scripted), name="tiny", n_classes=10)
    p2 = r2.predict(x[:300], dataset="d")
    np.testing.assert_array_equal(p1.topk, p2.topk)
    np.testing.assert_allclose(p1.probs, p2.probs, atol=1e-6)
    # Weights of another architecture are refused with the file named.
    other = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 7))
    with pytest.raises(InputValidationError, match="do not fit model"):
        load_model("torch", str(weights), name="tiny", n_classes=10, module=other)


def _onnx_linear(path: Path, w: np.ndarray, b: np.ndarray) -> None:
    from onnx import TensorProto, checker, helper, numpy_helper

    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["h"]),
            helper.make_node("Add", ["h", "b"], ["logits"]),
        ],
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, w.shape[0]])],
        [
            helper.make_tensor_value_info(
                "logits", TensorProto.FLOAT, [None, w.shape[1]]
            )
        ],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    checker.check_model(model)
    path.write_bytes(model.SerializeToString())


@pytest.mark.usefixtures("onnx_extra")
def test_onnx_runner(tmp_path: Path, digits: tuple) -> None:
    x, _ = digits
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 10)).astype(np.float32)
    b = rng.standard_normal(10).astype(np.float32)
    path = tmp_path / "lin.onnx"
    _onnx_linear(path, w, b)
    runner = load_model("onnx", str(path), name="lin", n_classes=10, layout="flat")
    pred = runner.predict(x[:257], dataset="d", batch_size=100)
    feats = x[:257].reshape(257, -1).astype(np.float64) / 255
    expected = _softmax(feats @ w + b)
    np.testing.assert_allclose(pred.probs, expected, atol=1e-5)
    _check_top5(pred, expected)
    # The runner pickles (for Dask) and rebuilds its session from the file.
    import pickle

    again = pickle.loads(pickle.dumps(runner)).predict(x[:257], dataset="d")
    np.testing.assert_array_equal(again.topk, pred.topk)


@pytest.mark.usefixtures("onnx_extra")
def test_wrong_number_of_classes_names_the_model(tmp_path: Path, digits: tuple) -> None:
    x, _ = digits
    path = tmp_path / "seven.onnx"
    rng = np.random.default_rng(1)
    _onnx_linear(
        path, rng.standard_normal((64, 7)).astype(np.float32), np.zeros(7, np.float32)
    )
    runner = load_model(
        "onnx", str(path), name="seven-way", n_classes=10, layout="flat"
    )
    with pytest.raises(
        InputValidationError,
        match="model 'seven-way' outputs 7 classes but the dataset has 10",
    ):
        runner.predict(x[:10])


def test_prediction_files(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    probs = rng.dirichlet(np.ones(10), size=50).astype(np.float32)
    for ds in ("orig", "new"):
        (tmp_path / ds).mkdir()
        write_predictions(
            Predictions.from_scores("resnet", ds, probs), tmp_path / ds / "resnet.npy"
        )
        (tmp_path / ds / "vgg_predictions.json").write_text(
            json.dumps(rng.integers(0, 10, 50).tolist())
        )
    (tmp_path / "orig" / "only_orig.json").write_text(json.dumps([0] * 50))
    runners = runners_from_folders(
        {"orig": tmp_path / "orig", "new": tmp_path / "new"}, n_classes=10
    )
    assert [r.name for r in runners] == ["resnet", "vgg"]  # only_orig left out
    pred = runners[0].predict(np.zeros((50, 1), np.uint8), dataset="new")
    np.testing.assert_array_equal(pred.top1, probs.argmax(1))
    with pytest.raises(
        InputValidationError, match="50 predictions but dataset 'new' has 40"
    ):
        runners[0].predict(np.zeros((40, 1), np.uint8), dataset="new")
    with pytest.raises(ConfigError, match="no prediction file for dataset 'v7'"):
        runners[1].predict(np.zeros((50, 1), np.uint8), dataset="v7")
    with pytest.raises(InputValidationError, match=r"\[0, 5\)"):
        PredictionFileRunner(
            "vgg", {"new": tmp_path / "new" / "vgg_predictions.json"}, n_classes=5
        ).predict(np.zeros((50, 1), np.uint8), dataset="new")


def test_unknown_model_names_get_suggestions() -> None:
    with pytest.raises(UnknownNameError, match="Did you mean 'logreg-c1'"):
        get_model("logreg-cl", n_classes=10)
    with pytest.raises(
        UnknownNameError,
        match=r"Unknown model runner kind 'onxx'\. Did you mean 'onnx'",
    ):
        load_model("onxx", "x.onnx", name="m", n_classes=10)
    assert {"sklearn", "torch", "torchscript", "onnx", "predictions"} <= set(
        RUNNER_KINDS.names()
    )


def test_registry_lists_at_least_twelve_models() -> None:
    full = list_models(preset="full")
    quick = list_models(preset="quick")
    assert len(full) >= 12 and {s.name for s in quick} < {s.name for s in full}
    names = {s.name for s in full}
    assert {"knn-1", "knn-5", "pca-rbf-svm", "gaussian-nb"} <= names
    # The torch CNN is listed exactly when torch can run it.
    assert ("small-cnn" in names) == (importlib.util.find_spec("torch") is not None)
    assert sum(s.name.startswith("random-relu-") for s in full) >= 2
    assert sum(s.name.startswith("logreg-") for s in full) >= 2


def test_fingerprint_tracks_parameters_and_training_data(digits: tuple) -> None:
    x, y = digits
    a = get_model("logreg-c1", n_classes=10)
    b = get_model("logreg-c0.01", n_classes=10)
    assert runner_fingerprint(a) == runner_fingerprint(
        get_model("logreg-c1", n_classes=10)
    )
    assert runner_fingerprint(a) != runner_fingerprint(b)
    assert runner_fingerprint(a) != runner_fingerprint(
        get_model("logreg-c1", n_classes=10, random_state=1)
    )
    before = runner_fingerprint(a, train_digest="d")
    a.fit(x[:300], y[:300])  # fitting must not change the parameters part of the key
    assert isinstance(a, SklearnRunner)
    from retest.models.base import array_digest

    assert runner_fingerprint(a) == runner_fingerprint(
        get_model("logreg-c1", n_classes=10),
        train_digest=array_digest(x[:300], y[:300]),
    )
    assert before != runner_fingerprint(a)


def test_stratified_subset_keeps_class_shares() -> None:
    y = np.repeat(np.arange(4), [100, 50, 30, 20])
    idx = stratified_subset(y, 40, random_state=3)
    assert idx.size == 40 and np.unique(idx).size == 40
    np.testing.assert_array_equal(np.bincount(y[idx]), [20, 10, 6, 4])
    np.testing.assert_array_equal(idx, stratified_subset(y, 40, random_state=3))
