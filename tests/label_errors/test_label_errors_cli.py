"""``retest label-errors`` through its real interface, with real files in tmp_path."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from figure_checks import assert_png  # type: ignore[import-not-found]
from retest.cli.main import app
from retest.label_errors.noise import generate_noise_matrix, generate_noisy_labels

runner = CliRunner()


@pytest.fixture
def arrays(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    k = 3
    y = np.repeat(np.arange(k), 100)
    logits = rng.normal(size=(y.size, k)) + 4.0 * np.eye(k)[y]
    p = (np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)).astype(np.float32)
    s = generate_noisy_labels(
        y, generate_noise_matrix(k, 2.4, random_state=1), random_state=2
    )
    paths = {
        "labels": tmp_path / "labels.npy",
        "true": tmp_path / "true.npy",
        "probs": tmp_path / "probs.npy",
        "images": tmp_path / "images.npy",
    }
    np.save(paths["labels"], s)
    np.save(paths["true"], y)
    np.save(paths["probs"], p)
    np.save(
        paths["images"], rng.integers(0, 255, size=(y.size, 8, 8, 3), dtype=np.uint8)
    )
    tb = tmp_path / "testbed"
    tb.mkdir()
    for m in range(5):  # 5 models' top-1 predictions, CIFAR-10.1 JSON style
        pred = np.where(rng.random(y.size) < 0.9, y, (y + 1) % k)
        (tb / f"model{m}_predictions.json").write_text(json.dumps(pred.tolist()))
    paths["testbed"] = tb
    return paths


def test_arrays_with_true_labels_and_images(
    arrays: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    res = runner.invoke(
        app,
        [
            "label-errors",
            "--labels",
            str(arrays["labels"]),
            "--pred-probs",
            str(arrays["probs"]),
            "--true-labels",
            str(arrays["true"]),
            "--images",
            str(arrays["images"]),
            "--class-names",
            "cat,dog,frog",
            "--top",
            "5",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "precision" in res.output and "flagged" in res.output
    rows = list(csv.DictReader((out / "label_errors.csv").open()))
    assert rows and rows[0]["rank"] == "1"
    assert {
        "index",
        "given",
        "suggested",
        "score",
        "given_name",
        "suggested_name",
    } <= set(rows[0])
    scores = [float(r["score"]) for r in rows]
    assert scores == sorted(scores)
    report = json.loads((out / "report.json").read_text())
    assert report["n_flagged"] == len(rows) and report["detection"]["precision"] > 0.5
    assert_png(out / "contact_sheet.png", min_side=100)
    before = (out / "label_errors.csv").read_bytes()
    again = runner.invoke(
        app,
        [
            "label-errors",
            "--labels",
            str(arrays["labels"]),
            "--pred-probs",
            str(arrays["probs"]),
            "--out",
            str(out),
            "--json",
        ],
    )
    assert again.exit_code == 0, again.output
    data = json.loads(again.output)
    assert data["report"]["detection"] is None and len(data["top"]) <= 20
    assert (out / "label_errors.csv").read_bytes() != b""  # rewritten atomically
    assert before.count(b"\n") == (out / "label_errors.csv").read_bytes().count(b"\n")


def test_testbed_vote_ensemble(arrays: dict[str, Path], tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "label-errors",
            "--labels",
            str(arrays["labels"]),
            "--predictions-dir",
            str(arrays["testbed"]),
            "--method",
            "confident-joint",
            "--out",
            str(tmp_path / "o"),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["report"]["source"]["ensemble"] == "votes"
    assert len(data["report"]["source"]["models"]) == 5
    assert data["report"]["method"] == "confident-joint"


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        (["--method", "prune-by-clas"], 2, "Did you mean 'prune-by-class'"),
        (["--class-names", "a"], 2, "--class-names"),
        ([], 1, "exactly one of pred_probs"),
        (["--pred-probs", "missing.npy"], 1, "not found"),
    ],
)
def test_errors_are_one_line(
    arrays: dict[str, Path], tmp_path: Path, extra: list[str], code: int, message: str
) -> None:
    res = runner.invoke(
        app,
        [
            "label-errors",
            "--labels",
            str(arrays["labels"]),
            "--out",
            str(tmp_path / "o"),
            *extra,
        ],
    )
    assert res.exit_code == code, res.output
    assert message in res.output and "Traceback" not in res.output


def test_length_mismatch_is_reported(arrays: dict[str, Path], tmp_path: Path) -> None:
    np.save(tmp_path / "short.npy", np.load(arrays["probs"])[:-1])
    res = runner.invoke(
        app,
        [
            "label-errors",
            "--labels",
            str(arrays["labels"]),
            "--pred-probs",
            str(tmp_path / "short.npy"),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert res.exit_code == 1 and "same length: 300 labels, 299 rows" in res.output
