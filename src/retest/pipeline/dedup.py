"""The ``dedup`` stage: neighbours per metric, review queue, verdicts, resolution.

For every (non-blacklisted) candidate it stores the ``k`` nearest images under each
metric (SPEC §4.2): ``l2`` (squared pixel L2 after resizing both sides to a common
size), ``features`` (squared L2 between embeddings), and — on the union of those
two neighbour lists (:mod:`retest.pipeline.dedup_shortlist`) — ``dssim`` and
``warp`` (squared L2 up to a small shift/rescale/stretch,
:mod:`retest.build.warp`). References are the original train and/or test images
and the candidate pool itself (a candidate never lists itself).

Review targets: SPEC §4.2 defaults for ``l2``/``features``/``dssim``
(:func:`retest.build.neardup.default_thresholds`); for ``warp`` the CIFAR-10.1
rule "nearest original at plain L2 ≤ 1000 on 32×32×3" squared and scaled by the
number of pixel values (:func:`retest.build.warp.warp_threshold`: 1e6 at 32×32×3,
≈ 2.55e5 at 28×28). All are overridable per call (``thresholds``/``targets``),
in ``retest dedup-queue --threshold warp=…`` and on the review page.

The stage is resumable: candidates are processed in chunks and each finished
(metric, chunk) is a checkpoint under ``dedup:<fingerprint>``; a restart skips
finished chunks and produces the same lists. Inputs are validated before anything
is written. Pixel (and feature) matrices are written once as ``.npy`` under
``arrays/dedup/<fingerprint>/`` and memory-mapped, so Dask workers reopen them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest._progress import ProgressCallback, report
from retest.build.knn import (
    DEFAULT_MEMORY_BUDGET,
    Backend,
    KnnResult,
    knn,
)
from retest.build.neardup import (
    CandidateInfo,
    ReviewItem,
    cifar_auto_excluded,
    default_thresholds,
    is_sufficiently_reviewed,
    resolve_near_duplicates,
    review_queue,
    review_thresholds,
)
from retest.build.ssim import SSIMParams
from retest.build.warp import WarpParams, warp_threshold
from retest.errors import ConfigError, InputValidationError
from retest.models.embedders import embed, make_embedder
from retest.pipeline.dedup_shortlist import (
    BASE_METRICS,
    SHORTLIST_METRICS,
    DedupInputs,
    gather_inputs,
    shortlist_chunk,
)
from retest.pipeline.project import Project
from retest.store.artifacts import read_npy, write_json, write_npy
from retest.store.base import (
    DuplicateVerdict,
    NeighbourList,
    NeighbourReview,
    StageCheckpoint,
)

__all__ = [
    "AGAINST",
    "DEDUP_STAGE",
    "METRICS",
    "DedupResult",
    "candidate_infos",
    "dedup_report",
    "dedup_review_queue",
    "load_neighbours",
    "near_duplicate_status",
    "record_review",
    "review_targets",
    "reviewed_references",
    "run_dedup",
]

DEDUP_STAGE = "dedup"
METRICS = (*BASE_METRICS, *SHORTLIST_METRICS)  # computation order
AGAINST = ("original-train", "original-test", "pool")


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


def _check_options(against: Sequence[str], metrics: Sequence[str], k: int) -> None:
    for a in against:
        if a not in AGAINST:
            raise ConfigError(
                f"--against takes {', '.join(AGAINST)}. Got {a!r} instead."
            )
    for m in metrics:
        if m not in METRICS:
            raise ConfigError(
                f"--metrics takes {', '.join(METRICS)}. Got {m!r} instead."
            )
    if not against:
        raise ConfigError("--against needs at least one reference set.")
    if not metrics:
        raise ConfigError("--metrics needs at least one metric.")
    short = [m for m in SHORTLIST_METRICS if m in metrics]
    if short and not set(BASE_METRICS) & set(metrics):
        raise ConfigError(
            f"{' and '.join(short)} {'is' if len(short) == 1 else 'are'} computed on "
            "the shortlist of another metric; add l2 or features to --metrics."
        )
    if k < 1:
        raise ConfigError(f"k must be a positive integer. Got {k}.")


def _fingerprint(inp: DedupInputs, params: dict[str, Any]) -> str:
    h = hashlib.sha256(json.dumps(params, sort_keys=True).encode())
    for ids in (inp.cand_ids, inp.ref_ids):
        h.update(str(len(ids)).encode())
        h.update("\n".join(ids).encode())
    return h.hexdigest()[:16]


def _cached_npy(path: Path, compute: Any) -> NDArray[Any]:
    if not path.is_file():
        arr = compute()
        path.parent.mkdir(parents=True, exist_ok=True)
        write_npy(path, arr)
    return read_npy(path, mmap=True)


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
    client: Any,
    budget: int,
    backend: Backend,
) -> KnnResult:
    if client is not None:
        from retest.pipeline.cluster import dask_knn

        return dask_knn(
            client, q, refs, k, exclude=ex, memory_budget=budget, backend=backend
        )
    return knn(q, refs, k, exclude=ex, memory_budget=budget, backend=backend)


def run_dedup(
    project: Project,
    *,
    against: Sequence[str] = AGAINST,
    metrics: Sequence[str] = METRICS,
    k: int = 30,
    resize: int | None = None,
    embedder: str = "random-projection:64:0",
    ssim: SSIMParams | None = None,
    warp: WarpParams | None = None,
    chunk_size: int = 1000,
    client: Any = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    backend: Backend = "auto",
    progress: ProgressCallback | None = None,
) -> DedupResult:
    """Compute and store each candidate's neighbours per metric (resumable).

    Parameters
    ----------
    project : Project
    against : subset of ``("original-train", "original-test", "pool")``
    metrics : subset of ``("l2", "features", "dssim", "warp")``
        dssim and warp are computed on the l2/features lists, so need one of them.
    k : int
        Neighbours kept per candidate and metric (SPEC: ≥ 30).
    resize : int, optional
        Resize every image to ``resize × resize`` first (needed when sizes differ).
    embedder : str
        Embedder spec for ``features`` (see :func:`retest.models.embedders.make_embedder`).
    ssim : SSIMParams, optional
        DSSIM window settings (default: skimage defaults, uniform 7×7).
    warp : WarpParams, optional
        Warp grid of the ``warp`` metric (default: ±1 px scale, ±1 px shift in
        0.5 px steps, both directions).
    chunk_size : int
        Candidates per checkpointed chunk.
    client : dask.distributed.Client, optional
        Run the kNN shards on this cluster (see :mod:`retest.pipeline.cluster`).
    """
    _check_options(against, metrics, k)
    ssim = ssim or SSIMParams()
    warp = warp or WarpParams()
    inp = gather_inputs(project, against, resize)
    n_avail = len(inp.ref_ids) - (1 if inp.exclude is not None else 0)
    if k > n_avail:
        raise InputValidationError(
            f"k={k} exceeds the {n_avail} references available per candidate; use "
            f"--k {max(1, n_avail)} or add references."
        )
    emb = make_embedder(embedder) if "features" in metrics else None
    params = {
        "against": list(against),
        "resize": resize,
        "k": k,
        "embedder": getattr(emb, "name", None),
        "ssim": asdict(ssim),
        "warp": asdict(warp),
        "shape": list(inp.cand_px.shape[1:]),
    }
    fp = _fingerprint(inp, params)
    base = project.arrays_dir / "dedup" / fp
    cand_px = _cached_npy(base / "candidates.npy", lambda: inp.cand_px)
    ref_px = _cached_npy(base / "references.npy", lambda: inp.ref_px)
    feats: tuple[NDArray[Any], NDArray[Any]] | None = None
    if emb is not None:
        cf = _cached_npy(
            base / "candidate_features.npy", lambda: embed(emb, inp.cand_px)
        )
        rf = _cached_npy(
            base / "reference_features.npy", lambda: embed(emb, inp.ref_px)
        )
        feats = (cf, rf)
    config = {
        **params,
        "fingerprint": fp,
        "metrics": list(metrics),
        "n_candidates": len(inp.cand_ids),
        "n_references": len(inp.ref_ids),
    }
    cfg_path = project.reports_dir / "dedup" / "config.json"
    cfg_path.parent.mkdir(parents=True, exist_ok=True)
    write_json(cfg_path, config)
    stage = f"{DEDUP_STAGE}:{fp}"
    done = project.store.stages.done_keys(stage)
    order = [m for m in METRICS if m in metrics]  # shortlist metrics last
    chunks = list(range(0, len(inp.cand_ids), chunk_size))
    total, computed, skipped = len(order) * len(chunks), 0, 0
    for metric in order:
        for n, c0 in enumerate(chunks):
            key = f"{metric}:{n:06d}"
            if key in done:
                skipped += 1
                continue
            c1 = min(len(inp.cand_ids), c0 + chunk_size)
            ex = None if inp.exclude is None else inp.exclude[c0:c1]
            if metric in SHORTLIST_METRICS:
                res = shortlist_chunk(metric, project, inp, c0, c1, k, cand_px=cand_px,
                                      ref_px=ref_px, ssim=ssim, warp=warp)  # fmt: skip
            else:
                q, r = (cand_px, ref_px) if metric == "l2" else feats  # type: ignore[misc]
                res = _knn_chunk(q[c0:c1], r, k, ex, client, memory_budget, backend)
            _store_lists(project, metric, inp.cand_ids[c0:c1], inp.ref_ids, res)
            project.store.stages.mark(StageCheckpoint(stage, key))
            computed += 1
            report(progress, "dedup", computed + skipped, total)
    write_json(cfg_path, {**config, "complete": True})
    return DedupResult(
        fp,
        len(inp.cand_ids),
        len(inp.ref_ids),
        tuple(inp.cand_px.shape[1:]),
        tuple(order),
        computed,
        skipped,
        str(cfg_path),
    )


# ------------------------------------------------------------------ review data


def _config(project: Project) -> dict[str, Any]:
    path = project.reports_dir / "dedup" / "config.json"
    if not path.is_file():
        return {}
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def load_neighbours(
    project: Project, metrics: Sequence[str] = METRICS
) -> dict[str, dict[str, list[tuple[str, float]]]]:
    """``candidate → metric → [(ref, distance), …]`` from the store."""
    out: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for m in metrics:
        for nl in project.store.neardup.iter_neighbours(metric=m):
            out.setdefault(nl.candidate_id, {})[m] = list(
                zip(nl.ref_ids, nl.distances, strict=True)
            )
    return out


def candidate_infos(project: Project) -> dict[str, CandidateInfo]:
    """Class, selection frequency (``task`` events), blacklist state and source id."""
    store = project.store
    black = set(store.blacklist.current())
    counts = store.annotations.item_counts(kinds=["task"])
    out = {}
    for c in store.candidates.iter():
        n, pos = counts.get(c.id, (0, 0))
        out[c.id] = CandidateInfo(
            class_id=c.class_id,
            selection_frequency=pos / n if n else None,
            blacklisted=c.id in black,
            source_id=f"{c.source}:{c.source_ref}",
        )
    return out


def reviewed_references(project: Project) -> dict[str, dict[str, set[str]]]:
    """``candidate → metric → references already shown to a reviewer``."""
    out: dict[str, dict[str, set[str]]] = {}
    for r in project.store.neardup.reviews():
        out.setdefault(r.candidate_id, {}).setdefault(r.metric, set()).update(
            r.references
        )
    return out


def review_targets(project: Project) -> dict[str, float]:
    """Review targets of the metrics the last run computed.

    SPEC §4.2 defaults for l2/features/dssim; :func:`retest.build.warp.warp_threshold`
    (the CIFAR L2 ≤ 1000 rule scaled to the image size) for warp.
    """
    cfg = _config(project)
    shape = cfg.get("shape") or [256, 256, 3]
    t = {**default_thresholds(shape), "warp": warp_threshold(shape)}
    return {m: t[m] for m in cfg.get("metrics", METRICS)}


def dedup_review_queue(
    project: Project, *, thresholds: dict[str, float] | None = None, top: int = 30
) -> list[ReviewItem]:
    """Pairs under threshold not yet reviewed (see :func:`retest.build.neardup.review_queue`)."""
    th = thresholds or review_targets(project)
    return review_queue(
        load_neighbours(project, list(th)),
        thresholds=th,
        candidates=candidate_infos(project),
        blacklist=set(project.store.blacklist.current()),
        reviewed=reviewed_references(project),
        top=top,
    )


def record_review(
    project: Project,
    candidate_id: str,
    metric: str,
    *,
    reviewer: str,
    shown: Sequence[str],
    duplicates: Sequence[str] = (),
) -> None:
    """Append a verdict per shown reference and a review mark (both append-only)."""
    bad = set(duplicates) - set(shown)
    if bad:
        raise InputValidationError(
            f"duplicates {sorted(bad)[:3]} were not among the shown references of "
            f"{candidate_id!r}."
        )
    dup = set(duplicates)
    project.store.neardup.add_verdicts(
        DuplicateVerdict(candidate_id, r, metric, r in dup, reviewer) for r in shown
    )
    project.store.neardup.add_reviews(
        [NeighbourReview(candidate_id, metric, reviewer, tuple(sorted(set(shown))))]
    )


def near_duplicate_status(
    project: Project,
    *,
    targets: dict[str, float] | None = None,
    cifar_rule: bool | None = None,
    overrides: Sequence[str] = (),
) -> dict[str, str | None]:
    """``candidate → "near_duplicate" | "unreviewed" | None`` for sampling eligibility.

    ``near_duplicate``: excluded by the resolution of the near-duplicate graph
    (SPEC §4.2), or, with the CIFAR rule (default for 32×32 images), nearest
    original at plain L2 ≤ 1000. ``unreviewed``: some neighbour closer than the
    target has no review yet (0.0 thresholds when dedup has not run).
    """
    cfg = _config(project)
    shape = tuple(cfg.get("shape") or (256, 256, 3))
    targets = targets or review_targets(project)
    infos = candidate_infos(project)
    nbrs = load_neighbours(project, list(targets))
    res = resolve_near_duplicates(
        project.store.neardup.duplicate_pairs(), candidates=infos, overrides=overrides
    )
    th = review_thresholds(
        nbrs,
        candidate_ids=infos,
        metrics=list(targets),
        candidates=infos,
        reviewed=reviewed_references(project),
    )
    if cifar_rule is None:
        cifar_rule = shape[:2] == (32, 32)
    auto: set[str] = set()
    if cifar_rule:
        for cid, per in nbrs.items():
            d = next((d for r, d in per.get("l2", []) if r not in infos), None)
            if d is not None and bool(cifar_auto_excluded([d])[0]):
                auto.add(cid)
    out: dict[str, str | None] = {}
    for cid in sorted(infos):
        if cid in res.near_duplicates or cid in auto:
            out[cid] = "near_duplicate"
        elif not is_sufficiently_reviewed(th[cid], targets):
            out[cid] = "unreviewed"
        else:
            out[cid] = None
    return out


def dedup_report(
    project: Project, *, top: int = 16, metrics: Sequence[str] = METRICS
) -> dict[str, Any]:
    """Closest (candidate, reference) pairs per metric, thumbnails and contact sheets.

    Writes ``reports/dedup/thumbs/<id>.png`` for the listed images and
    ``reports/dedup/closest_<metric>.png``; returns ``{metric: {"pairs": [...],
    "contact_sheet": path}}``.
    """
    from PIL import Image

    from retest.pipeline.contact_sheet import save_contact_sheet

    out_dir = project.reports_dir / "dedup"
    thumbs = out_dir / "thumbs"
    thumbs.mkdir(parents=True, exist_ok=True)
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
