"""The quick demo end to end on the real Fashion-MNIST files (slow).

One quick demo run (10 models of the quick preset, 4,000-image pool, 2,000-image
revision) is shared by the tests of this module, in file order: the checks of the
i.i.d. control and of reproducibility first, then a rerun (nothing recomputed),
then a corrupted cache file (detected and recomputed).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from demo_text import parse_demo_text  # type: ignore[import-not-found]
from typer.testing import CliRunner

from checkout_cli import RETEST  # type: ignore[import-not-found]
from figure_checks import assert_png  # type: ignore[import-not-found]
from retest.datasets.idx import read_idx
from retest.dedup.rules import near_original_threshold
from retest.demo.run import DemoResult, DemoSettings, run_demo
from retest.errors import ConfigError, RetestWarning
from retest.evaluate.metrics import accuracy
from retest.project import Project, candidate_eligibility, copies, metric_state
from retest.stages.evaluate import ORIGINAL

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


def _nearest_sq_l2(queries: np.ndarray, refs: np.ndarray) -> np.ndarray:
    """Brute-force squared L2 from each query row to its nearest ``refs`` row.

    Exact: the pixels are integers ≤ 255, so every product and partial sum of the
    float64 matrix product is an integer below 2**53.
    """
    q = queries.reshape(len(queries), -1).astype(np.float64)
    q_sq = np.einsum("ij,ij->i", q, q)
    best = np.full(len(q), np.inf)
    for r0 in range(0, len(refs), 10_000):  # bounded memory: ~80 MB per block
        r = refs[r0 : r0 + 10_000].reshape(-1, q.shape[1]).astype(np.float64)
        r_sq = np.einsum("ij,ij->i", r, r)
        for q0 in range(0, len(q), 1000):
            d = (
                q_sq[q0 : q0 + 1000, None]
                + r_sq[None]
                - 2.0 * (q[q0 : q0 + 1000] @ r.T)
            )
            best[q0 : q0 + 1000] = np.minimum(best[q0 : q0 + 1000], d.min(axis=1))
    return best


def _pairs_within(images: np.ndarray, th: float) -> list[tuple[int, int]]:
    """Brute-force ``(i, j)``, ``i < j``, of the images within squared L2 ``th``."""
    x = images.reshape(len(images), -1).astype(np.float64)
    sq = np.einsum("ij,ij->i", x, x)
    out = []
    for i0 in range(0, len(x), 1000):
        d = sq[i0 : i0 + 1000, None] + sq[None] - 2.0 * (x[i0 : i0 + 1000] @ x.T)
        out += [(i0 + i, j) for i, j in np.argwhere(d <= th) if i0 + i < j]
    return out


def _components(pairs: set[frozenset[str]]) -> list[set[str]]:
    """Connected components of an undirected graph given by its edges."""
    groups: list[set[str]] = []
    for edge in pairs:
        touching = [g for g in groups if g & edge]
        merged = set(edge).union(*touching)
        groups = [g for g in groups if not g & edge] + [merged]
    return groups


def test_demo_builds_the_revision_and_finds_near_duplicates(
    demo: tuple[Path, Path, DemoResult],
) -> None:
    """The pool holds real near-copies of test and training images (the demo
    plants none; Fashion-MNIST has them). Against a brute-force search of the
    stored pixels: every pool image whose nearest test or training original lies
    within the near-original threshold is found, excluded for it and not in the
    revision, and no other image is; the report's counts and pairs are exactly
    these; a group of within-pool near-copies keeps exactly one image (none when
    it reaches an original)."""
    root, data, res = demo
    y_new = _new_labels(res)
    assert np.bincount(y_new, minlength=10).tolist() == [200] * 10
    nd = res.near_duplicates
    with Project.open(root) as project:
        th = candidate_eligibility(project).near_original_threshold
        cal = metric_state(project, "l2")["near_original"]
        elig = candidate_eligibility(project, include_unreviewed=True)
        ids = sorted(c.id for c in project.store.candidates.iter())
        pool = np.stack(project.pixels(ids))
    assert th is not None and len(ids) == SETTINGS.pool_size
    # the scaled CIFAR rule, capped by the originals' own nearest distances
    assert th == pytest.approx(
        near_original_threshold((28, 28), originals_nearest=cal["distance"])
    )
    assert nd["threshold_sq_l2"] == pytest.approx(th) and th <= 255_209
    with np.load(root / "demo" / "split.npz") as z:
        kept = z["kept"]
    nearest = {
        "test": _nearest_sq_l2(pool, read_idx(data / "t10k-images-idx3-ubyte.gz")),
        "train": _nearest_sq_l2(
            pool, read_idx(data / "train-images-idx3-ubyte.gz")[kept]
        ),
    }
    near = {
        k: {c for c, x in zip(ids, d, strict=True) if x <= th}
        for k, d in nearest.items()
    }
    assert nd["test"] >= 5 and nd["train"] >= 20, {k: nd[k] for k in ("test", "train")}
    steps = json.loads((root / "demo" / "steps" / "near-duplicates.json").read_text())
    row = {c: i for i, c in enumerate(ids)}
    for kind in ("test", "train"):
        pairs = steps["pairs"][kind]
        assert nd[kind] == len(pairs) == len(near[kind]) > 0, kind
        assert {p["candidate"] for p in pairs} == near[kind], kind
        for p in pairs:  # the recorded partner is the nearest original
            assert p["sq_l2"] == pytest.approx(nearest[kind][row[p["candidate"]]])
    automatic = {
        c for c, r in elig.excluded() if {"exact_copy", "near_original"} & set(r)
    }
    assert automatic == near["test"] | near["train"]
    excluded = copies(elig)
    assert set(steps["excluded"]) == excluded and len(excluded) == nd["n_excluded"]
    assert nd["n_excluded"] >= len(automatic), nd
    # within-pool near-copies: the reported pairs are all of them; of a group of
    # pool images only, exactly one may be sampled
    pool_pairs = {frozenset((ids[i], ids[j])) for i, j in _pairs_within(pool, th)}
    reported = {
        frozenset((p["candidate"], p["reference"])) for p in steps["pairs"]["pool"]
    }
    assert reported == pool_pairs and len(pool_pairs) == nd["pool_pairs"]
    for group in _components(pool_pairs):
        free = group - excluded
        assert len(free) == (0 if group & automatic else 1), (group, free)
    with Project.open(root) as project:
        members = {m.item_id for m in project.store.revisions.members(res.revision)}
        assert len(members) == 2000 and not members & excluded
        for pair in steps["pairs"]["test"] + steps["pairs"]["train"]:
            assert pair["candidate"] in excluded
            a, b = project.pixels([pair["candidate"], pair["reference"]])
            d = float(np.sum((a.astype(np.int64) - b.astype(np.int64)) ** 2))
            assert d == pytest.approx(pair["sq_l2"]) and d <= th
    export = json.loads((root / "demo" / "steps" / "export.json").read_text())
    assert export["revision"] == res.revision and export["n_images"] == 2000
    assert_png(Path(res.paths["report_png"]), min_side=400)
    assert_png(Path(res.paths["label_errors_contact_sheet"]), min_side=100)
    assert json.loads(Path(res.paths["report_fit"]).read_text())["slope"] > 0
    # Label errors of the real test set: given labels are the test set's own, ranked
    # most suspicious first; the contact sheet's 24 are ones the models contradict.
    errs = res.label_errors
    y_test = _test_labels(data)
    assert len(errs) >= 24
    assert [e.rank for e in errs] == list(range(1, len(errs) + 1))
    assert all(a.score <= b.score for a, b in itertools.pairwise(errs))
    assert len({e.index for e in errs}) == len(errs)
    assert all(e.given == y_test[e.index] != e.suggested for e in errs)
    assert all(e.self_confidence < e.suggested_prob for e in errs[:24])


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


def _demo_cli(root: Path, data: Path, *extra: str) -> str:
    """``retest demo`` on the finished run as a real process (wide terminal)."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    run = subprocess.run(
        [*RETEST, "demo", "--dir", str(root), "--quick", "--workers", "0",
         "--data", str(data), *extra],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def _close(printed: float, value: float, decimals: int) -> bool:
    """``printed`` is ``value`` rounded to ``decimals`` places."""
    return abs(printed - value) <= 0.5 * 10.0**-decimals + 1e-9


