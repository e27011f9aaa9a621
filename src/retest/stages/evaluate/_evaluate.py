"""The evaluate stage: run a testbed on the original test set and new ones.

:func:`evaluate_sets` trains the untrained runners on ``train`` (when given),
predicts every test set, and caches every prediction (see
:mod:`retest.stages.evaluate._prediction_cache`), so a second run computes nothing. Work
can be farmed out to a Dask cluster: a trained model gets one task per image
shard of each test set (models × shards keep every worker busy), a model that
must train first one task; each task runs the same code as the local path with
pinned thread counts and shards come back in order: predicted classes are
identical to the local run; class scores of a sharded model may differ in the
last float32 bits (BLAS rounding depends on the block's row count; 2.5e-6
relative measured). The client caches each model's predictions as soon as its
last shard arrives, so a rerun (any cluster sharing the cache folder) computes
nothing.
:func:`compare_testbed` then hands the predictions to the evaluation core
(table, linear fit, figure) and writes the report.

:func:`evaluate_project` is the whole stage on a project: the original test set
and training set come from the registered reference splits, the new sets from
the project's revisions; ``retest evaluate`` and ``retest demo`` both call it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain, pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from retest._output import RULES, check_output, claim_output_dir
from retest._parallel import available_cpus
from retest._progress import ProgressCallback, report
from retest._validation import check_applies, check_choice
from retest.cluster import cluster_client
from retest.errors import ConfigError, InputValidationError, NotFoundError
from retest.evaluate.fits import LinearFit
from retest.evaluate.table import ComparisonTable, compare
from retest.models.base import ModelRunner, array_digest, runner_fingerprint
from retest.models.prediction_files import PredictionFileRunner
from retest.records import LabeledSet, Predictions
from retest.stages.compare import fit_table
from retest.stages.evaluate._prediction_cache import (
    PredictionCache,
    dataset_fingerprint,
)
from retest.stages.report import write_report

if TYPE_CHECKING:
    from retest.project import Project
    from retest.store.base import Store

__all__ = [
    "ORIGINAL",
    "ProjectEvaluation",
    "TestbedReport",
    "compare_testbed",
    "evaluate_project",
    "evaluate_sets",
    "evaluate_testbed",
    "project_models",
    "project_revisions",
    "reference_set",
    "releasable_revisions",
    "revision_set",
]

Pair = tuple[Predictions, Predictions]
ORIGINAL = "original"
"""Dataset name of a project's original test set (tables, cache, ``--predictions``)."""
MODEL_FILE_KINDS = {".pt": "torchscript", ".ts": "torchscript", ".onnx": "onnx"}


@dataclass(frozen=True, slots=True)
class _Job:
    runner: ModelRunner
    fit: bool
    model_key: str
    missing: tuple[int, ...]  # indices of the datasets to predict


