"""Comparison table, report files, figure and the ``retest compare`` command."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from figure_checks import assert_pdf, assert_png  # type: ignore[import-not-found]
from retest.cli.main import app
from retest.datasets.predictions import write_labels, write_testbed
from retest.errors import DroppedModelWarning, InputValidationError
from retest.evaluate.fits import fit_new_vs_orig
from retest.evaluate.intervals import clopper_pearson
from retest.evaluate.plots import plot_comparison
from retest.evaluate.table import compare
from retest.records import Predictions
from retest.stages.report import (
    save_figure,
    table_to_latex,
    table_to_markdown,
    write_report,
)

N_ORIG, N_NEW, K = 200, 100, 10
# (correct on original, correct on new) planted per model
PLANTED = {
    "m_a": (190, 80),
    "m_b": (180, 85),
    "m_c": (160, 60),
    "m_d": (150, 55),
    "m_e": (120, 30),
}


def _preds(y: np.ndarray, n_correct: int, name: str, ds: str) -> Predictions:
    p = y.copy()
    p[n_correct:] = (y[n_correct:] + 1) % K
    return Predictions.from_labels(name, ds, p, n_classes=K)


def _make(tmp: Path, planted: dict[str, tuple[int, int]] = PLANTED) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    y_o, y_n = rng.integers(0, K, N_ORIG), rng.integers(0, K, N_NEW)
    tb_o = {m: _preds(y_o, c[0], m, "orig") for m, c in planted.items()}
    tb_n = {m: _preds(y_n, c[1], m, "new") for m, c in planted.items()}
    paths = {
        "labels_orig": write_labels(y_o, tmp / "orig_labels.npy"),
        "labels_new": write_labels(y_n, tmp / "new_labels.json"),
        "predictions_orig": tmp / "po",
        "predictions_new": tmp / "pn",
    }
    write_testbed(tb_o, tmp / "po")
    write_testbed(tb_n, tmp / "pn", fmt="npy")
    return paths


def _args(paths: dict[str, Path], out: Path, *extra: str) -> list[str]:
    args = ["compare", "--out", str(out), "--bootstrap", "2000"]
    for k, v in paths.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    return args + list(extra)


runner = CliRunner()


def test_compare_table_has_exact_counts_ranks_and_gap() -> None:
    rng = np.random.default_rng(0)
    y_o, y_n = rng.integers(0, K, N_ORIG), rng.integers(0, K, N_NEW)
    tb_o = [_preds(y_o, c[0], m, "orig") for m, c in PLANTED.items()]
    tb_n = [_preds(y_n, c[1], m, "new") for m, c in PLANTED.items()]
    table = compare(y_o, y_n, tb_o, tb_n)
    assert table.models == ("m_a", "m_b", "m_c", "m_d", "m_e")
    b = table.row("m_b")
    assert (b.orig.k, b.orig.n, b.new.k, b.new.n) == (180, 200, 85, 100)
    assert (b.rank_orig, b.rank_new, b.rank_delta) == (2, 1, 1)
    assert table.row("m_a").rank_delta == -1
    assert b.gap == pytest.approx(0.9 - 0.85)
    assert b.gap_lo < b.gap < b.gap_hi
    assert (b.orig.lo, b.orig.hi) == pytest.approx(clopper_pearson(180, 200))
    assert b.error_ratio == pytest.approx(0.15 / 0.1)
    df = table.to_frame()
    assert list(df["model"]) == list(table.models) and df.loc[1, "new_k"] == 85


def test_compare_warns_about_and_drops_one_sided_models() -> None:
    y = np.zeros(4, dtype=int)
    one = {
        m: Predictions.from_labels(m, "o", [0, 0, 0, 1])
        for m in ("a", "b", "only_orig")
    }
    two = {
        m: Predictions.from_labels(m, "n", [0, 1, 1, 1]) for m in ("a", "b", "only_new")
    }
    with pytest.warns(DroppedModelWarning, match="only_orig.*only_new"):
        table = compare(y, y, one, two)
    assert table.models == ("a", "b") and table.dropped == ("only_orig", "only_new")
    with pytest.raises(InputValidationError, match="duplicate model name 'a'"):
        compare(y, y, [one["a"], one["a"]], list(two.values()))


def test_report_formats(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, K, N_ORIG)
    tb = {m: _preds(y, c[0], m, "orig") for m, c in PLANTED.items()}
    tb2 = {
        m: _preds(y, c[0] - 10 * i, m, "new")
        for i, (m, c) in enumerate(PLANTED.items())
    }
    table = compare(y, y, tb, tb2)
    md = table_to_markdown(table)
    assert (
        "| Model | Orig. Accuracy | New Accuracy | Gap | Orig. Rank | New Rank | Δ Rank |"
        in md
    )
    lo, hi = clopper_pearson(190, 200)
    assert f"| m_a | 95.0 [{100 * lo:.1f}, {100 * hi:.1f}] | 95.0 [" in md
    assert r"m\_a" in table_to_latex(table) and r"\toprule" in table_to_latex(table)
    fit = fit_new_vs_orig(
        table.column("orig_acc"),
        table.column("new_acc"),
        names=table.models,
        n_boot=500,
    )
    paths = write_report(table, fit, tmp_path, figure_formats=("png", "svg"))
    with paths["csv"].open() as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["model"] == "m_a" and rows[0]["orig_k"] == "190"
    data = json.loads(paths["json"].read_text())
    assert data["rows"][4]["new_k"] == 120 - 40
    assert json.loads(paths["fit"].read_text())["n_boot"] == 500
    assert paths["png"].read_bytes()[:4] == b"\x89PNG"
    names = {f"comparison.{s}" for s in ("md", "csv", "tex", "json", "png", "svg")}
    assert {p.name for p in tmp_path.iterdir()} == names | {"fit.json"}


def test_plot_probit_axes_labels_and_deterministic_svg(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, K, N_ORIG)
    planted = {"p": (200, 0), "q": (150, 40), "r": (100, 20), "s": (60, 10)}
    table = compare(
        y,
        y[:N_NEW],
        {m: _preds(y, c[0], m, "o") for m, c in planted.items()},
        {m: _preds(y[:N_NEW], c[1], m, "n") for m, c in planted.items()},
    )
    fit = fit_new_vs_orig(
        table.column("orig_acc"),
        table.column("new_acc"),
        names=table.models,
        axes="probit",
        n_orig=table.column("orig_n"),
        n_new=table.column("new_n"),
        n_boot=500,
    )
    fig = plot_comparison(table, fit, label_models=["p", "q"])
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["p", "q"]  # rows are ordered by original rank
    assert any(lbl.get_text() == "50" for lbl in fig.axes[0].get_xticklabels())
    a = save_figure(fig, tmp_path / "a.svg").read_bytes()
    b = save_figure(
        plot_comparison(table, fit, label_models=["p", "q"]), tmp_path / "b.svg"
    )
    assert a == b.read_bytes()
    with pytest.raises(InputValidationError, match="zz"):
        plot_comparison(table, fit, label_models=["zz"])


# ----------------------------------------------------------------------------- CLI


def test_cli_compare_writes_files_and_prints_table(tmp_path: Path) -> None:
    paths = _make(tmp_path)
    out = tmp_path / "out"
    res = runner.invoke(app, _args(paths, out, "--label", "m_a"))
    assert res.exit_code == 0, res.output
    assert "m_b" in res.stdout and "90.0 [" in res.stdout
    assert "new = " in res.stdout and "slope [" in res.stdout
    for name in (
        "comparison.md",
        "comparison.csv",
        "comparison.tex",
        "comparison.json",
        "fit.json",
    ):
        assert (out / name).stat().st_size > 0
    assert_png(out / "comparison.png", min_side=400)
    assert_pdf(out / "comparison.pdf")
    res = runner.invoke(app, [*_args(paths, out), "--json", "--axes", "probit"])
    data = json.loads(res.stdout)
    assert data["fit"]["axes"] == "probit" and data["table"]["rows"][1]["new_k"] == 85


def test_cli_example_runs(tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["compare", "--example", "--out", str(tmp_path), "--bootstrap", "2000"]
    )
    assert res.exit_code == 0, res.output
    assert "shake_drop" in res.stdout and "new = " in res.stdout
    assert_png(tmp_path / "comparison.png", min_side=400)
    assert (
        len(list((tmp_path / "example_data" / "predictions" / "new").iterdir())) == 30
    )


def _expect_error(args: list[str], *needles: str, code: int = 1) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == code, res.output
    err = res.stderr.strip()
    assert err.startswith("error:") and "\n" not in err, err
    for n in needles:
        assert n in err, err


def test_cli_length_mismatch(tmp_path: Path) -> None:
    paths = _make(tmp_path)
    bad = paths["predictions_new"] / "m_c.npy"
    np.save(bad, np.zeros(N_NEW - 1, dtype=np.int64))
    _expect_error(
        _args(paths, tmp_path / "o"), str(bad), "99 predictions", "100 labels"
    )


def test_cli_labels_out_of_range(tmp_path: Path) -> None:
    paths = _make(tmp_path)
    y = np.zeros(N_ORIG, dtype=int)
    y[5] = K
    write_labels(y, paths["labels_orig"])
    _expect_error(
        _args(paths, tmp_path / "o", "--num-classes", str(K)),
        str(paths["labels_orig"]),
        "[0, 10)",
    )
    y[5] = -1
    np.save(paths["labels_orig"], y)
    _expect_error(
        _args(paths, tmp_path / "o"), str(paths["labels_orig"]), "non-negative"
    )


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (np.full((N_NEW, K), np.nan), "NaN"),
        (np.tile(np.r_[1.5, -0.5, np.zeros(K - 2)], (N_NEW, 1)), "negative"),
        (np.tile(np.arange(5), (N_NEW, 1)) * np.r_[1, 1, 0, 1, 1], "repeat a class"),
    ],
)
def test_cli_bad_scores_and_topk(
    tmp_path: Path, content: np.ndarray, needle: str
) -> None:
    paths = _make(tmp_path)
    bad = paths["predictions_new"] / "m_b.npy"
    np.save(bad, content)
    _expect_error(_args(paths, tmp_path / "o"), str(bad), needle)


def test_cli_duplicate_names(tmp_path: Path) -> None:
    paths = _make(tmp_path)
    dup = paths["predictions_orig"] / "m_a.npy"
    np.save(dup, np.zeros(N_ORIG, dtype=np.int64))
    _expect_error(_args(paths, tmp_path / "o"), "duplicate model name 'm_a'", str(dup))


@pytest.mark.parametrize(
    ("content", "needle"), [(b"", "empty"), (b"[1, 2, 3", "truncated")]
)
def test_cli_empty_or_truncated_file(
    tmp_path: Path, content: bytes, needle: str
) -> None:
    paths = _make(tmp_path)
    bad = paths["predictions_orig"] / "m_d_predictions.json"
    bad.write_bytes(content)
    _expect_error(_args(paths, tmp_path / "o"), str(bad), needle)


def test_cli_truncated_npy_labels(tmp_path: Path) -> None:
    paths = _make(tmp_path)
    data = paths["labels_orig"].read_bytes()
    paths["labels_orig"].write_bytes(data[:-40])
    _expect_error(_args(paths, tmp_path / "o"), str(paths["labels_orig"]), "truncated")


def test_cli_too_few_models_for_fit(tmp_path: Path) -> None:
    paths = _make(tmp_path, {"m_a": (190, 80), "m_b": (180, 85)})
    _expect_error(_args(paths, tmp_path / "o"), "at least 3 models", "m_a, m_b")


def test_cli_model_on_one_side_is_dropped_with_warning(tmp_path: Path) -> None:
    paths = _make(tmp_path)
    (paths["predictions_new"] / "m_e.npy").unlink()
    res = runner.invoke(app, _args(paths, tmp_path / "o"))
    assert res.exit_code == 0, res.output
    assert "warning:" in res.stderr and "only on the original set: m_e" in res.stderr
    assert "m_e" not in res.stdout


def test_cli_missing_options_is_a_usage_error(tmp_path: Path) -> None:
    _expect_error(
        ["compare", "--out", str(tmp_path)], "--labels-orig", "--example", code=2
    )


def test_cli_top5_needs_ranked_files_and_names_the_file(tmp_path: Path) -> None:
    paths = _make(tmp_path)
    _expect_error(
        _args(paths, tmp_path / "o", "--metric", "top5"),
        str(paths["predictions_orig"] / "m_a_predictions.json"),
        "top 5 classes",
    )


def test_cli_top5_on_score_files_and_custom_names(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    y_o, y_n = rng.integers(0, K, N_ORIG), rng.integers(0, K, N_NEW)
    for sub, y in (("po", y_o), ("pn", y_n)):
        (tmp_path / sub).mkdir()
        for j in range(4):
            scores = rng.normal(0, 1, (y.size, K))
            scores[np.arange(y.size), y] += j  # better models put more mass on y
            np.save(tmp_path / sub / f"model{j}.npy", scores)
    write_labels(y_o, tmp_path / "yo.npy")
    write_labels(y_n, tmp_path / "yn.csv")
    paths = {
        "labels_orig": tmp_path / "yo.npy",
        "labels_new": tmp_path / "yn.csv",
        "predictions_orig": tmp_path / "po",
        "predictions_new": tmp_path / "pn",
    }
    out = tmp_path / "out"
    res = runner.invoke(
        app,
        _args(
            paths,
            out,
            "--metric",
            "top5",
            "--name-orig",
            "A",
            "--name-new",
            "B",
            "--json",
        ),
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["table"]["dataset_orig"] == "A" and data["table"]["metric"] == "top5"
    # Independent top-5 count for one model.
    s = np.load(tmp_path / "pn" / "model3.npy")
    top5 = np.argsort(-s, axis=1, kind="stable")[:, :5]
    k = int((top5 == y_n[:, None]).any(axis=1).sum())
    row = next(r for r in data["table"]["rows"] if r["model"] == "model3")
    assert row["new_k"] == k