def test_printed_text_matches_the_json_of_the_same_run(
    demo: tuple[Path, Path, DemoResult],
) -> None:
    """The text a user reads, parsed on its own (``demo_text``): the table's
    header and every model row, the near-duplicate line, the fit, the label
    errors, the steps and the summary, each number against ``--json``."""
    root, data, first = demo
    got = parse_demo_text(_demo_cli(root, data))
    js = json.loads(_demo_cli(root, data, "--json"))
    table = js["table"]
    assert got["title"] == {"orig_n": 10_000, "revision": js["revision"],
                            "new_n": 2000}  # fmt: skip
    assert got["header"] == ["model", "orig %", "new %", "gap (points) [95% CI]"]
    assert [r["model"] for r in got["rows"]] == [r["model"] for r in table]
    assert len(got["rows"]) == 10
    for row, want in zip(got["rows"], table, strict=True):
        for key, src in (("orig", "orig_acc"), ("new", "new_acc"), ("gap", "gap"),
                         ("gap_lo", "gap_lo"), ("gap_hi", "gap_hi")):  # fmt: skip
            assert _close(row[key], 100 * want[src], 1), (row, key, want[src])
    nd = js["near_duplicates"]
    assert got["near_duplicates"] == {
        "threshold_sq_l2": round(nd["threshold_sq_l2"]),
        **{k: nd[k] for k in ("test", "train", "pool_pairs", "pool_exact_duplicates",
                              "n_excluded", "unreviewed_included")},
    }  # fmt: skip
    fit = js["fit"]
    assert _close(got["fit"]["slope"], fit["slope"], 2)
    assert _close(got["fit"]["intercept"], fit["intercept"], 1)
    assert _close(got["fit"]["r2"], fit["r2"], 3)
    errs = js["label_errors"][:10]
    assert len(got["label_errors"]) == len(errs) == 10
    for e, want in zip(got["label_errors"], errs, strict=True):
        assert {k: e[k] for k in ("rank", "index", "given_name", "suggested_name")} == {
            k: want[k] for k in ("rank", "index", "given_name", "suggested_name")
        }
        assert _close(e["suggested_prob"], want["suggested_prob"], 2)
    assert (got["steps_run"], got["steps_reused"]) == (js["steps_run"],
                                                       js["steps_reused"])  # fmt: skip
    assert got["predictions_computed"] == js["predictions_computed"] == 0
    s = got["summary"]
    assert got["summary_line"] == js["summary"] == first.summary
    assert _close(s["mean_gap"], 100 * js["mean_gap"], 1)
    assert _close(s["two_se"], 200 * js["gap_se"], 1)
    assert _close(s["slope"], fit["slope"], 2)
    assert _close(s["slope_lo"], fit["slope_ci"][0], 2)
    assert _close(s["slope_hi"], fit["slope_ci"][1], 2)
    assert s["test_duplicates"] == nd["test"]


