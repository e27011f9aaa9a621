"""Review and progress pages: near-duplicate queue (docs/algorithms.md#review-queue),
selection-frequency statistics per class, keyword progress against the plan, and the
label-error queue.

The near-duplicate queue and "sufficiently reviewed" come from
:mod:`retest.project` / :mod:`retest.dedup.rules` (one implementation
shared with ``retest dedup queue``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from retest.dedup.rules import is_sufficiently_reviewed, review_thresholds
from retest.project import (
    ControlScore,
    Live,
    NotReady,
    Project,
    candidate_infos,
    class_names,
    control_scores,
    excluded_workers,
    load_neighbours,
    pending_reviews,
    review_targets,
    reviewed_references,
)
from retest.store.rows import split_reference_id
from retest.web.deps import ReviewerDep, StateDep, StoreDep
from retest.web.routes.pages import (
    ELIGIBILITY,
    changes,
    live,
    pool,
    progress,
)
from retest.web.views import (
    BIN_LABELS,
    agreement,
    busy,
    class_histograms,
    near_duplicate_ids,
    render,
)

router = APIRouter(tags=["review"])
PAGE = 50


def _review_progress(
    th: dict[str, dict[str, float]],
    nbrs: dict[str, dict[str, list[tuple[str, float]]]],
    targets: dict[str, float],
) -> dict[str, object]:
    """Per metric: candidates past the target (every closer neighbour reviewed)."""
    per_metric = {}
    for m, t in targets.items():
        has = [c for c in th if nbrs.get(c, {}).get(m)]
        per_metric[m] = (sum(1 for c in has if th[c][m] > t), len(has))
    done = sum(1 for c in th if is_sufficiently_reviewed(th[c], targets))
    return {"per_metric": per_metric, "done": done, "total": len(th)}


def _neardup_queue(
    project: Project, targets: dict[str, float], metric: str
) -> dict[str, Any]:
    """The near-duplicate page's data for one metric and target set (cached)."""
    infos = candidate_infos(project)
    nbrs = load_neighbours(project, list(targets))
    reviewed = reviewed_references(project)
    queue = [
        r
        for r in pending_reviews(project, thresholds=targets, infos=infos)
        if r.metric == metric
    ]
    # closest pairs first: the likeliest duplicates get decided first
    queue.sort(key=lambda r: (min(r.distances, default=float("inf")), r.candidate_id))
    th = review_thresholds(
        nbrs,
        candidate_ids=infos,
        metrics=list(targets),
        candidates=infos,
        reviewed=reviewed,
    )
    freq = {
        r.candidate_id: infos[r.candidate_id].selection_frequency
        for r in queue
        if r.candidate_id in infos
    }
    return {
        "queue": queue,
        "progress": _review_progress(th, nbrs, targets),
        "freq": freq,
    }


def review_targets_now(state: Any) -> dict[str, float]:
    """The review target of every dedup metric run (read again after a change)."""
    lv = live(state)
    return lv.memo(
        "review-targets", lv.fingerprint(), lambda: review_targets(lv.read_project())
    )


def warm_up_steps(state: Any) -> list[tuple[str, Any, str]]:
    """What the server computes in the background at start: the eligibility
    decision (stage-2 labeling, class review) and the near-duplicate queue."""
    steps: list[tuple[str, Any, str]] = [("copies", near_duplicate_ids, ELIGIBILITY)]
    if review_targets_now(state):  # some dedup metric has run
        steps.append(neardup_step(state))
    return steps


def neardup_step(
    state: Any, metric: str | None = None, threshold: float | None = None
) -> tuple[str, Callable[[Project], dict[str, Any]], str]:
    """(cache name, computation, label) of the near-duplicate queue of ``metric``
    (the first metric by default) at ``threshold`` (the review target)."""
    targets = review_targets_now(state)
    metric = metric if metric in targets else next(iter(targets))
    if threshold is not None:
        targets = {**targets, metric: threshold}

    return (
        f"neardup|{metric}|{sorted(targets.items())}",
        partial(_neardup_data, targets=targets, metric=metric),
        "the near-duplicate queue",
    )