def _check_inputs(
    models: Sequence[ModelRunner],
    datasets: Sequence[LabeledSet],
    train: LabeledSet | None,
) -> None:
    names = [m.name for m in models]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"model names must be unique; repeated: {', '.join(dup)}.")
    ds_names = [d.name for d in datasets]
    dup = sorted({n for n in ds_names if ds_names.count(n) > 1})
    if dup:
        raise ConfigError(f"dataset names must be unique; repeated: {', '.join(dup)}.")
    for m in models:
        for ds in (*datasets, *((train,) if train is not None else ())):
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
            for ds in datasets:
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
    names: tuple[str, ...],
    batch_size: int | None,
    progress: ProgressCallback | None,
    *inputs: NDArray[Any],
) -> tuple[Predictions, ...]:
    """Train (if asked) and predict each input set: one unit of work, local or on Dask."""
    if fit:
        runner.fit(train_x, train_y, progress=progress)  # type: ignore[attr-defined]
    return tuple(
        runner.predict(x, dataset=name, batch_size=batch_size, progress=progress)
        for x, name in zip(inputs, names, strict=True)
    )


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
    LocalCluster on 127.0.0.1 with ``workers`` workers (default 2, or 1 on one core); another
    string is a scheduler address (see :func:`retest.cluster._dask.cluster_client`)."""
    from dask.distributed import Client

    if isinstance(cluster, Client):
        yield cluster
        return
    if cluster is None or cluster == "local":
        with cluster_client(None, workers or min(2, available_cpus())) as client:
            yield client
        return
    if not isinstance(cluster, str):
        raise ConfigError(
            f"cluster must be 'local', a scheduler address or a dask Client. Got {cluster!r}."
        )
    with cluster_client(cluster) as client:
        yield client


@dataclass(frozen=True, slots=True)
class _Outcome:
    predictions: dict[str, tuple[Predictions, ...]]
    computed: int  # cache entries written (model × dataset)


def _evaluate(
    models: Sequence[ModelRunner],
    datasets: Sequence[LabeledSet],
    *,
    cache_dir: str | os.PathLike[str],
    train: LabeledSet | None,
    cluster: Any,
    workers: int | None,
    batch_size: int | None,
    store: Store | None,
    progress: ProgressCallback | None,
) -> _Outcome:
    models, datasets = list(models), list(datasets)
    _check_inputs(models, datasets, train)
    cache = PredictionCache(cache_dir, store=store)
    t_digest = (
        array_digest(train.images, train.labels)
        if train is not None and train.images is not None
        else None
    )
    keys = [dataset_fingerprint(d) for d in datasets]
    found: dict[str, list[Predictions | None]] = {}
    todo: list[_Job] = []
    for m in models:
        fit = not getattr(m, "fitted", True)
        if fit and t_digest is None:
            raise ConfigError(
                f"model {m.name!r} is untrained; pass train= (a LabeledSet with images)."
            )
        mk = runner_fingerprint(m, train_digest=t_digest if fit else None)
        hits = [cache.load(mk, k) for k in keys]
        found[m.name] = hits
        missing = tuple(i for i, h in enumerate(hits) if h is None)
        if missing:
            todo.append(_Job(m, fit, mk, missing))
    task, total = "evaluate testbed", len(models)
    done = len(models) - len(todo)
    report(progress, task, done, total)
    # Saved predictions are read, not computed: whole, here. A cluster would cut
    # their dataset into image shards and get every row back for each.
    read = [j for j in todo if isinstance(j.runner, PredictionFileRunner)]
    run = [j for j in todo if not isinstance(j.runner, PredictionFileRunner)]
    local = cluster is None and workers is None
    results = chain(
        _run_local(read if not local else todo, datasets, train, batch_size, progress),
        () if local else _run_dask(run, datasets, train, batch_size, cluster, workers),
    )
    computed = 0
    for job, preds in results:  # in completion order; each is cached at once
        for i, pred in zip(job.missing, preds, strict=True):
            pred = _check_result(job.runner, pred, datasets[i])
            cache.save(pred, job.model_key, keys[i])
            found[job.runner.name][i] = pred
            computed += 1
        done += 1
        report(progress, task, done, total)
    out: dict[str, tuple[Predictions, ...]] = {}
    for m in models:
        got = found[m.name]
        assert all(p is not None for p in got)
        out[m.name] = tuple(p for p in got if p is not None)
    return _Outcome(out, computed)


def evaluate_sets(
    models: Sequence[ModelRunner],
    datasets: Sequence[LabeledSet],
    *,
    cache_dir: str | os.PathLike[str],
    train: LabeledSet | None = None,
    cluster: Any = None,
    workers: int | None = None,
    batch_size: int | None = None,
    store: Store | None = None,
    progress: ProgressCallback | None = None,
) -> dict[str, tuple[Predictions, ...]]:
    """Predictions of every model on every dataset: ``{model: (pred per dataset)}``.

    A model is trained at most once per call, whatever the number of datasets,
    and only the datasets missing from the cache are predicted.

    Parameters
    ----------
    models : sequence of ModelRunner
        Runners; untrained ones (``fitted`` false) are trained on ``train`` first.
    datasets : sequence of LabeledSet
        Test sets with unique names (with images, unless every runner reads
        prediction files).
    cache_dir : path
        Prediction cache folder; cached predictions are returned without computing.
    train : LabeledSet, optional
        Training set for the untrained runners; part of their cache key.
    cluster : None, "local", scheduler address or dask Client
        Where to run: ``None`` (and no ``workers``) runs in this process, one
        model after the other; otherwise one Dask task per model.
    workers : int, optional
        Start a local Dask cluster on 127.0.0.1 with this many worker processes
        (``cluster=None`` or ``"local"``; default 2 for ``"local"``).
    store : Store, optional
        Project store whose predictions table records new cache entries.

    Raises
    ------
    InputValidationError
        Labels outside a model's classes, a model with the wrong number of output
        classes, missing images. Nothing is cached for a failing model.
    """
    return _evaluate(
        models,
        datasets,
        cache_dir=cache_dir,
        train=train,
        cluster=cluster,
        workers=workers,
        batch_size=batch_size,
        store=store,
        progress=progress,
    ).predictions


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
    """:func:`evaluate_sets` on two sets: ``{model: (original, new)}``."""
    res = evaluate_sets(
        models,
        [original, new],
        cache_dir=cache_dir,
        train=train,
        cluster=cluster,
        workers=workers,
        batch_size=batch_size,
        progress=progress,
    )
    return {m: (p[0], p[1]) for m, p in res.items()}


def _train_args(train: LabeledSet | None) -> tuple[Any, Any]:
    if train is None:
        return None, None
    return train.images, train.labels


def _run_local(
    jobs: Sequence[_Job],
    datasets: Sequence[LabeledSet],
    train: LabeledSet | None,
    batch_size: int | None,
    progress: ProgressCallback | None,
) -> Iterator[tuple[_Job, tuple[Predictions, ...]]]:
    tx, ty = _train_args(train)
    for job in jobs:  # lazily, so each model is cached as soon as it finishes
        sets = [datasets[i] for i in job.missing]
        names = tuple(d.name for d in sets)
        xs = [_inputs(d) for d in sets]
        yield (
            job,
            run_model(job.runner, job.fit, tx, ty, names, batch_size, progress, *xs),
        )


def _shard_bounds(n: int, n_shards: int) -> list[tuple[int, int]]:
    edges = np.linspace(0, n, max(1, min(n, n_shards)) + 1).astype(int).tolist()
    return [(a, b) for a, b in pairwise(edges) if b > a]


def _concat(parts: Sequence[Predictions]) -> Predictions:
    """One model's predictions of consecutive image shards as one dataset."""
    first = parts[0]
    probs = (
        None
        if any(p.probs is None for p in parts)
        else np.concatenate([p.probs for p in parts if p.probs is not None])
    )
    return Predictions(
        first.model,
        first.dataset,
        np.concatenate([p.topk for p in parts]),
        probs,
        first.n_classes,
    )


