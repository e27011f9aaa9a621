"""The prediction cache and the evaluate stage (local and on a real Dask cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from figure_checks import assert_png  # type: ignore[import-not-found]
from retest.errors import InputValidationError, RetestWarning
from retest.models.base import get_model
from retest.models.sklearn_runner import SklearnRunner
from retest.records import LabeledSet, Predictions
from retest.stages.evaluate import (
    PredictionCache,
    compare_testbed,
    dataset_fingerprint,
    evaluate_testbed,
)

QUICK_MODELS = ("logreg-c1", "knn-5", "linear-svm", "gaussian-nb", "random-relu-256")


class Counting(SklearnRunner):
    """A testbed runner that counts how often it trains and predicts."""

    calls: dict[str, int]

    def fit(self, images: Any, labels: Any, **kw: Any) -> Counting:
        self.calls["fit"] += 1
        super().fit(images, labels, **kw)
        return self

    def predict(self, images: Any, **kw: Any) -> Predictions:
        self.calls["predict"] += 1
        return super().predict(images, **kw)


def _counting(name: str) -> Counting:
    base = get_model(name, n_classes=10, preset="quick")
    assert isinstance(base, SklearnRunner)
    r = Counting(
        name,
        base.estimator,
        n_classes=10,
        threads=base.threads,
        fitted=False,
        max_train=base.max_train,
    )
    r.calls = {"fit": 0, "predict": 0}
    return r


def test_cache_roundtrip_and_corruption(tmp_path: Path) -> None:
    cache = PredictionCache(tmp_path)
    probs = np.random.default_rng(0).dirichlet(np.ones(4), size=20).astype(np.float32)
    pred = Predictions.from_scores("m", "d", probs)
    calls = []

    def compute() -> Predictions:
        calls.append(1)
        return pred

    got, cached = cache.get_or_compute("mk", "dk", compute)
    assert not cached and len(calls) == 1
    got, cached = cache.get_or_compute("mk", "dk", compute)
    assert cached and len(calls) == 1
    np.testing.assert_array_equal(got.topk, pred.topk)
    np.testing.assert_array_equal(got.probs, pred.probs)
    npz, meta = cache.paths("mk", "dk")
    assert json.loads(meta.read_text())["model_key"] == "mk"
    # Flip one byte in the middle of the file: detected, warned, recomputed.
    raw = bytearray(npz.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    npz.write_bytes(bytes(raw))
    with pytest.warns(RetestWarning, match="corrupted"):
        got, cached = cache.get_or_compute("mk", "dk", compute)
    assert not cached and len(calls) == 2
    assert cache.load("mk", "dk") is not None  # the recomputed entry is valid
    # A failing computation caches nothing.
    with pytest.raises(RuntimeError):
        cache.get_or_compute(
            "mk2", "dk", lambda: (_ for _ in ()).throw(RuntimeError("x"))
        )
    assert not cache.paths("mk2", "dk")[1].exists()


def test_evaluate_second_run_computes_nothing(
    tmp_path: Path, digit_sets: tuple[LabeledSet, LabeledSet, LabeledSet]
) -> None:
    train, orig, new = digit_sets
    runners = [_counting(n) for n in QUICK_MODELS]
    ticks: list[tuple[str, int, int | None]] = []
    res = evaluate_testbed(
        runners,
        orig,
        new,
        train=train,
        cache_dir=tmp_path,
        progress=lambda t, d, n: ticks.append((t, d, n)),
    )
    assert list(res) == list(QUICK_MODELS)
    assert all(r.calls == {"fit": 1, "predict": 2} for r in runners)
    assert ("evaluate testbed", 5, 5) in ticks
    for po, pn in res.values():
        assert po.n == orig.n and pn.n == new.n and po.k == 5
        assert (po.top1 == orig.labels).mean() > 0.6
    again = [_counting(n) for n in QUICK_MODELS]
    res2 = evaluate_testbed(again, orig, new, train=train, cache_dir=tmp_path)
    assert all(r.calls == {"fit": 0, "predict": 0} for r in again)
    for m in QUICK_MODELS:
        np.testing.assert_array_equal(res[m][1].topk, res2[m][1].topk)
        assert res2[m][0].dataset == "orig"
    # A different training set is a different model: recomputed.
    other_train = LabeledSet(
        "train", train.labels[:900], train.class_names, train.images[:900]
    )
    entries_of_train = sorted(tmp_path.glob("*.npz"))
    third = [_counting("gaussian-nb")]
    evaluate_testbed(third, orig, new, train=other_train, cache_dir=tmp_path)
    assert third[0].calls == {"fit": 1, "predict": 2}
    # Corrupt one cached file of one model trained on `train` (an entry of the
    # other training set would not be read below): only that model is recomputed.
    victim = entries_of_train[0]
    victim.write_bytes(victim.read_bytes()[:-10])
    fourth = [_counting(n) for n in QUICK_MODELS]
    with pytest.warns(RetestWarning, match="corrupted"):
        evaluate_testbed(fourth, orig, new, train=train, cache_dir=tmp_path)
    assert sum(r.calls["fit"] for r in fourth) == 1


def test_bad_inputs_cache_nothing(
    tmp_path: Path, digit_sets: tuple[LabeledSet, LabeledSet, LabeledSet]
) -> None:
    train, orig, new = digit_sets
    wide = LabeledSet("new", np.r_[new.labels[:-1], 11], images=new.images)
    with pytest.raises(
        InputValidationError,
        match=r"labels \[11\] outside the 10 classes of model 'logreg-c1'",
    ):
        evaluate_testbed(
            [_counting("logreg-c1")], orig, wide, train=train, cache_dir=tmp_path
        )
    five = get_model("gaussian-nb", n_classes=5)
    with pytest.raises(
        InputValidationError,
        match="model 'gaussian-nb' has 5 classes but dataset 'orig' has 10",
    ):
        evaluate_testbed([five], orig, new, train=train, cache_dir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_dataset_fingerprint_sees_pixels(digit_sets: tuple) -> None:
    _, orig, _ = digit_sets
    imgs = orig.images.copy()
    imgs[0, 0, 0] ^= 1
    changed = LabeledSet(orig.name, orig.labels, orig.class_names, imgs)
    assert dataset_fingerprint(orig) != dataset_fingerprint(changed)
    assert dataset_fingerprint(orig).startswith("orig:")


def test_dask_cluster_gives_identical_results(
    tmp_path: Path, digit_sets: tuple[LabeledSet, LabeledSet, LabeledSet]
) -> None:
    distributed = pytest.importorskip("dask.distributed")
    train, orig, new = digit_sets
    names = ("logreg-c1", "mlp", "small-cnn")
    local = evaluate_testbed(
        [get_model(n, n_classes=10, preset="quick") for n in names],
        orig,
        new,
        train=train,
        cache_dir=tmp_path / "local",
    )
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        remote = evaluate_testbed(
            [get_model(n, n_classes=10, preset="quick") for n in names],
            orig,
            new,
            train=train,
            cache_dir=tmp_path / "dask",
            cluster=client,
        )
        assert len(client.scheduler_info()["workers"]) == 2
    assert list(remote) == list(names)
    for m in names:
        for a, b in zip(local[m], remote[m], strict=True):
            np.testing.assert_array_equal(a.topk, b.topk)
            np.testing.assert_array_equal(a.probs, b.probs)


def test_compare_testbed_writes_report(
    tmp_path: Path, digit_sets: tuple[LabeledSet, LabeledSet, LabeledSet]
) -> None:
    train, orig, new = digit_sets
    res = evaluate_testbed(
        [get_model(n, n_classes=10, preset="quick") for n in QUICK_MODELS],
        orig,
        new,
        train=train,
        cache_dir=tmp_path / "cache",
    )
    rep = compare_testbed(
        res,
        orig,
        new,
        out_dir=tmp_path / "reports",
        n_boot=200,
        figure_formats=("png",),
    )
    assert sorted(rep.table.models) == sorted(QUICK_MODELS)
    assert rep.fit is not None
    assert_png(rep.paths["png"], min_side=400)
    row = {r.model: r for r in rep.table.rows}["logreg-c1"]
    assert row.orig.value == pytest.approx(
        (res["logreg-c1"][0].top1 == orig.labels).mean()
    )