def _neardup_data(
    project: Project, targets: dict[str, float], metric: str
) -> dict[str, Any]:
    """:func:`_neardup_queue` with its parameters (it runs in the worker process)."""
    return {
        **_neardup_queue(project, targets, metric),
        "targets": targets,
        "metric": metric,
    }


@router.get("/neardup", response_class=HTMLResponse)
def neardup(
    request: Request,
    state: StateDep,
    store: StoreDep,
    role: ReviewerDep,
    metric: str | None = None,
    threshold: float | None = None,
    page: int = 0,
) -> HTMLResponse:
    """Candidates with neighbours under the review target that nobody reviewed yet,
    closest first, many per screen (decided with y/n without a reload).

    The project's one queue (:func:`retest.project._eligibility.pending_reviews`:
    the dedup review queue minus pairs the automatic rule already excludes).
    """
    lv = live(state)
    if not review_targets_now(state):
        return render(
            request,
            "message.html",
            title="Near-duplicate review",
            message="No near-duplicate search has run yet: run `retest dedup`, "
            "then this page lists the pairs to review.",
        )
    key, compute, label = neardup_step(state, metric, threshold)
    try:
        data = lv.derived(key, compute, label=label, offload=True)
    except NotReady as err:
        return busy(request, err)
    targets = data["targets"]
    metric = data["metric"]
    queue = data["queue"]
    decided = store.neardup.duplicate_pairs()
    page = max(0, page)
    rows = [
        {
            "candidate": r.candidate_id,
            "refs": list(zip(r.references, r.distances, strict=True)),
            "dups": {x for x in r.references if (r.candidate_id, x) in decided},
            "freq": data["freq"].get(r.candidate_id),
        }
        for r in queue[page * PAGE : (page + 1) * PAGE]
    ]
    return render(
        request,
        "neardup.html",
        metric=metric,
        metrics=list(targets),
        threshold=targets[metric],
        rows=rows,
        pending=len(queue),
        progress=data["progress"],
        targets=targets,
        page=page,
        pages=(len(queue) + PAGE - 1) // PAGE,
    )


def _class_sizes(lv: Live) -> tuple[dict[int, str], dict[int, int]]:
    """Class names and each class's number of originals."""
    names = class_names(lv.read_project())
    sizes = dict.fromkeys(names, 0)
    for r in lv.store().references.list():
        if r.class_id in sizes:
            sizes[r.class_id] += 1
    return names, sizes


@router.get("/stats", response_class=HTMLResponse)
def stats(
    request: Request,
    state: StateDep,
    store: StoreDep,
    role: ReviewerDep,
    min_annotations: int = 10,
    per_class: int | None = None,
) -> HTMLResponse:
    """Per class: the five-bin table and mean selection frequency / agreement.

    The target row is scaled to ``per_class`` images; by default to the class's
    number of originals (the size of the original test set's class).
    """
    lv = live(state)
    names, originals = lv.memo(
        "class-sizes", lv.fingerprint(), lambda: _class_sizes(lv)
    )
    if per_class is None:
        sizes = originals
    else:
        sizes = dict.fromkeys(names, max(0, per_class))
    black = pool(state).black

    def compute(project: Project) -> tuple[Any, Any]:
        with lv.lock:
            freq = lv.sync().stats_copy()
        tables = class_histograms(
            project, freq, black, min_annotations=min_annotations, per_class=sizes
        )
        agg: dict[int, list[float]] = defaultdict(list)
        for (item, cid), st in freq.items():
            # candidates only: the originals shown as controls are the
            # labelers' quality signal, counted in the table's own rows
            if st.n_assignments and split_reference_id(item) is None:
                agg[cid].append(st.frequency)
        summary = {
            cid: (
                len(fs),
                sum(fs) / len(fs) if fs else None,
                sum(agreement(f) for f in fs) / len(fs) if fs else None,
            )
            for cid, fs in ((c, agg.get(c, [])) for c in names)
        }
        return tables, summary

    key = f"stats|{min_annotations}|{sorted(sizes.items())}"
    try:
        tables, summary = lv.derived(key, compute, label="the statistics tables")
    except NotReady as err:
        return busy(request, err)
    return render(
        request,
        "stats.html",
        names=names,
        tables=tables,
        summary=summary,
        bins=BIN_LABELS,
        min_annotations=min_annotations,
        per_class=per_class,
        sizes=sizes,
    )