# Right answers (original of 10,000, new of 2,000) of the quick demo, seed 0. The
# data steps are integer pixel arithmetic, the same on every CPU; so are these
# models' answers. Models trained by iterative solvers over OpenBLAS, whose
# kernel (and rounding) depends on the CPU, may move by a few images (README,
# "The demo"): within VARYING points.
EXACT = {
    "pca-rbf-svm": (8418, 1666), "random-relu-1024": (8339, 1658),
    "knn-5": (8140, 1630), "linear-svm": (8022, 1592), "gaussian-nb": (7572, 1498),
    "small-cnn": (7518, 1513),
}  # fmt: skip
NEAR = {
    "logreg-c1": (8283, 1667), "random-forest": (8215, 1632), "mlp": (8206, 1651),
    "logreg-c0.001": (7548, 1509),
}  # fmt: skip
VARYING = 0.5  # points


def test_cpu_independent_figures_are_exact(
    demo: tuple[Path, Path, DemoResult],
) -> None:
    _, _, res = demo
    got = {r["model"]: (r["orig_k"], r["new_k"]) for r in res.table.to_records()}
    assert set(got) == set(EXACT) | set(NEAR)
    assert {m: got[m] for m in EXACT} == EXACT
    for m, (k_o, k_n) in NEAR.items():
        assert abs(got[m][0] - k_o) / 100 <= VARYING, (m, got[m])
        assert abs(got[m][1] - k_n) / 20 <= VARYING, (m, got[m])
    nd = res.near_duplicates
    assert nd["threshold_sq_l2"] == pytest.approx(173_921.885)
    assert (nd["test"], nd["train"], nd["pool_pairs"], nd["n_excluded"]) == (
        7, 54, 2, 60,
    )  # fmt: skip
    assert res.revision == "fashion-mnist-demo-class-balanced-0"


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
    assert again.predictions_computed == 1  # only the damaged (model, dataset) entry
    assert again.table.to_records() == first.table.to_records()