def _run_dask(
    jobs: Sequence[_Job],
    datasets: Sequence[LabeledSet],
    train: LabeledSet | None,
    batch_size: int | None,
    cluster: Any,
    workers: int | None,
    shards: int | None = None,
) -> Iterator[tuple[_Job, tuple[Predictions, ...]]]:
    """Models × image shards on the cluster.

    A trained model's missing datasets are cut into contiguous image shards
    (default: twice the workers' threads), one task per (model, shard), so one big
    test set or one slow model keeps every worker busy; each dataset's shards are
    scattered once and shared by all models. An untrained model is one task (it
    fits first). A model is yielded (and cached by the caller) when its last shard
    arrives; rows come back in order (classes as the local run; scores to float32
    rounding).
    """
    if not jobs:
        return
    from dask.distributed import as_completed

    with _client(cluster, workers) as client:
        tx, ty = _train_args(train)
        info = client.scheduler_info().get("workers", {})
        n_threads = sum(int(w.get("nthreads", 1)) for w in info.values()) or 1
        bounds = [_shard_bounds(d.n, shards or 2 * n_threads) for d in datasets]
        need = {i for job in jobs if not job.fit for i in job.missing}
        s_parts = {
            i: client.scatter([_inputs(datasets[i])[a:b] for a, b in bounds[i]])
            for i in sorted(need)
        }
        fitting = [job for job in jobs if job.fit]
        # One copy of each whole array per worker for the models that train first.
        s_xs = (
            client.scatter([_inputs(d) for d in datasets], broadcast=True)
            if fitting
            else []
        )
        s_tx, s_ty = (
            client.scatter([tx, ty], broadcast=True)
            if tx is not None and fitting
            else (None, None)
        )
        owner: dict[Any, tuple[int, int, int]] = {}  # future → (job, dataset, shard)
        for j, job in enumerate(jobs):
            if job.fit:
                fut = client.submit(
                    run_model,
                    job.runner,
                    True,
                    s_tx,
                    s_ty,
                    tuple(datasets[i].name for i in job.missing),
                    batch_size,
                    None,
                    *(s_xs[i] for i in job.missing),
                    pure=False,
                )
                owner[fut] = (j, -1, -1)
                continue
            for i in job.missing:
                for s, part in enumerate(s_parts[i]):
                    fut = client.submit(
                        run_model,
                        job.runner,
                        False,
                        None,
                        None,
                        (datasets[i].name,),
                        batch_size,
                        None,
                        part,
                        pure=False,
                    )
                    owner[fut] = (j, i, s)
        got: dict[tuple[int, int], dict[int, Predictions]] = {}
        left = {
            j: (1 if job.fit else sum(len(bounds[i]) for i in job.missing))
            for j, job in enumerate(jobs)
        }
        for fut, preds in as_completed(owner, with_results=True):
            j, i, s = owner[fut]
            left[j] -= 1
            if i < 0:
                yield jobs[j], preds
                continue
            got.setdefault((j, i), {})[s] = preds[0]
            if left[j] == 0:
                yield (
                    jobs[j],
                    tuple(
                        _concat([got[j, i][s] for s in range(len(bounds[i]))])
                        for i in jobs[j].missing
                    ),
                )


