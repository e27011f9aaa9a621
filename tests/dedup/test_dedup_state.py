"""Dedup run state lives in the store: the review queue is the union of every
metric run; retest.toml overrides targets; metrics come from a registry; every
bad option value is one line with exit code 2."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from dedup_helpers import brighter, fm_images, fm_project  # type: ignore[import-not-found]
from typer.testing import CliRunner

from retest.cli.main import app
from retest.project import (
    Project,
    dedup_image_shape,
    dedup_review_queue,
    metric_state,
    metrics_run,
    review_targets,
)
from retest.stages.dedup import DEDUP_METRICS, DedupMetric, run_dedup

N_REF, N_PLANT, N_NEW = 200, 12, 24


def _make(root: Path, fm: Path, *, train: bool = True) -> Project:
    imgs, labels, test = fm_images(fm, N_REF, N_NEW)
    cands = np.concatenate([brighter(imgs[:N_PLANT]), test])
    return fm_project(
        root, imgs, labels, cands, split="train" if train else "test", source="fm"
    )


@pytest.fixture
def project(tmp_path: Path, fashion_mnist_dir: Path):
    p = _make(tmp_path / "proj", fashion_mnist_dir)
    yield p
    p.close()


def _pending(p: Project, **kw) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for item in dedup_review_queue(p, top=1000, **kw):
        out.setdefault(item.metric, set()).add(item.candidate_id)
    return out


def test_later_run_of_other_metrics_adds_never_hides(project: Project) -> None:
    assert metrics_run(project) == () and review_targets(project) == {}
    run_dedup(project, metrics=["l2", "dssim"], k=5, backend="numpy")
    first = _pending(project)
    assert set(first) == {"l2", "dssim"} and first["l2"]
    assert metrics_run(project) == ("l2", "dssim")
    run_dedup(project, metrics=["features", "warp"], k=5, backend="numpy")
    assert metrics_run(project) == ("l2", "features", "dssim", "warp")
    assert set(review_targets(project)) == {"l2", "features", "dssim", "warp"}
    after = _pending(project)
    for m in ("l2", "dssim"):
        assert after[m] == first[m]  # still pending after the features/warp run
    assert dedup_image_shape(project) == (28, 28, 1)
    # nothing is read back from reports: deleting them changes nothing
    for f in (project.reports_dir / "dedup").glob("*.json"):
        f.unlink()
    assert _pending(project) == after
    st = metric_state(project, "l2")
    assert st is not None and st["complete"] and st["image_shape"] == [28, 28, 1]


def test_thresholds_from_retest_toml_override_targets(project: Project) -> None:
    run_dedup(project, metrics=["l2", "warp"], k=5, backend="numpy")
    stored = review_targets(project)
    assert stored["l2"] == pytest.approx(1.2e8 * 784 / (256 * 256 * 3))
    project.config = replace(project.config, thresholds={"l2": 0.0, "warp": 1e12})
    assert review_targets(project) == {"l2": 0.0, "warp": 1e12}
    pending = _pending(project)
    assert "l2" not in pending
    assert len(pending["warp"]) == N_PLANT + N_NEW  # every candidate under 1e12


def test_cli_reports_the_targets_in_use_and_where_they_come_from(
    project: Project,
) -> None:
    """`retest dedup` shows the target the queue uses: a [thresholds] value over
    the stored one, DSSIM's calibration on the originals, the size default."""
    import json

    toml = project.root / "retest.toml"
    toml.write_text(
        toml.read_text().replace("[thresholds]\n", "[thresholds]\nwarp = 5e4\n")
    )
    args = ["dedup", "-p", str(project.root), "--metrics", "l2,dssim,warp", "--k", "5"]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["review_targets"]["warp"] == 5e4
    how = data["review_target_sources"]
    assert how["warp"] == "`warp` under [thresholds] in retest.toml"
    assert how["dssim"].startswith("5th percentile of nearest-other-image distances")
    assert how["l2"] == "default for the image size"
    text = CliRunner().invoke(app, args, env={"COLUMNS": "200"}).output
    assert "[thresholds] in retest.toml" in text and "5th percentile" in text


def test_features_threshold_is_calibrated_and_stored(project: Project) -> None:
    res = run_dedup(project, metrics=["features"], k=5, backend="numpy")
    state = metric_state(project, "features")
    assert state is not None
    assert state["target_source"] == "calibrated"
    assert state["calibration"]["n_database"] == N_REF
    assert review_targets(project)["features"] == state["target"] == res.targets["features"]  # fmt: skip
    explicit = run_dedup(
        project,
        metrics=["features"],
        k=5,
        backend="numpy",
        embedder="random-projection:16:0",
    )
    assert explicit.states["features"]["embedder"] == "random-projection-16-s0"
    assert explicit.fingerprint != res.fingerprint


