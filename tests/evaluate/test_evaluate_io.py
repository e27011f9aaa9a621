"""Prediction/label files and testbed folders: round trips and every bad-file case."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from retest.datasets.predictions import (
    list_prediction_files,
    model_name_from_path,
    read_labels,
    read_model_names,
    read_predictions,
    read_testbed,
    write_labels,
    write_predictions,
    write_testbed,
)
from retest.errors import DataIntegrityError, InputValidationError
from retest.records import Predictions


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("suffix", [".json", ".npy", ".csv"])
def test_round_trip_top1_and_topk(tmp_path: Path, suffix: str) -> None:
    rng = np.random.default_rng(0)
    top1 = Predictions.from_labels("m", "d", rng.integers(0, 10, 50))
    top5 = Predictions("m", "d", np.argsort(rng.random((50, 10)), axis=1)[:, :5])
    for p in (top1, top5):
        path = write_predictions(p, tmp_path / f"m{p.k}{suffix}")
        back = read_predictions(path)
        assert np.array_equal(back.topk, p.topk)
        assert back.model == f"m{p.k}"


@pytest.mark.parametrize("suffix", [".npy", ".csv"])
def test_round_trip_scores_probs_and_logits(tmp_path: Path, suffix: str) -> None:
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 3, (40, 10))
    for scores, is_prob in ((_softmax(logits), True), (logits, False)):
        p = Predictions.from_scores("m", "d", scores, probabilities=is_prob)
        back = read_predictions(write_predictions(p, tmp_path / f"s{is_prob}{suffix}"))
        assert back.probs is not None and back.n_classes == 10
        np.testing.assert_allclose(back.probs, p.probs, rtol=1e-6)
        assert np.array_equal(
            back.topk, np.argsort(-logits, axis=1, kind="stable")[:, :5]
        )


def test_csv_layouts_are_documented_columns(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("id,prediction\n0,3\n1,4\n")
    (tmp_path / "b.csv").write_text("top1,top2\n3,1\n4,0\n")
    (tmp_path / "c.csv").write_text("prob_0,prob_1\n0.2,0.8\n0.6,0.4\n")
    assert read_predictions(tmp_path / "a.csv").top1.tolist() == [3, 4]
    assert read_predictions(tmp_path / "b.csv").topk.tolist() == [[3, 1], [4, 0]]
    assert read_predictions(tmp_path / "c.csv").top1.tolist() == [1, 0]
    (tmp_path / "d.csv").write_text("foo,bar\n1,2\n")
    with pytest.raises(InputValidationError, match=r"d\.csv.*'prediction'"):
        read_predictions(tmp_path / "d.csv")


def test_imagenetv2_style_npy(tmp_path: Path) -> None:
    arr = np.array([[5, 1, 2, 3, 4], [0, 9, 8, 7, 6]], dtype=np.int64)
    np.save(tmp_path / "resnet50.npy", arr)
    p = read_predictions(tmp_path / "resnet50.npy", dataset="v2")
    assert p.model == "resnet50" and p.k == 5 and p.dataset == "v2"


def test_model_names_and_testbed(tmp_path: Path) -> None:
    d = tmp_path / "preds"
    write_testbed(
        {m: Predictions.from_labels(m, "x", [0, 1, 2]) for m in ("a", "b", "c")}, d
    )
    assert sorted(p.name for p in d.iterdir()) == [
        "a_predictions.json",
        "b_predictions.json",
        "c_predictions.json",
    ]
    (tmp_path / "names.csv").write_text(
        "prediction_file_model,paper_name\na,alpha\nb,\n"
    )
    names = read_model_names(tmp_path / "names.csv")
    assert names == {"a": "alpha", "b": "b"}
    tb = read_testbed(d, model_names=names)
    assert sorted(tb) == ["alpha", "b", "c"] and tb["alpha"].model == "alpha"
    assert model_name_from_path("x/cudaconvnet_predictions.json") == "cudaconvnet"


def test_duplicate_model_names_name_both_files(tmp_path: Path) -> None:
    write_predictions(
        Predictions.from_labels("a", "x", [0, 1]), tmp_path / "a_predictions.json"
    )
    write_predictions(Predictions.from_labels("a", "x", [0, 1]), tmp_path / "a.npy")
    with pytest.raises(
        InputValidationError,
        match=r"duplicate model name 'a'.*a\.npy.*a_predictions\.json",
    ):
        list_prediction_files(tmp_path)
    (tmp_path / "a.npy").unlink()
    write_predictions(Predictions.from_labels("b", "x", [0, 1]), tmp_path / "b.csv")
    (tmp_path / "n.csv").write_text(
        "prediction_file_model,paper_name\na,same\nb,same\n"
    )
    with pytest.raises(InputValidationError, match="duplicate model name 'same'"):
        list_prediction_files(
            tmp_path, model_names=read_model_names(tmp_path / "n.csv")
        )


@pytest.mark.parametrize(
    ("name", "content", "error", "match"),
    [
        ("e.json", b"", DataIntegrityError, "empty"),
        ("t.json", b"[1, 2, 3, 4", DataIntegrityError, "truncated"),
        ("o.json", b'{"a": 1}', InputValidationError, "list"),
        ("s.json", b"[[1, 2], [3, 3]]", InputValidationError, r"row 1 is \[3, 3\]"),
        ("n.json", b"[1, -2]", InputValidationError, "non-negative class ids"),
        ("x.txt", b"1", InputValidationError, "unknown predictions format"),
    ],
)
def test_bad_prediction_files_name_the_file(
    tmp_path: Path, name: str, content: bytes, error: type, match: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(error, match=match) as info:
        read_predictions(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_truncated_npy_and_bad_scores(tmp_path: Path) -> None:
    np.save(tmp_path / "full.npy", np.zeros((100, 5), dtype=np.int64) + np.arange(5))
    data = (tmp_path / "full.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataIntegrityError, match=r"cut\.npy.*truncated"):
        read_predictions(tmp_path / "cut.npy")
    probs = np.full((3, 4), 0.25)
    probs[1, 0] = np.nan
    np.save(tmp_path / "nan.npy", probs)
    with pytest.raises(InputValidationError, match=r"nan\.npy.*NaN"):
        read_predictions(tmp_path / "nan.npy")
    neg = np.array([[1.2, -0.2, 0.0], [0.5, 0.5, 0.0]])
    np.save(tmp_path / "neg.npy", neg)
    with pytest.raises(InputValidationError, match=r"neg\.npy.*negative"):
        read_predictions(tmp_path / "neg.npy")
    (tmp_path / "cut.csv").write_text("prob_0,prob_1\n0.5,0.5\n0.5\n")
    with pytest.raises(DataIntegrityError, match=r"cut\.csv.*row 3.*truncated"):
        read_predictions(tmp_path / "cut.csv")


def test_labels_round_trip_and_errors(tmp_path: Path) -> None:
    y = np.array([0, 3, 2, 9])
    for suffix in (".npy", ".json", ".csv"):
        assert (
            read_labels(write_labels(y, tmp_path / f"y{suffix}")).tolist() == y.tolist()
        )
    np.save(
        tmp_path / "u16.npy", y.astype(np.uint16)
    )  # CIFAR-10 test labels are uint16
    assert read_labels(tmp_path / "u16.npy").dtype == np.int64
    (tmp_path / "bad.json").write_text(json.dumps([0, 1, 10]))
    with pytest.raises(InputValidationError, match=r"bad\.json.*\[0, 10\)"):
        read_labels(tmp_path / "bad.json", n_classes=10)
    with pytest.raises(DataIntegrityError, match="not found"):
        read_labels(tmp_path / "missing.npy")
    with pytest.raises(DataIntegrityError, match="no prediction files"):
        list_prediction_files(
            tmp_path / "empty" if (tmp_path / "empty").mkdir() is None else tmp_path
        )


def test_writes_are_atomic_and_leave_no_temp_files(tmp_path: Path) -> None:
    p = Predictions.from_labels("m", "d", [1, 2])
    write_predictions(p, tmp_path / "m_predictions.json")
    write_predictions(p, tmp_path / "m_predictions.json")  # overwrite in place
    assert [f.name for f in tmp_path.iterdir()] == ["m_predictions.json"]


def test_written_files_get_umask_permissions(tmp_path: Path) -> None:
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    path = write_labels([0, 1], tmp_path / "y.npy")
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask
