"""``retest models`` through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import joblib
import numpy as np
from sklearn.linear_model import LogisticRegression
from typer.testing import CliRunner

from retest.cli.main import app
from retest.datasets.predictions import read_predictions

runner = CliRunner()


def test_models_list_json_and_table() -> None:
    res = runner.invoke(app, ["models", "list", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    names = {m["name"] for m in data["models"]}
    assert len(names) >= 12 and "knn-5" in names
    assert {"sklearn", "onnx", "torchscript"} <= set(data["runner_kinds"])
    quick = json.loads(
        runner.invoke(app, ["models", "list", "--preset", "quick", "--json"]).stdout
    )
    assert 0 < len(quick["models"]) < len(data["models"])
    table = runner.invoke(app, ["models", "list", "--pattern", "knn-*"])
    assert (
        table.exit_code == 0
        and "knn-1" in table.stdout
        and "logreg" not in table.stdout
    )


def test_models_predict_writes_a_predictions_file(
    tmp_path: Path, digits: tuple
) -> None:
    x, y = digits
    est = LogisticRegression(max_iter=300).fit(x[:800].reshape(800, -1) / 255, y[:800])
    joblib.dump(est, tmp_path / "lr.joblib")
    np.save(tmp_path / "imgs.npy", x[800:900])
    out = tmp_path / "preds" / "lr.npy"
    res = runner.invoke(
        app,
        ["models", "predict", "sklearn", str(tmp_path / "lr.joblib"), "--images", str(tmp_path / "imgs.npy"),
         "--out", str(out), "--num-classes", "10", "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n"] == 100
    pred = read_predictions(out, n_classes=10)
    np.testing.assert_array_equal(
        pred.top1, est.predict(x[800:900].reshape(100, -1) / 255)
    )


def test_models_errors_are_one_line() -> None:
    res = runner.invoke(
        app,
        [
            "models",
            "predict",
            "onxx",
            "m.onnx",
            "--images",
            "i.npy",
            "--out",
            "o.npy",
            "--num-classes",
            "3",
        ],
    )
    assert res.exit_code == 2
    assert "Unknown model runner kind 'onxx'. Did you mean 'onnx'?" in res.output
    assert "Traceback" not in res.output
    bad = runner.invoke(app, ["models", "list", "--preset", "fast"])
    assert bad.exit_code == 2 and "--preset must be" in bad.output