def test_no_training_originals_one_line(
    tmp_path: Path, fashion_mnist_dir: Path
) -> None:
    p = _make(tmp_path / "proj", fashion_mnist_dir, train=False)
    try:
        res = CliRunner().invoke(app, ["dedup", "-p", str(p.root), "--k", "3"])
        assert res.exit_code == 1, res.output
        line = res.output.strip()
        assert line.startswith("error: ") and "\n" not in line
        assert "reference add --split train" in line and "--embedder" in line
        assert not (p.arrays_dir / "dedup").exists()
        ok = CliRunner().invoke(
            app,
            ["dedup", "-p", str(p.root), "--k", "3", "--embedder", "fourier", "--json"],
        )
        assert ok.exit_code == 0, ok.output
    finally:
        p.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--chunk-size", "0"], "--chunk-size must be a positive"),
        (["--k", "0"], "--k must be a positive"),
        (["--resize", "-3"], "--resize must be an image side in pixels"),
        (["--memory-gib", "0"], "--memory-gib must be a positive"),
        (["--workers", "0"], "--workers must be a positive"),
        (["--win-size", "0"], "--win-size must be a positive"),
        (["--embedder", "random-projection:abc"], "random-projection[:DIM[:SEED]]"),
        (["--embedder", "random-projection:8:1:2"], "random-projection[:DIM[:SEED]]"),
        (["--embedder", "fourier:x"], "fourier[:K]"),
        (["--embedder", "random-projection:0"], "dim must be at least 1"),
        (["--embedder", "fourier:1"], "k must be at least 2"),
        (["--embedder", "randm-projection"], "Did you mean 'random-projection'"),
        (["--embedder", "onnx"], "needs a model path"),
        (["--metrics", "wrap"], "did you mean 'warp'"),
        (["--metrics", ","], "--metrics needs a comma-separated list"),
        (["--against", "original-tran"], "--against takes"),
    ],
)
def test_bad_option_values_one_line_exit_2(
    project: Project, args: list[str], message: str
) -> None:
    res = CliRunner().invoke(app, ["dedup", "-p", str(project.root), *args])
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert line.startswith("error: ") and message in line and "\n" not in line
    assert not (project.arrays_dir / "dedup").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--embedder", "missing.onnx"], "missing.onnx does not exist"),
        (["--embedder", "torchscript:nowhere.pt"], "nowhere.pt does not exist"),
    ],
)
def test_missing_embedder_file_is_bad_input_exit_1(
    project: Project, args: list[str], message: str
) -> None:
    """A model file that is not there is bad input (exit 1), not a bad option."""
    res = CliRunner().invoke(app, ["dedup", "-p", str(project.root), *args])
    assert res.exit_code == 1, res.output
    line = res.output.strip()
    assert line.startswith("error: ") and message in line and "\n" not in line
    assert not (project.arrays_dir / "dedup").exists()


class _Chebyshev(DedupMetric):
    """A plug-in: the largest per-pixel difference, as an exact kNN would not do
    it, computed on the shortlist."""

    kind = "shortlist"
    summary = "largest absolute pixel difference on the shortlist"

    def default_target(self, shape) -> float:
        return 20.0

    def pair_distances(self, q, r, qa, ra, options):
        diff = q[qa].astype(np.int16) - r[ra].astype(np.int16)
        return np.abs(diff).reshape(len(qa), -1).max(axis=1).astype(np.float64)


def test_a_registered_metric_is_listed_and_runs(project: Project, monkeypatch) -> None:
    monkeypatch.setitem(DEDUP_METRICS._entries, "chebyshev", _Chebyshev())
    help_ = CliRunner().invoke(app, ["dedup", "--help"], env={"COLUMNS": "200"})
    assert "chebyshev" in help_.output and "largest absolute pixel" in help_.output
    res = run_dedup(project, metrics=["l2", "chebyshev"], k=3, backend="numpy")
    assert res.metrics == ("l2", "chebyshev")
    assert review_targets(project)["chebyshev"] == 20.0
    planted = [c.id for c in project.store.candidates.iter() if int(c.source_ref) < N_PLANT]  # fmt: skip
    nl = project.store.neardup.neighbours(planted[0], metric="chebyshev")[0]
    assert nl.distances[0] == 12.0  # brightened by 12 grey levels (no clipping)
    assert "chebyshev" in _pending(project)


def test_help_lists_registered_metrics_and_embedders() -> None:
    out = CliRunner().invoke(app, ["dedup", "--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0
    for name in ("l2", "features", "dssim", "warp", "reference-mlp", "fourier"):
        assert name in out.output
