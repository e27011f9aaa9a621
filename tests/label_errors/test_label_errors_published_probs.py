"""Probabilities as published (float16, rows not summing exactly to 1), bad --out, bad labels.

cleanlab accepts any matrix with entries in [0, 1] (to 1e-6) whatever its row sums;
retest must accept the same input, warn once with the worst row sum, and flag exactly
what cleanlab's ``find_label_issues`` flags.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from cleanlab.filter import find_label_issues
from typer.testing import CliRunner

from retest.cli.main import app
from retest.errors import InputValidationError, RetestWarning
from retest.label_errors.finders import ProbabilitySumWarning, find_label_errors
from retest.stages.label_errors import load_label_error_inputs, run_label_errors

runner = CliRunner()
CLEANLAB_NAME = {
    "prune-by-class": "prune_by_class",
    "prune-by-noise-rate": "prune_by_noise_rate",
    "both": "both",
}


def _off_sum_float16(p: np.ndarray, seed: int) -> np.ndarray:
    """float16 rows scaled to sum to 0.986–1.0003, as in released probability files."""
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.9875, 1.0, size=(p.shape[0], 1))
    q = (p.astype(np.float64) * scale).astype(np.float16)
    sums = q.astype(np.float64).sum(axis=1)
    keep = (sums >= 0.986) & (sums <= 1.0003)
    q[~keep] = p[~keep].astype(np.float16)  # rows the rounding pushed out: unscaled
    sums = q.astype(np.float64).sum(axis=1)
    assert sums.min() >= 0.986 and sums.max() <= 1.0003 and sums.min() < 0.99
    return q


def _cleanlab_mask(y: np.ndarray, q: np.ndarray, method: str) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(
            find_label_issues(
                y,
                q.astype(np.float32),  # retest reads float16 as exact float32
                filter_by=CLEANLAB_NAME[method],
                min_examples_per_class=5,
                n_jobs=1,
            )
        )


@pytest.fixture
def synthetic(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(3)
    k, n = 4, 600
    y = np.repeat(np.arange(k), n // k)
    logits = rng.normal(size=(n, k)) * 1.5 + 2.5 * np.eye(k)[y]
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    noisy = y.copy()
    flip = rng.random(n) < 0.15
    noisy[flip] = (y[flip] + 1) % k
    q = _off_sum_float16(p, 1)
    paths = {"labels": tmp_path / "labels.npy", "probs": tmp_path / "probs16.npy"}
    np.save(paths["labels"], noisy)
    np.save(paths["probs"], q)
    return paths


def test_off_sum_rows_warn_once_and_match_cleanlab(
    synthetic: dict[str, Path], tmp_path: Path
) -> None:
    inputs = load_label_error_inputs(
        labels=synthetic["labels"], pred_probs=synthetic["probs"]
    )
    q = np.load(synthetic["probs"])
    sums = q.astype(np.float32).sum(axis=1, dtype=np.float64)
    worst = int(np.abs(sums - 1).argmax())
    with pytest.warns(ProbabilitySumWarning) as rec:
        run = run_label_errors(inputs, tmp_path / "out")
    assert len(rec) == 1  # one warning for the stage, not one per pass
    msg = str(rec[0].message)
    assert f"row {worst} sums to {sums[worst]:.4f}" in msg
    assert issubclass(rec[0].category, RetestWarning)
    flagged = np.zeros(q.shape[0], dtype=bool)
    flagged[[e.index for e in run.ranked]] = True
    np.testing.assert_array_equal(
        flagged, _cleanlab_mask(inputs.labels, q, "prune-by-noise-rate")
    )
    assert flagged.sum() > 20


def test_what_cleanlab_refuses_is_still_refused() -> None:
    y = np.array([0, 1, 1, 0])
    ok = np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.7], [0.6, 0.4]])
    with pytest.raises(InputValidationError, match="above 1 \\(row 2\\)"):
        find_label_errors(y, np.where([[0, 0], [0, 0], [1, 0], [0, 0]], 1.5, ok))
    with pytest.raises(InputValidationError, match="negative values \\(row 1\\)"):
        find_label_errors(y, ok - np.array([[0, 0], [0.3, 0], [0, 0], [0, 0]]))
    with pytest.raises(InputValidationError, match="NaN"):
        find_label_errors(y, np.where(ok > 0.85, np.nan, ok))
    # a rounding error of 1e-7 below 0 is within cleanlab's tolerance
    tiny = ok.copy()
    tiny[0] = [1.0 + 1e-7, -1e-7]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        find_label_errors(y, tiny, method="argmax")


def test_cli_accepts_published_style_probs_and_prints_the_warning(
    synthetic: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = runner.invoke(
            app,
            [
                "label-errors",
                "--labels",
                str(synthetic["labels"]),
                "--pred-probs",
                str(synthetic["probs"]),
                "--out",
                str(out),
                "--json",
            ],
        )
    assert res.exit_code == 0, res.output
    assert [
        str(w.message)[:36] for w in caught if w.category is ProbabilitySumWarning
    ] == ["pred_probs rows do not all sum to 1:"]
    report = json.loads((out / "report.json").read_text())
    assert report["n_flagged"] > 20


@pytest.mark.parametrize("make", ["file", "file_parent"])
@pytest.mark.parametrize("command", ["label-errors", "compare"])
def test_out_pointing_at_a_file_is_one_line(
    synthetic: dict[str, Path], tmp_path: Path, make: str, command: str
) -> None:
    f = tmp_path / "taken"
    f.write_text("keep me")
    out = f if make == "file" else f / "sub"
    if command == "label-errors":
        args = ["label-errors", "--labels", str(synthetic["labels"])]
        args += ["--pred-probs", str(synthetic["probs"]), "--out", str(out)]
    else:
        args = ["compare", "--example", "--bootstrap", "200", "--out", str(out)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RetestWarning)
        res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "taken" in errors[0] and "is a file" in errors[0]
    assert f.read_text() == "keep me"


def test_one_based_labels_are_diagnosed(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 20)
    p = rng.dirichlet(np.ones(3), size=y.size)
    np.save(tmp_path / "y1.npy", y + 1)
    np.save(tmp_path / "p.npy", p)
    res = runner.invoke(
        app,
        [
            "label-errors",
            "--labels",
            str(tmp_path / "y1.npy"),
            "--pred-probs",
            str(tmp_path / "p.npy"),
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert res.exit_code == 1, res.output
    assert "look 1-based" in res.stderr and "subtract 1" in res.stderr
    # the labels file is at fault, so the line starts with it
    assert res.stderr.startswith(f"error: {tmp_path / 'y1.npy'}: "), res.stderr
    np.save(tmp_path / "yf.npy", y + 0.5)
    res = runner.invoke(
        app,
        [
            "label-errors",
            "--labels",
            str(tmp_path / "yf.npy"),
            "--pred-probs",
            str(tmp_path / "p.npy"),
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert res.exit_code == 1 and "integer class ids" in res.stderr, res.output


# ------------------------------------------------------------------ real data (slow)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["prune-by-noise-rate", "prune-by-class", "both"])
@pytest.mark.parametrize("engine", ["cleanlab", "chunked"])
def test_published_cifar10_probs_scaled_off_sum(
    shared_data: Path, tmp_path: Path, method: str, engine: str
) -> None:
    d = shared_data / "cl"
    if not (d / "pred_probs.npy").is_file():
        pytest.skip(f"{d}/pred_probs.npy is absent (confident-learning data)")
    p16 = np.load(d / "pred_probs.npy")
    s = np.load(d / "noisy_labels.npy").astype(np.int64)
    y = np.load(d / "true_labels.npy").astype(np.int64)
    q = _off_sum_float16(p16, 0)
    with pytest.warns(ProbabilitySumWarning, match=r"sums to 0\.98"):
        mask = find_label_errors(s, q, method=method, engine=engine, chunk_rows=9999)
    expected = _cleanlab_mask(s, q, method)
    np.testing.assert_array_equal(mask, expected)
    precision = (mask & (s != y)).sum() / mask.sum()
    print(
        f"\n{method} ({engine}) on float16 rows summing to 0.986–1.0003: "
        f"{mask.sum()} flagged, identical to cleanlab, precision {precision:.3f}"
    )
    assert precision > 0.7
