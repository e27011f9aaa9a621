"""Review and progress pages: near-duplicate queue (SPEC §4.2), selection-frequency
statistics per class, keyword progress against the plan, and the label-error queue.

The near-duplicate queue and "sufficiently reviewed" come from
:mod:`retest.pipeline.dedup` / :mod:`retest.build.neardup` (one implementation
shared with ``retest dedup queue``).
"""

from __future__ import annotations

from collections import defaultdict

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from retest.build.neardup import is_sufficiently_reviewed, review_thresholds
from retest.build.selection_frequency import aggregate_item_events
from retest.pipeline.dedup import (
    candidate_infos,
    load_neighbours,
    review_targets,
    reviewed_references,
)
from retest.pipeline.eligibility import pending_reviews
from retest.pipeline.review_queue import label_error_queue
from retest.pipeline.sample import class_names, selection_frequencies
from retest.web.deps import StateDep, StoreDep
from retest.web.views import (
    BIN_LABELS,
    agreement,
    class_histograms,
    keyword_progress,
    render,
)

router = APIRouter(tags=["review"])
PAGE = 20


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


@router.get("/neardup", response_class=HTMLResponse)
def neardup(
    request: Request,
    state: StateDep,
    metric: str | None = None,
    threshold: float | None = None,
    page: int = 0,
) -> HTMLResponse:
    """Candidates with neighbours under the review target that nobody reviewed yet.

    The project's one queue (:func:`retest.pipeline.eligibility.pending_reviews`:
    the dedup review queue minus pairs the automatic rule already excludes).
    """
    targets = review_targets(state.project)
    metric = metric if metric in targets else next(iter(targets))
    if threshold is not None:
        targets = {**targets, metric: threshold}
    infos = candidate_infos(state.project)
    nbrs = load_neighbours(state.project, list(targets))
    reviewed = reviewed_references(state.project)
    queue = [
        r
        for r in pending_reviews(state.project, thresholds=targets)
        if r.metric == metric
    ]
    th = review_thresholds(nbrs, candidate_ids=infos, metrics=list(targets),
                           candidates=infos, reviewed=reviewed)  # fmt: skip
    decided = state.store.neardup.duplicate_pairs()
    rows = [
        {
            "candidate": r.candidate_id,
            "refs": list(zip(r.references, r.distances, strict=True)),
            "dups": {x for x in r.references if (r.candidate_id, x) in decided},
            "freq": infos[r.candidate_id].selection_frequency
            if r.candidate_id in infos
            else None,
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
        progress=_review_progress(th, nbrs, targets),
        targets=targets,
        page=page,
        pages=(len(queue) + PAGE - 1) // PAGE,
    )


@router.get("/stats", response_class=HTMLResponse)
def stats(
    request: Request, store: StoreDep, min_annotations: int = 10, per_class: int = 0
) -> HTMLResponse:
    """Per class: the five-bin table and mean selection frequency / agreement."""
    freq = selection_frequencies(store)
    names = class_names(store)
    tables = class_histograms(
        store,
        freq,
        store.blacklist.current(),
        min_annotations=min_annotations,
        per_class=dict.fromkeys(names, per_class),
    )
    agg: dict[int, list[float]] = defaultdict(list)
    for (_, cid), st in freq.items():
        if st.n_assignments:
            agg[cid].append(st.frequency)
    summary = {
        cid: (
            len(fs),
            sum(fs) / len(fs) if fs else None,
            sum(agreement(f) for f in fs) / len(fs) if fs else None,
        )
        for cid, fs in ((c, agg.get(c, [])) for c in names)
    }
    return render(
        request,
        "stats.html",
        names=names,
        tables=tables,
        summary=summary,
        bins=BIN_LABELS,
        min_annotations=min_annotations,
        per_class=per_class,
    )


@router.get("/stats/{class_id}", response_class=HTMLResponse)
def class_stats(
    request: Request, class_id: int, store: StoreDep, page: int = 0
) -> HTMLResponse:
    """Every image shown for the class, by selection frequency (highest first)."""
    cls = store.classes.get(class_id)
    rows = sorted(
        (
            (st.frequency, st.n_assignments, item)
            for (item, cid), st in selection_frequencies(store).items()
            if cid == class_id
        ),
        key=lambda r: (-r[0], -r[1], r[2]),
    )
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
def keywords(request: Request, class_id: int, state: StateDep) -> HTMLResponse:
    """CIFAR labeling progress per keyword: needed (plan) vs verified."""
    cls = state.store.classes.get(class_id)
    rows, plan = keyword_progress(state.store, state.project.root, class_id=class_id)
    return render(request, "keywords.html", cls=cls, rows=rows, plan=plan)


@router.get("/label-errors", response_class=HTMLResponse)
def label_errors(
    request: Request, store: StoreDep, show: str = "pending", page: int = 0
) -> HTMLResponse:
    """Queued "possible label error" items with given vs suggested class."""
    items = label_error_queue(store)
    reviewed = sum(1 for i in items if not i.pending)
    shown = [i for i in items if show == "all" or i.pending]
    shown = shown[page * PAGE : (page + 1) * PAGE]
    # only the shown items: a full scan of the task events is the slow part
    freq = aggregate_item_events(
        e
        for it in shown
        for e in store.annotations.list(
            kind="task", item_id=it.item_id, class_id=it.given
        )
    )
    return render(
        request,
        "label_errors.html",
        items=shown,
        total=len(items),
        reviewed=reviewed,
        names=class_names(store),
        freq=freq,
        show=show,
        page=page,
        pages=(sum(1 for i in items if show == "all" or i.pending) + PAGE - 1) // PAGE,
    )
