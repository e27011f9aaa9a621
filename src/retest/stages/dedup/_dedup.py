"""The ``dedup`` stage: neighbours per metric and their report (the review queue and
verdicts are the project layer's: :mod:`retest.project._neardup`).

For every (non-blacklisted) candidate it stores the ``k`` nearest images under each
requested metric. Metrics come from a registry
(:mod:`retest.stages.dedup._metrics`): built-in ``l2`` (squared pixel L2 after
resizing both sides to a common size), ``features`` (squared L2 between
embeddings; by default of a small MLP trained on the project's original training
images, :mod:`retest.models.reference_features`), and — on the union of the
exact metrics' neighbour lists (:mod:`retest.stages.dedup._shortlist`) —
``dssim`` and ``warp`` (squared L2 up to a small shift/rescale/stretch,
:mod:`retest.dedup.warp`). References are the original train and/or test images
and the candidate pool itself (a candidate never lists itself).

Run state lives in the store (:mod:`retest.project._checkpoint`), one record per
metric (``dedup/metric/<name>``: fingerprint, image shape, embedder, review
target and how it was obtained, complete). The review queue covers every metric ever run on
the project: a later run of other metrics adds to it and never hides pending
pairs of earlier ones. Review targets: the target stored with the metric's run
(``features``: calibrated on the originals), else the metric's default for the
image size; ``[thresholds]`` in retest.toml (keys ``l2``, ``features``,
``dssim``, ``warp``) overrides them, and so do per-call ``thresholds``.

The stage is resumable: candidates are processed in chunks and each finished
(metric, chunk) is a chunk of the metric's checkpoint run ``dedup:<fingerprint>``
(the fingerprint covers the candidate and reference ids and the parameters that
change that metric's lists, so a run of another ``--metrics`` subset skips the
chunks it shares); a restart skips finished chunks and produces the same lists,
as long as no run with other settings replaced the metric's stored lists since
(:func:`_chunks_trusted`). Inputs are validated before anything
is written. Pixel (and feature) matrices are written once as ``.npy`` under
``arrays/dedup/<fingerprint>/`` and memory-mapped, so Dask workers reopen them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest._progress import ProgressCallback, report
from retest.cluster import SHARD_TRANSFERS, ClusterReferences
from retest.dedup.knn import (
    DEFAULT_MEMORY_BUDGET,
    Backend,
    KnnResult,
    knn,
)
from retest.dedup.ssim import SSIMParams
from retest.dedup.warp import WarpParams
from retest.errors import ConfigError, InputValidationError, StageError
from retest.models.embedders import parse_embedder_spec
from retest.project import (
    AGAINST,
    BUILTIN_METRICS,
    DEDUP_STAGE,
    STATE_PREFIX,
    Checkpoint,
    Project,
    load_neighbours,
    metric_state,
    metrics_run,
    save_state,
)
from retest.stages.dedup._inputs import DedupInputs, gather_inputs
from retest.stages.dedup._metrics import (
    DEDUP_METRICS,
    DEFAULT_EMBEDDER,
    DedupOptions,
    MetricContext,
    _cached_npy,
    check_metric_names,
    metric_names,
)
from retest.stages.dedup._shortlist import shortlist_chunk
from retest.store.artifacts import sha256_file, write_json
from retest.store.rows import NeighbourList

__all__ = [
    "DEFAULT_EMBEDDER",
    "MAX_RESIZE",
    "DedupResult",
    "check_resize",
    "dedup_report",
    "run_dedup",
]


@dataclass(frozen=True, slots=True)
class DedupResult:
    """What a dedup run did: chunks computed now vs. found finished."""

    fingerprint: str
    n_candidates: int
    n_references: int
    image_shape: tuple[int, ...]
    metrics: tuple[str, ...]
    chunks_computed: int
    chunks_skipped: int
    config_path: str
    extra: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, float] = field(default_factory=dict)
    """Review target per metric of this run (before retest.toml overrides)."""
    states: dict[str, dict[str, Any]] = field(default_factory=dict)
    """What each metric stored with the run (embedder, calibration, ...)."""


def _check_metrics(project: Project, metrics: Sequence[str]) -> list[str]:
    check_metric_names(metrics)
    names = metric_names()
    exact = metric_names("exact")
    short = [m for m in metric_names("shortlist") if m in metrics]
    have = set(exact) & (set(metrics) | set(metrics_run(project)))
    if short and not have:
        raise ConfigError(
            f"{' and '.join(short)} {'is' if len(short) == 1 else 'are'} computed on "
            f"the shortlist of another metric; add {' or '.join(exact)} to --metrics."
        )
    return [m for m in names if m in metrics]  # exact metrics first


MAX_RESIZE = 4096
"""The largest side ``--resize`` compares images at (far above any benchmark's)."""


def check_resize(resize: int | None) -> None:
    """Refuse a ``--resize`` that is not an image side of 1 to :data:`MAX_RESIZE`."""
    if resize is not None and not 1 <= resize <= MAX_RESIZE:
        raise ConfigError(
            f"--resize must be an image side in pixels, 1 to {MAX_RESIZE}. Got {resize}."
        )


def _check_options(
    against: Sequence[str],
    k: int,
    chunk_size: int,
    memory_budget: int,
    resize: int | None,
    embedder: str,
) -> None:
    for a in against:
        if a not in AGAINST:
            raise ConfigError(
                f"--against takes {', '.join(AGAINST)}. Got {a!r} instead."
            )
    if not against:
        raise ConfigError("--against needs at least one reference set.")
    if k < 1:
        raise ConfigError(f"k must be a positive integer. Got {k}.")
    if chunk_size < 1:
        raise ConfigError(
            f"--chunk-size must be a positive number of candidates. Got {chunk_size}."
        )
    if memory_budget < 1 << 20:
        raise ConfigError(
            f"the kNN memory budget must be at least 1 MiB. Got {memory_budget} bytes."
        )
    check_resize(resize)
    parse_embedder_spec(embedder)


def _chunk_key(metric: str, chunk_size: int, n: int) -> str:
    """The checkpoint key of chunk ``n``: with its size, so a run resumed with
    another ``--chunk-size`` never skips candidates an earlier chunk did not hold."""
    return f"{metric}:{chunk_size}:{n:06d}"


def _fingerprint(inp: DedupInputs, params: dict[str, Any]) -> str:
    """The run's inputs fingerprint: parameters, candidate and reference ids."""
    h = hashlib.sha256(json.dumps(params, sort_keys=True).encode())
    for ids in (inp.cand_ids, inp.ref_ids):
        h.update(str(len(ids)).encode())
        h.update("\n".join(ids).encode())
    return h.hexdigest()[:16]


def _chunks_trusted(
    project: Project,
    metric: str,
    fp: str,
    base_fps: dict[str, Any] | None,
) -> bool:
    """Whether the finished chunks of ``metric`` in run ``fp`` still hold: the
    stored lists are one per candidate and metric, so a run with other settings
    (or other ids) in between replaced them, and going back to these settings
    must compute them again, not skip to the other run's lists. The metric's
    state names the run that last wrote its lists (saved before its first
    chunk); a shortlist metric's also the runs of the exact lists it reranked.
    """
    state = metric_state(project, metric) or {}
    if state.get("metric_fingerprint") != fp:
        return False
    return base_fps is None or state.get("base_fingerprints") == base_fps


def _store_lists(
    project: Project,
    metric: str,
    cand_ids: Sequence[str],
    ref_ids: Sequence[str],
    res: KnnResult,
) -> None:
    lists = []
    for cid, idx, dist in zip(cand_ids, res.indices, res.distances, strict=True):
        ok = idx >= 0
        lists.append(
            NeighbourList(
                cid,
                metric,
                tuple(ref_ids[i] for i in idx[ok]),
                tuple(float(d) for d in dist[ok]),
            )
        )
    project.store.neardup.put_neighbours(lists)


def _knn_chunk(
    q: NDArray[Any],
    refs: NDArray[Any],
    k: int,
    ex: NDArray[np.int64] | None,
    shards: Any,
    budget: int,
    backend: Backend,
) -> KnnResult:
    if shards is not None:  # a ClusterReferences: the shards run on the cluster
        return shards.knn(q, k, exclude=ex, memory_budget=budget, backend=backend)
    return knn(q, refs, k, exclude=ex, memory_budget=budget, backend=backend)


def _json_safe(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=str))