@dataclass(frozen=True, slots=True)
class TestbedReport:
    """The comparison of a testbed and where its files were written."""

    table: ComparisonTable
    fit: LinearFit | None
    paths: dict[str, Path]


def compare_testbed(
    predictions: Mapping[str, Sequence[Predictions]],
    original: LabeledSet,
    new: LabeledSet,
    *,
    out_dir: str | os.PathLike[str],
    metric: str = "top1",
    axes: str = "linear",
    confidence: float = 0.95,
    n_boot: int = 100_000,
    random_state: int = 0,
    figure_formats: Sequence[str] = ("png", "pdf"),
    label_models: Sequence[str] = (),
    progress: ProgressCallback | None = None,
) -> TestbedReport:
    """Table, linear fit and figure of ``{model: (original, new)}`` predictions.

    The same evaluation core and report writer as ``retest compare``; the fit needs
    at least three models (``fit`` is None below that).
    """
    tb_o = {m: p[0] for m, p in predictions.items()}
    tb_n = {m: p[1] for m, p in predictions.items()}
    table = compare(original, new, tb_o, tb_n, metric=metric, confidence=confidence)
    unknown = sorted(set(label_models) - set(table.models))
    if unknown:
        raise InputValidationError(
            f"--label names models that are not in the table: {', '.join(unknown)}."
        )
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
    paths = write_report(
        table, fit, out_dir, label_models=label_models, figure_formats=figure_formats
    )
    return TestbedReport(table, fit, paths)


# ------------------------------------------------------------------ projects


def _stack(images: Sequence[NDArray[np.uint8]], what: str) -> NDArray[np.uint8]:
    shapes = sorted({tuple(im.shape) for im in images})
    if len(shapes) > 1:
        raise InputValidationError(
            f"{what} has images of {len(shapes)} shapes ({shapes[0]}, {shapes[1]}, …); "
            "model runners need one shape. Evaluate prediction folders instead "
            "(--predictions) or resize the images."
        )
    if not images:
        return np.empty((0,), np.uint8)
    return np.stack(images)


