"""evaluate on a Dask cluster: trained models × image shards, one task each,
assembled in order (classes identical to the local run, scores to float32
rounding: BLAS rounding depends on a block's row count) and cached by the client."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retest.models.base import get_model
from retest.records import LabeledSet
from retest.stages.evaluate import evaluate_testbed

NAMES = ("logreg-c1", "gaussian-nb")


def _fitted(train: LabeledSet) -> list:
    out = []
    for n in NAMES:
        m = get_model(n, n_classes=10, preset="quick")
        m.fit(train.images, train.labels)
        assert m.fitted
        out.append(m)
    return out


def test_models_times_shards_equal_the_local_run(
    tmp_path: Path, digit_sets: tuple[LabeledSet, LabeledSet, LabeledSet]
) -> None:
    distributed = pytest.importorskip("dask.distributed")
    train, orig, new = digit_sets
    local = evaluate_testbed(_fitted(train), orig, new, cache_dir=tmp_path / "local")
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
        distributed.get_task_stream(client) as ts,
    ):
        remote = evaluate_testbed(
            _fitted(train), orig, new, cache_dir=tmp_path / "dask", cluster=client
        )
    tasks = [t for t in ts.data if str(t["key"]).startswith("run_model")]
    # 2 workers × 1 thread → 4 shards per dataset: models × datasets × shards
    assert len(tasks) == len(NAMES) * 2 * 4
    for m in NAMES:
        for a, b in zip(local[m], remote[m], strict=True):
            assert b.n == a.n and b.dataset == a.dataset
            np.testing.assert_array_equal(a.topk, b.topk)
            np.testing.assert_allclose(a.probs, b.probs, rtol=1e-5, atol=1e-6)
    # the client cached every (model, dataset) as its last shard arrived
    assert len(list((tmp_path / "dask").rglob("*.npz"))) == len(NAMES) * 2