def _refuse_interrupted_ingest(project: Project) -> None:
    from retest.project import unfinished_ingest_problem

    problem = unfinished_ingest_problem(project)
    if problem:
        raise StageError(
            f"{problem}, then run `retest dedup` (the candidate pool is incomplete)."
        )


def _report_folder(project: Project) -> Path:
    """``reports/dedup``, made (and checked writable) before any work is stored:
    a run that cannot write its summary must fail with ``retest.db`` untouched,
    not after storing its neighbour lists."""
    out = project.reports_dir / "dedup"
    try:
        out.mkdir(parents=True, exist_ok=True)
        usable = os.access(out, os.W_OK | os.X_OK)
    except OSError as err:
        usable, why = False, err.strerror or str(err)
    else:
        why = "it is not writable"
    if not usable:
        raise StageError(
            f"cannot write the dedup summary to {out}: {why}; nothing was stored. "
            f"Make {project.reports_dir} a writable folder (move a file of that "
            "name aside) and run `retest dedup` again."
        )
    return out


def run_dedup(
    project: Project,
    *,
    against: Sequence[str] = AGAINST,
    metrics: Sequence[str] = BUILTIN_METRICS,
    k: int = 30,
    resize: int | None = None,
    embedder: str = DEFAULT_EMBEDDER,
    ssim: SSIMParams | None = None,
    warp: WarpParams | None = None,
    chunk_size: int = 1000,
    client: Any = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    backend: Backend = "auto",
    progress: ProgressCallback | None = None,
    seed: int | None = None,
    shard_transfer: str = "auto",
) -> DedupResult:
    """Compute and store each candidate's neighbours per metric (resumable).

    Parameters
    ----------
    project : Project
    against : subset of ``("original-train", "original-test", "pool")``
    metrics : registered metric names (built-in: l2, features, dssim, warp)
        Shortlist metrics (dssim, warp) need an exact one (l2, features) in this
        run or stored by an earlier run.
    k : int
        Neighbours kept per candidate and metric (at least 30 in the published
        protocols).
    resize : int, optional
        Resize every image to ``resize × resize`` first (needed when sizes differ).
    embedder : str
        Embedder spec for ``features``: ``reference-mlp[:SEED]`` (default, trained
        on the original training images) or any
        :func:`retest.models.embedders.make_embedder` spec.
    ssim : SSIMParams, optional
        DSSIM window settings (default: skimage defaults, uniform 7×7).
    warp : WarpParams, optional
        Warp grid of the ``warp`` metric (default: ±1 px scale, ±1 px shift in
        0.5 px steps, both directions).
    chunk_size : int
        Candidates per checkpointed chunk.
    client : dask.distributed.Client, optional
        Run the kNN shards on this cluster (see :mod:`retest.cluster._dask`);
        progress then also shows ``knn shards`` done/total over the run.
    shard_transfer : {'auto', 'path', 'send'}
        How reference shards reach the cluster's workers: read from the shared
        array file, sent by the client, or the first with a per-shard fallback to
        the second (see :class:`retest.cluster._dask.ClusterReferences`).
    seed : int, optional
        Seed of the embedder training and calibration subsamples (default: the
        project's ``[seeds] features``, else 0).

    Raises
    ------
    StageError
        An ingest was interrupted (or still runs): the pool is incomplete, so
        the neighbour lists would be computed again once it is finished.
    """
    _check_options(against, k, chunk_size, memory_budget, resize, embedder)
    if shard_transfer not in SHARD_TRANSFERS:
        raise ConfigError(
            f"--shards takes {', '.join(SHARD_TRANSFERS)}. Got {shard_transfer!r}."
        )
    order = _check_metrics(project, metrics)
    _refuse_interrupted_ingest(project)
    summary = _report_folder(project) / "run.json"  # for humans, never read
    if seed is None:
        seeds = getattr(project.config, "seeds", {}) or {}
        seed = int(seeds.get("features", 0))
    opts = DedupOptions(
        k=k,
        resize=resize,
        embedder=embedder,
        ssim=ssim or SSIMParams(),
        warp=warp or WarpParams(),
        seed=seed,
    )
    inp = gather_inputs(project, against, resize)
    n_avail = len(inp.ref_ids) - (1 if inp.exclude is not None else 0)
    if k > n_avail:
        raise InputValidationError(
            f"k={k} exceeds the {n_avail} references available per candidate; use "
            f"--k {max(1, n_avail)} or add references."
        )
    shape = tuple(int(x) for x in inp.cand_px.shape[1:])
    per_metric = {m: DEDUP_METRICS.get(m).params(project, opts, shape) for m in order}
    params = {
        "against": list(against),
        "resize": resize,
        "k": k,
        "shape": list(shape),
        "embedder": per_metric.get("features", {}).get("embedder"),
        "ssim": asdict(opts.ssim),
        "warp": asdict(opts.warp),
        **{
            m: per_metric[m]
            for m in order
            if m not in BUILTIN_METRICS and per_metric[m]
        },
    }
    fp = _fingerprint(inp, params)
    base = project.arrays_dir / "dedup" / fp
    cand_px = _cached_npy(base / "candidates.npy", lambda: inp.cand_px)
    ref_px = _cached_npy(base / "references.npy", lambda: inp.ref_px)
    ctx = MetricContext(project, inp, cand_px, ref_px, base, opts)
    # a metric's chunks are checkpointed under what its lists depend on alone, so
    # another --metrics subset (or --win-size for l2) resumes the ones it shares
    shared = {k_: params[k_] for k_ in ("against", "resize", "k", "shape")}
    metric_fps = {
        m: _fingerprint(inp, {**shared, "metric": m, **per_metric[m]}) for m in order
    }
    chunks = list(range(0, len(inp.cand_ids), chunk_size))
    total, computed, skipped = len(order) * len(chunks), 0, 0
    exact = [
        m for m in metric_names("exact") if m in order or m in metrics_run(project)
    ]
    common = {
        "fingerprint": fp,
        "image_shape": list(shape),
        "against": list(against),
        "resize": resize,
        "k": k,
        "n_candidates": len(inp.cand_ids),
        "n_references": len(inp.ref_ids),
        # in every metric's state (not only dssim's): they are in the fingerprint,
        # so the command that resumes a run must repeat them (dedup_command)
        "ssim": asdict(opts.ssim),
        # the run's metrics, in each one's state from the start: a run stopped
        # before its later metrics began must still be resumed with all of them
        "run_metrics": list(order),
    }
    targets: dict[str, float] = {}
    states: dict[str, dict[str, Any]] = {}
    sha: dict[Path, str] = {}
    for metric in order:
        m = DEDUP_METRICS.get(metric)
        # the lists on which a shortlist metric's distances were computed
        base_fps = (
            None
            if m.kind == "exact"
            else {
                e: (metric_state(project, e) or {}).get("metric_fingerprint")
                for e in exact
            }
        )
        mfp = metric_fps[metric]
        run = Checkpoint(project, DEDUP_STAGE, mfp)
        done = run.done_chunks()
        trusted = _chunks_trusted(project, metric, mfp, base_fps)
        space = m.space(ctx) if m.kind == "exact" else None
        state = {
            **common,
            "metric": metric,
            "kind": m.kind,
            "order": m.order,
            **per_metric[metric],
            "metric_fingerprint": mfp,
            **({} if base_fps is None else {"base_fingerprints": base_fps}),
        }
        state.update(space.state if space is not None else m.calibrate(ctx))
        if "target" not in state:
            state["target"] = m.default_target(shape)
            state.setdefault("target_source", "default for the image size")
        targets[metric] = float(state["target"])
        data_file = base / (
            "reference_features.npy" if metric == "features" else "references.npy"
        )
        if data_file not in sha:
            sha[data_file] = sha256_file(data_file)
        # the metric's state describes the reference data it was computed on
        record = {
            "stage": DEDUP_STAGE,
            "sha256": sha[data_file],
            "path": data_file.relative_to(project.root).as_posix(),
        }
        state = _json_safe(state)
        save_state(
            project, f"{STATE_PREFIX}{metric}", {**state, "complete": False}, **record
        )
        shards: Any = None
        for n, c0 in enumerate(chunks):
            key = _chunk_key(metric, chunk_size, n)
            if trusted and key in done:
                skipped += 1
                continue
            c1 = min(len(inp.cand_ids), c0 + chunk_size)
            ex = None if inp.exclude is None else inp.exclude[c0:c1]
            if space is None:
                res = shortlist_chunk(
                    m,
                    project,
                    inp,
                    c0,
                    c1,
                    cand_px=cand_px,
                    ref_px=ref_px,
                    options=opts,
                    base_metrics=exact,
                )
            else:
                q, r = space.queries, space.references
                if client is not None and shards is None:
                    todo = sum(
                        not trusted or _chunk_key(metric, chunk_size, i) not in done
                        for i in range(len(chunks))
                    )
                    shards = ClusterReferences(
                        client,
                        r,
                        transfer=shard_transfer,
                        progress=progress,
                        expected_calls=todo,
                    )
                res = _knn_chunk(q[c0:c1], r, k, ex, shards, memory_budget, backend)
            _store_lists(project, metric, inp.cand_ids[c0:c1], inp.ref_ids, res)
            run.mark(key)
            computed += 1
            report(progress, "dedup", computed + skipped, total)
        if shards is not None:
            shards.release()
        # every candidate has its list now: the stale check need not probe them
        project.store.neardup.mark_covered([metric])
        save_state(
            project, f"{STATE_PREFIX}{metric}", {**state, "complete": True}, **record
        )
        states[metric] = state
    write_json(summary, {**common, "metrics": list(order), "states": states})
    return DedupResult(
        fp,
        len(inp.cand_ids),
        len(inp.ref_ids),
        shape,
        tuple(order),
        computed,
        skipped,
        str(summary),
        targets=targets,
        states=states,
    )