def reference_set(
    project: Project,
    split: str = "test",
    *,
    name: str | None = None,
    images: bool = True,
) -> LabeledSet:
    """One registered split of the original dataset, in index order.

    Raises
    ------
    NotFoundError
        The project has no reference images of that split.
    """
    rows = project.store.references.list(split=split)
    if not rows:
        have = sorted({r.split for r in project.store.references.list()})
        raise NotFoundError(
            f"the project has no original {split!r} images (registered splits: "
            f"{', '.join(have) or 'none'}). Register them with `retest reference add "
            f"… --split {split}`."
        )
    rows.sort(key=lambda r: r.index)
    labels = np.array([r.class_id for r in rows], np.int64)
    x = None
    if images:
        arrays = {r.array_name for r in rows}
        rownums = np.array(
            [r.array_row if r.array_row is not None else -1 for r in rows]
        )
        if len(arrays) == 1 and None not in arrays and (rownums >= 0).all():
            px = project.pixel_array(str(arrays.pop()))
            full = px.array()
            if np.array_equal(rownums, np.arange(len(full))):
                x = np.array(full)
            else:
                x = px.read(rownums)
        else:
            ids = [r.id for r in rows]
            x = _stack(project.pixels(ids), f"original split {split!r}")
    return LabeledSet(name or split, labels, project.class_names, x)


def project_revisions(
    project: Project, names: Sequence[str] | None = None
) -> list[str]:
    """``names`` checked against the project's revisions (default: all of them,
    oldest first), duplicates dropped.

    Raises
    ------
    NotFoundError
        An unknown name (the message lists the existing ones), or no revision.
    """
    have = [r.name for r in project.store.revisions.list()]
    if names is None:
        if not have:
            raise NotFoundError(
                "the project has no revision to evaluate; create one with "
                "`retest sample`."
            )
        names = have
    for n in names:
        if n not in have:
            raise NotFoundError(
                f"no revision {n!r} in the project (revisions: "
                f"{', '.join(have) or 'none; create one with `retest sample`'})."
            )
        if n == ORIGINAL:
            raise ConfigError(f"a revision may not be called {ORIGINAL!r}.")
    return list(dict.fromkeys(names))


