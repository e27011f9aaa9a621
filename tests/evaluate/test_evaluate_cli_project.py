"""``retest evaluate`` on the quick demo project (real Fashion-MNIST, slow).

One quick demo run is shared by the tests of this module, in file order: the
evaluate command must reproduce the demo's comparison from the same cache, then
runs on a Dask cluster, prediction folders, a TorchScript file, a second
revision, and bad inputs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from checkout_cli import RETEST  # type: ignore[import-not-found]
from figure_checks import assert_png  # type: ignore[import-not-found]
from retest.cli.main import app
from retest.datasets.predictions import write_predictions
from retest.demo.run import DemoResult, DemoSettings, run_demo
from retest.project import Project, candidate_eligibility
from retest.records import Predictions
from retest.stages.evaluate import ORIGINAL, reference_set, revision_set
from retest.stages.revisions import create_revision

pytestmark = pytest.mark.slow
runner = CliRunner()
REPORT_FILES = ("comparison.csv", "comparison.md", "comparison.json", "fit.json")


@pytest.fixture(scope="module")
def demo(
    tmp_path_factory: pytest.TempPathFactory, fashion_mnist_dir: Path
) -> DemoResult:
    root = tmp_path_factory.mktemp("evaluate") / "demo"
    settings = DemoSettings.for_run(quick=True, seed=0)
    return run_demo(root, settings=settings, data_root=fashion_mnist_dir)


def _run(*args: str) -> dict[str, Any]:
    res = runner.invoke(app, ["evaluate", *args, "--json"])
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def _rows(report_dir: Path) -> dict[str, dict[str, Any]]:
    data = json.loads((report_dir / "comparison.json").read_text())
    return {r["model"]: r for r in data["rows"]}


def test_evaluate_reproduces_the_demo_comparison_from_the_cache(
    demo: DemoResult,
) -> None:
    root, rev = demo.root, demo.revision
    got = _run("-p", str(root), "--preset", "quick", "--seed", "0", "--figure", "png")
    assert got["predictions_computed"] == 0  # the demo's cache entries, same keys
    assert list(got["revisions"]) == [rev]
    assert got["original"] == {"name": ORIGINAL, "n": 10_000}
    assert got["revisions"][rev]["table"]["rows"] == demo.table.to_records()
    ours, theirs = root / "reports" / "evaluate" / rev, root / "reports" / "demo" / rev
    for name in REPORT_FILES:
        assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name
    assert_png(ours / "comparison.png", min_side=400)
    text = runner.invoke(app, ["evaluate", "-p", str(root), "--preset", "quick"])
    assert text.exit_code == 0, text.output
    assert "predictions computed: 0" in text.stdout and "pca-rbf-svm" in text.stdout


def test_a_new_process_finds_every_prediction_in_the_cache(demo: DemoResult) -> None:
    """A cache key is the same in every process: `retest evaluate` run as a
    command after the demo computes nothing (gaussian-nb's key held the address
    of a function, so it was predicted again on every run)."""
    import os
    import subprocess

    cmd = list(RETEST)
    args = ["evaluate", "-p", str(demo.root), "--preset", "quick", "--json"]
    env = {**os.environ, "COLUMNS": "200"}
    p = subprocess.run(
        [*cmd, *args], capture_output=True, text=True, env=env, check=False
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["predictions_computed"] == 0


def test_dask_workers_compute_once_and_match_in_process(
    demo: DemoResult, tmp_path: Path
) -> None:
    root, rev = demo.root, demo.revision
    models = ["--model", "gaussian-nb", "--model", "logreg-c0.001", "--model", "knn-5"]
    common = ["-p", str(root), *models, "--seed", "3", "--figure", ""]
    par = _run(*common, "--workers", "2", "--out", str(tmp_path / "dask"))
    assert par["predictions_computed"] == 6  # new seed: 3 models × 2 sets
    again = _run(*common, "--out", str(tmp_path / "local"))
    assert again["predictions_computed"] == 0
    assert (tmp_path / "dask" / rev / "comparison.csv").read_bytes() == (
        tmp_path / "local" / rev / "comparison.csv"
    ).read_bytes()
    assert sorted(par["revisions"][rev]["table"]["rows"][0]) == sorted(
        demo.table.to_records()[0]
    )


def _cached(root: Path) -> dict[tuple[str, str], Predictions | None]:
    out = {}
    for meta_path in (root / "arrays" / "predictions").glob("*.json"):
        meta = json.loads(meta_path.read_text())
        with np.load(meta_path.with_name(meta["file"]), allow_pickle=False) as z:
            # top-k ids only: saturated scores (naive Bayes) tie in float32 and
            # their argmax need not be the model's own first choice
            pred = Predictions(meta["model"], meta["dataset"], z["topk"])
        key = (meta["model"], meta["dataset"])
        out[key] = None if key in out else pred  # None: several models of that name
    return out


def test_prediction_folders_give_the_same_rows(
    demo: DemoResult, tmp_path: Path
) -> None:
    root, rev = demo.root, demo.revision
    cached = _cached(root)
    chosen = ["linear-svm", "mlp", "pca-rbf-svm", "random-forest"]  # demo models only
    for ds in (ORIGINAL, rev):
        for m in chosen:
            pred = cached[(m, ds)]
            assert pred is not None
            write_predictions(pred, tmp_path / ds / f"{m}.npy")
    got = _run(
        "-p", str(root), "--predictions", f"{ORIGINAL}={tmp_path / ORIGINAL}",
        "--predictions", f"{rev}={tmp_path / rev}", "--out", str(tmp_path / "r"),
        "--bootstrap", "1000",
    )  # fmt: skip
    assert got["models"] == sorted(chosen)
    rows = _rows(tmp_path / "r" / rev)
    demo_rows = {r["model"]: r for r in demo.table.to_records()}
    for m in chosen:
        for key in ("orig_k", "orig_n", "new_k", "new_n"):
            assert rows[m][key] == demo_rows[m][key], (m, key)


def test_torchscript_model_file(demo: DemoResult, tmp_path: Path) -> None:
    """A template-matching linear net: accuracy as computed by hand from the pixels."""
    torch = pytest.importorskip("torch")
    root, rev = demo.root, demo.revision
    with Project.open(root) as project:
        test = reference_set(project, "test")
        new = revision_set(project, rev)
    assert test.images is not None and new.images is not None
    x = test.images[:2000].reshape(2000, -1).astype(np.float32) / 255
    y = test.labels[:2000]
    w = np.stack([x[y == c].mean(0) for c in range(10)]).astype(np.float32)
    b = -0.5 * (w * w).sum(1)  # nearest class mean under L2
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10))
    with torch.no_grad():
        net[1].weight.copy_(torch.from_numpy(w))
        net[1].bias.copy_(torch.from_numpy(b))
    path = tmp_path / "means.pt"
    torch.jit.save(torch.jit.script(net), str(path))
    got = _run(
        "-p", str(root), "--model-file", str(path), "--out", str(tmp_path / "r"),
        "--figure", "",
    )  # fmt: skip
    row = got["revisions"][rev]["table"]["rows"][0]
    assert row["model"] == "means" and got["predictions_computed"] == 2
    for ds, key in ((test, "orig_k"), (new, "new_k")):
        assert ds.images is not None
        xs = ds.images.reshape(ds.n, -1).astype(np.float32) / 255
        k = int(((xs @ w.T + b).argmax(1) == ds.labels).sum())
        assert abs(row[key] - k) <= 2, (key, row[key], k)  # float32 ties only
    assert 0.6 < row["orig_k"] / row["orig_n"] < 0.8


def test_a_second_revision_reuses_the_cache_for_the_others(demo: DemoResult) -> None:
    root, rev = demo.root, demo.revision
    with Project.open(root) as project:
        second = create_revision(
            project, strategy="class-balanced", seed=1,
            per_class=50, min_annotations=0,
            eligibility=candidate_eligibility(project, include_unreviewed=True),
        ).revision.name  # fmt: skip
    models = ["--model", "gaussian-nb", "--model", "logreg-c1", "--model", "knn-5"]
    got = _run("-p", str(root), "--preset", "quick", *models, "--figure", "")
    # original and the first revision come from the demo's cache: only the new set
    assert got["predictions_computed"] == 3
    assert list(got["revisions"]) == [rev, second]
    first = {r["model"]: r for r in got["revisions"][rev]["table"]["rows"]}
    demo_rows = {r["model"]: r for r in demo.table.to_records()}
    for m, r in first.items():  # ranks differ (3 models), the counts may not
        for key in ("orig_k", "orig_n", "new_k", "new_n", "gap"):
            assert r[key] == demo_rows[m][key], (m, key)
    assert got["revisions"][second]["table"]["rows"][0]["new_n"] == 500
    only = _run("-p", str(root), "--preset", "quick", *models, "-r", second)
    assert only["predictions_computed"] == 0 and list(only["revisions"]) == [second]


def _expect_error(args: list[str], *needles: str, code: int = 1) -> None:
    res = runner.invoke(app, ["evaluate", *args])
    assert res.exit_code == code, res.output
    err = res.stderr.strip()
    assert err.startswith("error:") and "\n" not in err, err
    assert "Traceback" not in res.output
    for n in needles:
        assert n in err, err


def test_bad_inputs_are_one_line_errors(demo: DemoResult, tmp_path: Path) -> None:
    p = ["-p", str(demo.root)]
    _expect_error([*p, "--preset", "quick", "-r", "nope"], "'nope'", demo.revision)
    _expect_error(p, "no models", "--preset", code=2)
    _expect_error([*p, "--preset", "huge"], "'huge'", code=2)
    _expect_error([*p, "--preset", "quick", "--workers", "0"], "--workers", code=2)
    _expect_error(
        [*p, "--preset", "quick", "--workers", "2", "--cluster", "tcp://x:1"],
        "--cluster", code=2,
    )  # fmt: skip
    _expect_error([*p, "--predictions", "original"], "DATASET=FOLDER", code=2)
    _expect_error([*p, "--predictions", f"original={tmp_path}"], demo.revision, code=2)
    (tmp_path / "m.bin").write_bytes(b"x")
    _expect_error([*p, "--model-file", str(tmp_path / "m.bin")], "'.bin'", code=2)
    _expect_error([*p, "--model-file", str(tmp_path / "gone.onnx")], "gone.onnx")
    _expect_error([*p, "--preset", "quick", "--figure", "gif"], "'gif'", code=2)
    _expect_error(
        ["-p", str(tmp_path), "--preset", "quick"], "not a retest project", code=2
    )