def dedup_report(
    project: Project, *, top: int = 16, metrics: Sequence[str] | None = None
) -> dict[str, Any]:
    """Closest (candidate, reference) pairs per metric, thumbnails and contact sheets.

    Writes ``reports/dedup/thumbs/<id>.png`` for the listed images and
    ``reports/dedup/closest_<metric>.png``.

    Parameters
    ----------
    project : Project
    top : int
        Pairs per metric.
    metrics : sequence of str, optional
        Default: every metric run.

    Returns
    -------
    dict
        ``{metric: {"pairs": [...], "contact_sheet": path}}``.
    """
    from PIL import Image

    from retest.stages.report import save_contact_sheet

    out_dir = project.reports_dir / "dedup"
    thumbs = out_dir / "thumbs"
    thumbs.mkdir(parents=True, exist_ok=True)
    metrics = metrics_run(project) if metrics is None else metrics
    nbrs = load_neighbours(project, metrics)
    report_: dict[str, Any] = {}
    for m in metrics:
        pairs = sorted(
            (
                (per[m][0][1], cid, per[m][0][0])
                for cid, per in nbrs.items()
                if per.get(m)
            ),
            key=lambda t: (t[0], t[1]),
        )[:top]
        if not pairs:
            continue
        ids = sorted({i for _, a, b in pairs for i in (a, b)})
        px = dict(zip(ids, project.pixels(ids), strict=True))
        paths = {}
        for i, img in px.items():
            p = thumbs / f"{i.replace(':', '_')}.png"
            if not p.exists():
                tmp = p.with_suffix(".tmp.png")
                Image.fromarray(
                    img.squeeze() if img.ndim == 3 and img.shape[2] == 1 else img
                ).save(tmp)
                tmp.replace(p)
            paths[i] = str(p.relative_to(project.root))
        sheet = save_contact_sheet(
            [px[x] for _, a, b in pairs for x in (a, b)],
            [t for d, a, b in pairs for t in (f"{a[:10]}\n{m}={d:.4g}", b[:12])],
            out_dir / f"closest_{m}.png",
            ncols=8,
            title=f"closest pairs ({m})",
            highlight=[i % 2 == 0 for i in range(2 * len(pairs))],
        )
        report_[m] = {
            "pairs": [
                {
                    "candidate": a,
                    "reference": b,
                    "distance": d,
                    "candidate_thumb": paths[a],
                    "reference_thumb": paths[b],
                }
                for d, a, b in pairs
            ],
            "contact_sheet": str(sheet.relative_to(project.root)),
        }
    return report_