def releasable_revisions(
    project: Project, names: Sequence[str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """The revisions fit to evaluate like a release: ``names`` (default: all)
    that are non-empty, valid and whose members are all still eligible
    (:func:`retest.stages.export._export.check_exportable`), and why the others are not.

    With explicit ``names`` the first unfit one raises; by default the unfit ones
    are skipped and returned with their reason.
    """
    from retest.errors import StageError
    from retest.stages.export import check_exportable

    chosen = project_revisions(project, names)
    ok, skipped = [], {}
    for name in chosen:
        rev = project.store.revisions.get(name)
        members = project.store.revisions.members(name)
        try:
            check_exportable(project, rev, members, action="evaluate")
        except StageError as err:
            if names is not None:
                raise
            skipped[name] = str(err)
            continue
        ok.append(name)
    if not ok:
        first = next(iter(skipped.values()))
        raise StageError(f"no revision is fit to evaluate; {first}")
    return ok, skipped


def revision_set(
    project: Project, revision: str, *, images: bool = True, chunk: int = 4096
) -> LabeledSet:
    """A revision's members (revision order, the export order) as a LabeledSet.

    Raises
    ------
    NotFoundError
        No revision of that name (the message lists the existing ones).
    """
    from retest.stages.export import verified_pixels

    project_revisions(project, [revision])
    members = project.store.revisions.members(revision)
    labels = np.array([m.class_id for m in members], np.int64)
    x = None
    if images:  # checked against their content hashes: never score damaged bytes
        x = _stack(verified_pixels(project, members), f"revision {revision!r}")
    return LabeledSet(revision, labels, project.class_names, x)


def _model_file_kind(spec: str) -> tuple[str, Path]:
    """The runner kind and path of a ``[KIND:]PATH`` model file."""
    kind, sep, path = spec.partition(":")
    if not sep or len(kind) == 1:  # no kind, or a Windows drive letter
        kind, path = "", spec
    p = Path(path)
    if not kind:
        kind = MODEL_FILE_KINDS.get(p.suffix.lower(), "")
        if not kind:
            raise ConfigError(
                f"--model-file {spec}: cannot tell the model kind from the suffix "
                f"{p.suffix!r}; write KIND:PATH with KIND one of torchscript, onnx, "
                "sklearn."
            )
    return kind, p


def _model_file(
    spec: str, n_classes: int, options: Mapping[str, Any], channels: int | None = None
) -> ModelRunner:
    from retest.models.adapters import ChannelAdapter
    from retest.models.base import load_model

    kind, p = _model_file_kind(spec)
    if not p.is_file():
        raise InputValidationError(f"--model-file {spec}: {p} does not exist.")
    opts = dict(options) if kind == "onnx" else {}
    runner: Any = load_model(kind, str(p), name=p.stem, n_classes=n_classes, **opts)
    if channels is not None:
        runner = ChannelAdapter(runner, channels)
    runner.model_spec = spec  # checked against the test set's images first
    return runner  # type: ignore[no-any-return]


def project_models(
    project: Project,
    *,
    preset: str | None = None,
    names: Sequence[str] = (),
    files: Sequence[str] = (),
    predictions: Mapping[str, str | os.PathLike[str]] | None = None,
    datasets: Sequence[str] = (),
    seed: int = 0,
    onnx_options: Mapping[str, Any] | None = None,
    model_channels: int | None = None,
    progress: ProgressCallback | None = None,
) -> list[ModelRunner]:
    """The models to evaluate, in this order: the built-in testbed's ``preset``
    (or ``names``; the zoo of :mod:`retest.models.testbed`), model files
    (``[KIND:]PATH``, kind from the suffix: ``.pt``/``.ts`` TorchScript, ``.onnx``)
    and prediction folders (``{dataset: folder}``; the models found in the
    folders of every dataset in ``datasets``).

    Raises
    ------
    ConfigError
        No model at all, or prediction folders missing for some dataset.
    """
    from retest.models.testbed import build_testbed

    if onnx_options:  # an ONNX option without an ONNX model would be ignored
        from retest.models.onnx_runner import ONNX_LAYOUTS

        if "layout" in onnx_options:
            check_choice(onnx_options["layout"], ONNX_LAYOUTS, "--onnx-layout")
        kinds = [_model_file_kind(f)[0] for f in files]
        check_applies("--onnx-layout", "an ONNX --model-file", "onnx" in kinds)
    k = len(project.class_names)
    out: list[ModelRunner] = []
    if preset is not None or names:
        out += build_testbed(
            preset or "full",
            n_classes=k,
            random_state=seed,
            names=list(names) if names else None,
            progress=progress,
        )
    out += [_model_file(f, k, onnx_options or {}, model_channels) for f in files]
    if predictions:
        unknown = sorted(set(predictions) - set(datasets))
        if unknown:
            raise ConfigError(
                f"--predictions {unknown[0]}=…: {unknown[0]!r} is not one of the "
                f"evaluated datasets ({', '.join(datasets)})."
            )
        missing = [d for d in datasets if d not in predictions]
        if missing:
            raise ConfigError(
                f"--predictions has no folder for {missing[0]!r}; prediction folders "
                f"are needed for every evaluated dataset ({', '.join(datasets)}). "
                f"Pass --predictions {missing[0]}=DIR or choose the revisions with "
                "--revision."
            )
        from retest.models.prediction_files import runners_from_folders

        out += runners_from_folders(
            {d: Path(predictions[d]) for d in datasets}, n_classes=k
        )
    if not out:
        raise ConfigError(
            "no models to evaluate: pass --preset quick|full, --model NAME, "
            "--model-file [KIND:]PATH or --predictions DATASET=DIR."
        )
    return out


@dataclass(frozen=True, slots=True)
class ProjectEvaluation:
    """What :func:`evaluate_project` computed: one report per revision."""

    original: LabeledSet
    revisions: tuple[LabeledSet, ...]
    reports: dict[str, TestbedReport]
    predictions: dict[str, tuple[Predictions, ...]] = field(repr=False)
    computed: int = 0
    models: tuple[str, ...] = ()

    def pairs(self, revision: str) -> dict[str, Pair]:
        """``{model: (original, revision)}`` predictions."""
        i = 1 + [r.name for r in self.revisions].index(revision)
        return {m: (p[0], p[i]) for m, p in self.predictions.items()}


def _check_same_form(sets: Sequence[LabeledSet]) -> None:
    """A revision's images must have the original test set's shape: a model
    trained on one form cannot read the other (it would fail in the model's own
    code, or worse, run on reshaped pixels)."""
    from retest.stages.reference import describe_shape

    if sets[0].images is None:
        return
    want = tuple(sets[0].images.shape[1:])
    for s in sets[1:]:
        if s.images is not None and tuple(s.images.shape[1:]) != want:
            got = tuple(s.images.shape[1:])
            raise InputValidationError(
                f"revision {s.name!r} holds {describe_shape(got)} images but the "
                f"original test set is {describe_shape(want)}; a model cannot be "
                "evaluated on both. Its candidates were ingested in another form: "
                "re-add their source (`retest source add` stores images as the "
                "originals are) and sample a new revision."
            )


def evaluate_project(
    project: Project,
    models: Sequence[ModelRunner],
    *,
    revisions: Sequence[str] | None = None,
    test_split: str = "test",
    train_split: str = "train",
    out_dir: str | os.PathLike[str] | None = None,
    cluster: Any = None,
    workers: int | None = None,
    batch_size: int | None = None,
    metric: str = "top1",
    axes: str = "linear",
    confidence: float = 0.95,
    n_boot: int = 100_000,
    seed: int = 0,
    figure_formats: Sequence[str] = ("png", "pdf"),
    label_models: Sequence[str] = (),
    progress: ProgressCallback | None = None,
) -> ProjectEvaluation:
    """Evaluate ``models`` on the project's original test set and its revisions.

    The original test set is the reference split ``test_split`` (named
    :data:`ORIGINAL`); untrained models are trained on the reference split
    ``train_split``. Predictions are cached under ``arrays/predictions/`` (and
    listed in the store). For each revision the comparison (table, fit, figure)
    is written to ``<out_dir>/<revision>/`` (default ``reports/evaluate``).

    Parameters
    ----------
    revisions : sequence of str, optional
        Revision names (default: every revision of the project, oldest first).
    seed : int
        Seed of the bootstrap of the fit.

    Raises
    ------
    NotFoundError
        Unknown revision, no revision at all, missing reference split.
    ConfigError
        ``out_dir`` is refused by the output rule (:mod:`retest._output`).
    """
    base = Path(out_dir) if out_dir is not None else project.reports_dir / "evaluate"
    check_output(base, RULES["evaluate"])
    store = project.store
    revisions = project_revisions(project, revisions)
    need_images = any(not isinstance(m, PredictionFileRunner) for m in models)
    sets = [
        reference_set(project, test_split, name=ORIGINAL, images=need_images),
        *(revision_set(project, r, images=need_images) for r in revisions),
    ]
    _check_same_form(sets)
    if sets[0].images is not None:
        from retest.models.adapters import check_model_input

        for m in models:
            spec = getattr(m, "model_spec", None)
            if spec is not None:
                check_model_input(m, sets[0].images, spec=spec)
    need_train = any(not getattr(m, "fitted", True) for m in models)
    train = reference_set(project, train_split) if need_train else None
    outcome = _evaluate(
        models,
        sets,
        cache_dir=project.arrays_dir / "predictions",
        train=train,
        cluster=cluster,
        workers=workers,
        batch_size=batch_size,
        store=store,
        progress=progress,
    )
    claim_output_dir(base, RULES["evaluate"])
    reports = {}
    for i, new in enumerate(sets[1:], 1):
        pairs = {m: (p[0], p[i]) for m, p in outcome.predictions.items()}
        reports[new.name] = compare_testbed(
            pairs,
            sets[0],
            new,
            out_dir=base / new.name,
            metric=metric,
            axes=axes,
            confidence=confidence,
            n_boot=n_boot,
            random_state=seed,
            figure_formats=figure_formats,
            label_models=label_models,
            progress=progress,
        )
    return ProjectEvaluation(
        sets[0],
        tuple(sets[1:]),
        reports,
        outcome.predictions,
        outcome.computed,
        tuple(m.name for m in models),
    )
