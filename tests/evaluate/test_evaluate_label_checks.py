"""``retest compare`` refuses labels that would silently give wrong accuracies.

1-based labels against 0-based predictions used to pass (K was inferred from the
labels, so every label was "in range") and every model scored about 0.5 % with
exit 0. Float labels must be refused, never truncated.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from retest.cli.main import app
from retest.errors import RetestWarning

runner = CliRunner()
K = 10


@pytest.fixture
def testbed(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(5)
    out: dict[str, Path] = {}
    for side, n, acc in (("orig", 400, 0.9), ("new", 300, 0.8)):
        y = np.arange(n) % K
        d = tmp_path / f"pred_{side}"
        d.mkdir()
        for m in range(4):
            a = acc - 0.1 * m
            pred = np.where(rng.random(n) < a, y, rng.integers(0, K, n))
            (d / f"m{m}_predictions.json").write_text(json.dumps(pred.tolist()))
        np.save(tmp_path / f"{side}_labels.npy", y)
        out[f"labels_{side}"] = tmp_path / f"{side}_labels.npy"
        out[f"pred_{side}"] = d
    return out


def _compare(tb: dict[str, Path], out: Path, *extra: str):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RetestWarning)
        return runner.invoke(
            app,
            [
                "compare",
                "--labels-orig",
                str(tb["labels_orig"]),
                "--labels-new",
                str(tb["labels_new"]),
                "--predictions-orig",
                str(tb["pred_orig"]),
                "--predictions-new",
                str(tb["pred_new"]),
                "--bootstrap",
                "200",
                "--out",
                str(out),
                "--json",
                *extra,
            ],
        )


def _error_line(res) -> str:  # type: ignore[no-untyped-def]
    assert "Traceback" not in res.output
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, res.output
    return errors[0]


def _hand_accuracies(tb: dict[str, Path], side: str) -> dict[str, float]:
    """Each model's accuracy counted straight from the files."""
    y = np.load(tb[f"labels_{side}"])
    return {
        p.name.removesuffix("_predictions.json"): float(
            np.mean(np.array(json.loads(p.read_text())) == y)
        )
        for p in sorted(tb[f"pred_{side}"].glob("*_predictions.json"))
    }


def _reported(res, key: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    return {r["model"]: r[key] for r in json.loads(res.stdout)["table"]["rows"]}


def test_correct_labels_still_compare(testbed: dict[str, Path], tmp_path: Path) -> None:
    res = _compare(testbed, tmp_path / "out")
    assert res.exit_code == 0, res.output
    orig, new = _hand_accuracies(testbed, "orig"), _hand_accuracies(testbed, "new")
    assert min(orig.values()) > 0.5 and len(orig) == 4
    assert _reported(res, "orig_acc") == pytest.approx(orig)
    assert _reported(res, "new_acc") == pytest.approx(new)


@pytest.mark.parametrize("side", ["orig", "new"])
@pytest.mark.parametrize("num_classes", [None, "10"])
def test_one_based_labels_are_refused(
    testbed: dict[str, Path], tmp_path: Path, side: str, num_classes: str | None
) -> None:
    path = testbed[f"labels_{side}"]
    np.save(path, np.load(path) + 1)
    extra = ("--num-classes", num_classes) if num_classes else ()
    res = _compare(testbed, tmp_path / "out", *extra)
    assert res.exit_code == 1, res.output
    line = _error_line(res)
    assert path.name in line and "look 1-based" in line and "subtract 1" in line
    assert not (tmp_path / "out").exists()


def test_num_classes_overrides_the_one_based_guess(
    testbed: dict[str, Path], tmp_path: Path
) -> None:
    """Labels 1..10 against predictions 0..9 are fine when there are 11 classes."""
    path = testbed["labels_new"]
    np.save(path, np.load(path) + 1)
    res = _compare(testbed, tmp_path / "out", "--num-classes", "11")
    assert res.exit_code == 0, res.output
    # taken as given: the shifted labels are class ids 1..10 of 11, so models
    # that predict 0..9 now score by chance on the new set
    new = _hand_accuracies(testbed, "new")
    assert max(new.values()) < 0.2
    assert _reported(res, "new_acc") == pytest.approx(new)
    assert _reported(res, "orig_acc") == pytest.approx(
        _hand_accuracies(testbed, "orig")
    )


def test_float_labels_are_refused(testbed: dict[str, Path], tmp_path: Path) -> None:
    path = testbed["labels_orig"]
    y = np.load(path).astype(np.float64)
    y[7] = 6.5
    np.save(path, y)
    res = _compare(testbed, tmp_path / "out")
    assert res.exit_code == 1, res.output
    line = _error_line(res)
    assert path.name in line and "integer class ids" in line and "6.5" in line


def test_labels_beyond_num_classes(testbed: dict[str, Path], tmp_path: Path) -> None:
    res = _compare(testbed, tmp_path / "out", "--num-classes", "8")
    assert res.exit_code == 1, res.output
    assert "orig_labels.npy" in _error_line(res)


def test_out_is_a_file(testbed: dict[str, Path], tmp_path: Path) -> None:
    f = tmp_path / "report.txt"
    f.write_text("x")
    res = _compare(testbed, f)
    assert res.exit_code == 2, res.output
    assert "report.txt is a file" in _error_line(res)
    assert f.read_text() == "x"