@router.get("/stats/{class_id}", response_class=HTMLResponse)
def class_stats(
    request: Request,
    class_id: int,
    state: StateDep,
    store: StoreDep,
    role: ReviewerDep,
    page: int = 0,
) -> HTMLResponse:
    """Every image shown for the class, by selection frequency (highest first)."""
    cls = store.classes.get(class_id)
    lv = live(state)

    def compute() -> list[tuple[float, int, str]]:
        with lv.lock:
            freq = lv.sync().class_stats(class_id)
        return sorted(
            ((st.frequency, st.n_assignments, item) for (item, _), st in freq.items()),
            key=lambda r: (-r[0], -r[1], r[2]),
        )

    rows = lv.memo(f"class-stats|{class_id}", changes(state, class_id), compute)
    page = max(0, page)
    shown = [
        {"id": i, "freq": f, "n": n, "agree": agreement(f) if n else None}
        for f, n, i in rows[page * 100 : (page + 1) * 100]
    ]
    return render(
        request,
        "class_stats.html",
        cls=cls,
        rows=shown,
        total=len(rows),
        page=page,
        pages=(len(rows) + 99) // 100,
    )


@router.get("/keywords/{class_id}", response_class=HTMLResponse)
def keywords(
    request: Request, class_id: int, state: StateDep, store: StoreDep
) -> HTMLResponse:
    """CIFAR labeling progress per keyword: needed (plan) vs verified."""
    cls = store.classes.get(class_id)
    rows, plan = progress(state, store, class_id)
    return render(request, "keywords.html", cls=cls, rows=rows, plan=plan)


@router.get("/label-errors", response_class=HTMLResponse)
def label_errors(
    request: Request,
    state: StateDep,
    store: StoreDep,
    role: ReviewerDep,
    show: str = "pending",
    page: int = 0,
) -> HTMLResponse:
    """Queued "possible label error" items with given vs suggested class."""
    lv = live(state)
    page = max(0, page)
    with lv.lock:
        agg = lv.sync()
        items = agg.label_error_queue()
        reviewed = sum(1 for i in items if not i.pending)
        listed = [i for i in items if show == "all" or i.pending]
        shown = listed[page * PAGE : (page + 1) * PAGE]
        freq = {
            (it.item_id, it.given): agg.stats[(it.item_id, it.given)]
            for it in shown
            if (it.item_id, it.given) in agg.stats
        }
    return render(
        request,
        "label_errors.html",
        items=shown,
        total=len(items),
        reviewed=reviewed,
        names=class_names(lv.read_project()),
        freq=freq,
        show=show,
        page=page,
        pages=(len(listed) + PAGE - 1) // PAGE,
    )


def _quality(project: Project) -> dict[str, Any]:
    """Every worker's score on the controls (read from the store: it runs in
    the background, as the other derived pages)."""
    store = project.store
    scores = control_scores(store.annotations.list(kind="task"), store.tasks.list())
    return {"scores": scores}


@router.get("/quality", response_class=HTMLResponse)
def quality(
    request: Request, state: StateDep, store: StoreDep, role: ReviewerDep
) -> HTMLResponse:
    """Per worker (web labelers and imported crowd workers): accuracy on the
    positive and negative controls, the project's bar ([quality] in
    retest.toml), and whether their answers are counted."""
    lv = live(state)
    try:
        data = lv.derived(
            "quality", _quality, label="the labelers' quality", offload=True
        )
    except NotReady as err:
        return busy(request, err)
    cfg = state.project.config.quality
    bar = cfg.get("min_control_accuracy")
    min_n = int(cfg.get("min_controls", 10))
    excluded = lv.memo("excluded", lv.fingerprint(), lambda: excluded_workers(store))
    rows = [
        {"score": sc, "flagged": sc.below(bar, min_n), "excluded": w in excluded}
        for w, sc in data["scores"].items()
    ]
    rows.sort(
        key=lambda r: (
            r["score"].accuracy if r["score"].accuracy is not None else 2,
            r["score"].worker,
        )
    )
    for w in sorted(excluded - set(data["scores"])):
        rows.append({"score": ControlScore(w), "flagged": False, "excluded": True})
    return render(request, "quality.html", rows=rows, bar=bar, min_n=min_n)
