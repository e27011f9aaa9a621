"""The quick demo end to end on the real Fashion-MNIST files (slow).

One quick demo run (10 models of the quick preset, 4,000-image pool, 2,000-image
revision) is shared by the tests of this module, in file order: the checks of the
i.i.d. control and of reproducibility first, then a rerun (nothing recomputed),
then a corrupted cache file (detected and recomputed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from retest.datasets.idx import read_idx
from retest.dedup.rules import near_original_threshold
from retest.demo.run import DemoResult, DemoSettings, run_demo
from retest.errors import ConfigError, RetestWarning
from retest.evaluate.metrics import accuracy
from retest.pipeline.dedup import metric_state
from retest.pipeline.eligibility import candidate_eligibility, copies
from retest.pipeline.evaluate import ORIGINAL
from retest.pipeline.project import Project

pytestmark = pytest.mark.slow

SETTINGS = DemoSettings.for_run(quick=True, seed=0)


@pytest.fixture(scope="module")
def demo(
    tmp_path_factory: pytest.TempPathFactory, fashion_mnist_dir: Path
) -> tuple[Path, Path, DemoResult]:
    root = tmp_path_factory.mktemp("demo") / "run"
    res = run_demo(root, settings=SETTINGS, workers=2, data_root=fashion_mnist_dir)
    return root, fashion_mnist_dir, res


def _test_labels(data: Path) -> np.ndarray:
    return read_idx(data / "t10k-labels-idx1-ubyte.gz").astype(np.int64)


def _cached_predictions(root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """``(model, dataset) → {"topk", "meta"}`` read straight from the cache files."""
    out = {}
    for meta_path in sorted((root / "arrays" / "predictions").glob("*.json")):
        meta = json.loads(meta_path.read_text())
        with np.load(meta_path.with_name(meta["file"]), allow_pickle=False) as z:
            out[(meta["model"], meta["dataset"])] = {"topk": z["topk"], "meta": meta}
    return out


def _new_labels(res: DemoResult) -> np.ndarray:
    d = res.root / "revisions" / res.revision / "npy"
    return np.load(d / f"{res.revision}_labels.npy").astype(np.int64)


def test_demo_builds_the_revision_and_finds_near_duplicates(
    demo: tuple[Path, Path, DemoResult],
) -> None:
    """The pool holds real near-copies of test and training images: the shared
    eligibility rule finds them, they are excluded, none is in the revision, and
    each recorded pair really is within the threshold on the stored pixels."""
    root, _, res = demo
    y_new = _new_labels(res)
    assert np.bincount(y_new, minlength=10).tolist() == [200] * 10
    nd = res.near_duplicates
    with Project.open(root) as project:
        th = candidate_eligibility(project).near_original_threshold
        cal = metric_state(project, "l2")["near_original"]
    # the scaled CIFAR rule, capped by the originals' own nearest distances
    assert th == pytest.approx(
        near_original_threshold((28, 28), originals_nearest=cal["distance"])
    )
    assert nd["threshold_sq_l2"] == pytest.approx(th) and th <= 255_209
    assert nd["test"] >= 5 and nd["train"] >= 20, {k: nd[k] for k in ("test", "train")}
    assert nd["n_excluded"] >= nd["test"], nd
    steps = json.loads((root / "demo" / "steps" / "near-duplicates.json").read_text())
    with Project.open(root) as project:
        excluded = copies(candidate_eligibility(project, include_unreviewed=True))
        assert set(steps["excluded"]) == excluded and len(excluded) == nd["n_excluded"]
        members = {m.item_id for m in project.store.revisions.members(res.revision)}
        assert len(members) == 2000 and not members & excluded
        test_pairs = steps["pairs"]["test"]
        assert len(test_pairs) == nd["test"]
        for pair in test_pairs[:5] + test_pairs[-5:]:
            assert pair["candidate"] in excluded
            a, b = project.pixels([pair["candidate"], pair["reference"]])
            d = float(np.sum((a.astype(np.int64) - b.astype(np.int64)) ** 2))
            assert d == pytest.approx(pair["sq_l2"]) and d <= th
    export = json.loads((root / "demo" / "steps" / "export.json").read_text())
    assert export["revision"] == res.revision and export["n_images"] == 2000
    for key in ("report_png", "report_fit", "label_errors_contact_sheet"):
        assert Path(res.paths[key]).is_file()
    assert len(res.label_errors) >= 10


def test_iid_control_behaves_as_theory_says(
    demo: tuple[Path, Path, DemoResult],
) -> None:
    """The pool is i.i.d. with the test set, so there is no real drop.

    Checks (stated): (1) the mean gap over models is within 2·SE, SE the binomial
    standard error of one model's gap at the mean accuracy p,
    sqrt(p(1−p)(1/2000 + 1/10000)); (2) the fit's pairs-bootstrap 95 % interval
    (models resampled) contains slope 1; (3) because the pairs bootstrap ignores
    the sampling of the *images* — the dominant noise of an i.i.d. control, shared
    by all models — an image bootstrap (resample both test sets, recompute every
    model's accuracy from its cached predictions, refit by OLS) must also put
    slope 1 inside its 95 % interval.
    """
    root, data, res = demo
    gaps = res.table.column("gap")
    p = float(np.mean(res.table.column("new_acc")))
    se = np.sqrt(p * (1 - p) * (1 / 2000 + 1 / 10_000))
    assert abs(np.mean(gaps)) < 2 * se, (np.mean(gaps), se)
    assert res.fit is not None
    lo, hi = res.fit.slope_ci
    assert lo <= 1.0 <= hi, (res.fit.slope, res.fit.slope_ci)

    preds = _cached_predictions(root)
    models = list(res.table.models)
    y_o, y_n = _test_labels(data), _new_labels(res)
    c_o = np.array([preds[(m, ORIGINAL)]["topk"][:, 0] == y_o for m in models])
    c_n = np.array([preds[(m, res.revision)]["topk"][:, 0] == y_n for m in models])
    rng = np.random.default_rng(0)
    slopes = []
    for _ in range(400):
        io = rng.integers(0, y_o.size, y_o.size)
        i_n = rng.integers(0, y_n.size, y_n.size)
        x, y = 100 * c_o[:, io].mean(1), 100 * c_n[:, i_n].mean(1)
        slopes.append(np.polyfit(x, y, 1)[0])
    b_lo, b_hi = np.quantile(slopes, [0.025, 0.975])
    assert b_lo <= 1.0 <= b_hi, (b_lo, b_hi)


def test_table_is_reproducible_from_the_cached_predictions(
    demo: tuple[Path, Path, DemoResult],
) -> None:
    root, data, res = demo
    preds = _cached_predictions(root)
    y_o, y_n = _test_labels(data), _new_labels(res)
    table = json.loads(
        (root / "reports" / "demo" / res.revision / "comparison.json").read_text()
    )
    rows = {r["model"]: r for r in table["rows"]}
    assert set(rows) == set(res.table.models) and len(rows) == 10
    for m, r in rows.items():
        a_o = accuracy(y_o, preds[(m, ORIGINAL)]["topk"])
        a_n = accuracy(y_n, preds[(m, res.revision)]["topk"])
        assert (a_o.k, a_o.n, a_n.k, a_n.n) == (
            r["orig_k"], r["orig_n"], r["new_k"], r["new_n"],
        )  # fmt: skip
        assert r["gap"] == pytest.approx(a_o.value - a_n.value)


def test_rerun_reuses_every_step_and_computes_no_prediction(
    demo: tuple[Path, Path, DemoResult],
) -> None:
    root, data, first = demo
    again = run_demo(root, settings=SETTINGS, data_root=data)
    assert again.predictions_computed == 0
    assert set(again.steps_reused) >= {
        "split", "reference", "ingest", "dedup", "near-duplicates", "sample",
        "export", "evaluate",
    }  # fmt: skip
    assert again.table.to_records() == first.table.to_records()
    assert again.summary == first.summary


def test_cli_json_on_the_finished_run(demo: tuple[Path, Path, DemoResult]) -> None:
    from retest.cli.main import app

    root, data, first = demo
    out = CliRunner().invoke(
        app,
        ["demo", "--dir", str(root), "--quick", "--workers", "0", "--json",
         "--data", str(data)],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    assert got["predictions_computed"] == 0
    assert got["summary"] == first.summary


def test_other_settings_in_the_same_folder_are_refused(
    demo: tuple[Path, Path, DemoResult],
) -> None:
    root, data, _ = demo
    with pytest.raises(ConfigError, match="another --dir"):
        run_demo(
            root, settings=DemoSettings.for_run(quick=True, seed=1), data_root=data
        )


def test_corrupted_cached_prediction_is_detected_and_recomputed(
    demo: tuple[Path, Path, DemoResult],
) -> None:
    root, data, first = demo
    victim = sorted((root / "arrays" / "predictions").glob("*.npz"))[0]
    raw = bytearray(victim.read_bytes())
    raw[-40] ^= 0xFF
    victim.write_bytes(bytes(raw))
    with pytest.warns(RetestWarning, match="corrupted"):
        again = run_demo(root, settings=SETTINGS, data_root=data)
    assert again.predictions_computed >= 1
    assert again.table.to_records() == first.table.to_records()
