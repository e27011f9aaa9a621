"""The evaluate stage: run a testbed on the original test set and a new one.

:func:`evaluate_testbed` trains the untrained runners on ``train`` (when given),
predicts both test sets, and caches every prediction (see
:mod:`retest.pipeline.prediction_cache`), so a second run computes nothing. Work
can be farmed out to a Dask cluster, one task per model; each task runs the same
code as the local path with pinned thread counts, so the results are identical.
:func:`compare_testbed` then hands the predictions to the evaluation core
(table, linear fit, figure) and writes the report.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest._progress import ProgressCallback, report
from retest.errors import ConfigError, InputValidationError
from retest.evaluate.fits import LinearFit
from retest.evaluate.table import ComparisonTable, compare
from retest.models.base import ModelRunner, array_digest, runner_fingerprint
from retest.models.prediction_files import PredictionFileRunner
from retest.pipeline.cluster import cluster_client
from retest.pipeline.compare import fit_table
from retest.pipeline.prediction_cache import PredictionCache, dataset_fingerprint
from retest.pipeline.report import write_report
from retest.records import LabeledSet, Predictions

__all__ = ["TestbedReport", "compare_testbed", "evaluate_testbed"]

Pair = tuple[Predictions, Predictions]


@dataclass(frozen=True, slots=True)
class _Job:
    runner: ModelRunner
    fit: bool
    model_key: str


def _check_inputs(
    models: Sequence[ModelRunner],
    original: LabeledSet,
    new: LabeledSet,
    train: LabeledSet | None,
) -> None:
    names = [m.name for m in models]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"model names must be unique; repeated: {', '.join(dup)}.")
    for m in models:
        for ds in (original, new, *((train,) if train is not None else ())):
            if ds.class_names is not None and len(ds.class_names) != m.n_classes:
                raise InputValidationError(
                    f"model {m.name!r} has {m.n_classes} classes but dataset {ds.name!r} "
                    f"has {len(ds.class_names)}."
                )
            bad = ds.labels[ds.labels >= m.n_classes]
            if bad.size:
                raise InputValidationError(
                    f"dataset {ds.name!r} has labels {np.unique(bad)[:5].tolist()} outside "
                    f"the {m.n_classes} classes of model {m.name!r} (ids 0..{m.n_classes - 1})."
                )
        if not isinstance(m, PredictionFileRunner):
            for ds in (original, new):
                if ds.images is None:
                    raise InputValidationError(
                        f"dataset {ds.name!r} has no images; model {m.name!r} needs them."
                    )


def _inputs(ds: LabeledSet) -> NDArray[Any]:
    return ds.images if ds.images is not None else np.zeros((ds.n, 1), np.uint8)


def run_model(
    runner: ModelRunner,
    fit: bool,
    train_x: NDArray[Any] | None,
    train_y: NDArray[Any] | None,
    orig_x: NDArray[Any],
    new_x: NDArray[Any],
    names: tuple[str, str],
    batch_size: int | None = None,
    progress: ProgressCallback | None = None,
) -> Pair:
    """Train (if asked) and predict both sets: one unit of work, local or on Dask."""
    if fit:
        runner.fit(train_x, train_y, progress=progress)  # type: ignore[attr-defined]
    po = runner.predict(
        orig_x, dataset=names[0], batch_size=batch_size, progress=progress
    )
    pn = runner.predict(
        new_x, dataset=names[1], batch_size=batch_size, progress=progress
    )
    return po, pn


def _check_result(
    runner: ModelRunner, pred: Predictions, ds: LabeledSet
) -> Predictions:
    if pred.n != ds.n:
        raise InputValidationError(
            f"model {runner.name!r} returned {pred.n} predictions for the {ds.n} "
            f"images of {ds.name!r}."
        )
    if pred.n_classes is not None and pred.n_classes != runner.n_classes:
        raise InputValidationError(
            f"model {runner.name!r} outputs {pred.n_classes} classes but the dataset "
            f"{ds.name!r} has {runner.n_classes}."
        )
    return pred


@contextmanager
def _client(cluster: Any, workers: int | None) -> Iterator[Any]:
    """A Dask client: a ``Client`` is used as is; ``"local"`` or ``None`` starts a
    LocalCluster on 127.0.0.1 with ``workers`` workers (default 2); another
    string is a scheduler address (see :func:`retest.pipeline.cluster.cluster_client`)."""
    from dask.distributed import Client

    if isinstance(cluster, Client):
        yield cluster
        return
    if cluster is None or cluster == "local":
        with cluster_client(None, workers or 2) as client:
            yield client
        return
    if not isinstance(cluster, str):
        raise ConfigError(
            f"cluster must be 'local', a scheduler address or a dask Client. Got {cluster!r}."
        )
    with cluster_client(cluster) as client:
        yield client


def evaluate_testbed(
    models: Sequence[ModelRunner],
    original: LabeledSet,
    new: LabeledSet,
    *,
    cache_dir: str | os.PathLike[str],
    train: LabeledSet | None = None,
    cluster: Any = None,
    workers: int | None = None,
    batch_size: int | None = None,
    progress: ProgressCallback | None = None,
) -> dict[str, Pair]:
    """Predictions of every model on ``original`` and ``new``: ``{model: (orig, new)}``.

    Parameters
    ----------
    models : sequence of ModelRunner
        Runners; untrained ones (``fitted`` false) are trained on ``train`` first.
    original, new : LabeledSet
        The two test sets (with images, unless every runner reads prediction files).
    cache_dir : path
        Prediction cache folder; cached pairs are returned without computing.
    train : LabeledSet, optional
        Training set for the untrained runners; part of their cache key.
    cluster : None, "local", scheduler address or dask Client
        Where to run: ``None`` (and no ``workers``) runs in this process, one
        model after the other; otherwise one Dask task per model.
    workers : int, optional
        Start a local Dask cluster on 127.0.0.1 with this many worker processes
        (``cluster=None`` or ``"local"``; default 2 for ``"local"``).

    Raises
    ------
    InputValidationError
        Labels outside a model's classes, a model with the wrong number of output
        classes, missing images. Nothing is cached for a failing model.
    """
    models = list(models)
    _check_inputs(models, original, new, train)
    cache = PredictionCache(cache_dir)
    t_digest = (
        array_digest(train.images, train.labels)
        if train is not None and train.images is not None
        else None
    )
    keys = (dataset_fingerprint(original), dataset_fingerprint(new))
    out: dict[str, Pair] = {}
    todo: list[_Job] = []
    for m in models:
        fit = not getattr(m, "fitted", True)
        if fit and t_digest is None:
            raise ConfigError(
                f"model {m.name!r} is untrained; pass train= (a LabeledSet with images)."
            )
        mk = runner_fingerprint(m, train_digest=t_digest if fit else None)
        hit_o, hit_n = cache.load(mk, keys[0]), cache.load(mk, keys[1])
        if hit_o is not None and hit_n is not None:
            out[m.name] = (hit_o, hit_n)
        else:
            todo.append(_Job(m, fit, mk))
    task, total = "evaluate testbed", len(models)
    report(progress, task, len(out), total)
    results = (
        _run_local(todo, original, new, train, batch_size, progress)
        if cluster is None and workers is None
        else _run_dask(todo, original, new, train, batch_size, cluster, workers)
    )
    for job, pair in results:  # in completion order; each is cached at once
        po = _check_result(job.runner, pair[0], original)
        pn = _check_result(job.runner, pair[1], new)
        cache.save(po, job.model_key, keys[0])
        cache.save(pn, job.model_key, keys[1])
        out[job.runner.name] = (po, pn)
        report(progress, task, len(out), total)
    return {m.name: out[m.name] for m in models}


def _args(
    train: LabeledSet | None, original: LabeledSet, new: LabeledSet
) -> tuple[Any, ...]:
    tx = train.images if train is not None else None
    ty = train.labels if train is not None else None
    return tx, ty, _inputs(original), _inputs(new), (original.name, new.name)


def _run_local(
    jobs: Sequence[_Job],
    original: LabeledSet,
    new: LabeledSet,
    train: LabeledSet | None,
    batch_size: int | None,
    progress: ProgressCallback | None,
) -> Iterator[tuple[_Job, Pair]]:
    tx, ty, ox, nx, names = _args(train, original, new)
    for job in jobs:  # lazily, so each model is cached as soon as it finishes
        yield (
            job,
            run_model(job.runner, job.fit, tx, ty, ox, nx, names, batch_size, progress),
        )


def _run_dask(
    jobs: Sequence[_Job],
    original: LabeledSet,
    new: LabeledSet,
    train: LabeledSet | None,
    batch_size: int | None,
    cluster: Any,
    workers: int | None,
) -> Iterator[tuple[_Job, Pair]]:
    if not jobs:
        return
    from dask.distributed import as_completed

    with _client(cluster, workers) as client:
        tx, ty, ox, nx, names = _args(train, original, new)
        # One copy of each array per worker instead of one per task.
        s_ox, s_nx = client.scatter([ox, nx], broadcast=True)
        s_tx, s_ty = (
            client.scatter([tx, ty], broadcast=True) if tx is not None else (None, None)
        )
        futures = {
            client.submit(
                run_model, job.runner, job.fit, s_tx, s_ty, s_ox, s_nx, names,
                batch_size, pure=False,
            ): job
            for job in jobs
        }  # fmt: skip
        for fut, pair in as_completed(futures, with_results=True):
            yield futures[fut], pair


@dataclass(frozen=True, slots=True)
class TestbedReport:
    """The comparison of a testbed and where its files were written."""

    table: ComparisonTable
    fit: LinearFit | None
    paths: dict[str, Path]


def compare_testbed(
    predictions: Mapping[str, Pair],
    original: LabeledSet,
    new: LabeledSet,
    *,
    out_dir: str | os.PathLike[str],
    metric: str = "top1",
    axes: str = "linear",
    n_boot: int = 100_000,
    random_state: int = 0,
    figure_formats: Sequence[str] = ("png", "pdf"),
    progress: ProgressCallback | None = None,
) -> TestbedReport:
    """Table, linear fit and figure of :func:`evaluate_testbed`'s output (evaluation core)."""
    tb_o = {m: p[0] for m, p in predictions.items()}
    tb_n = {m: p[1] for m, p in predictions.items()}
    table = compare(original, new, tb_o, tb_n, metric=metric)
    fit = (
        fit_table(
            table,
            axes=axes,
            n_boot=n_boot,
            random_state=random_state,
            progress=progress,
        )
        if len(table.models) >= 3
        else None
    )
    paths = write_report(table, fit, out_dir, figure_formats=figure_formats)
    return TestbedReport(table, fit, paths)
