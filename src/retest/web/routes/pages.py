"""Read-only HTML pages: start, CIFAR-style labeling, grid tasks, near-duplicate
review and the final class review of a revision."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from retest.build.histogram import DEFAULT_BINS, bin_index, round_histogram
from retest.build.tasks import image_token
from retest.store.base import Store
from retest.web.deps import StateDep, StoreDep

router = APIRouter(tags=["pages"])

# SPEC §4.2 review targets for 256² images; "pixels" is the CIFAR rule (sqrt L2 ≤ 1000
# on 32² images is excluded outright, so review what lies just beyond it).
DEFAULT_REVIEW_THRESHOLDS = {
    "l2": 1.2e8,
    "dssim": 0.2205,
    "fc7": 1.32e4,
    "features": 1.32e4,
    "pixels": 2000.0,
}
PAGE = 40


def _render(request: Request, name: str, **ctx: Any) -> HTMLResponse:
    templates = request.app.state.templates
    state = request.app.state.retest
    return templates.TemplateResponse(request, name, {"project": state.name, **ctx})


def _latest(store: Store, kind: str) -> dict[str, int]:
    """Latest value per item of one annotation kind."""
    return {e.item_id: e.value for e in store.annotations.list(kind=kind)}


@router.get("/", response_class=HTMLResponse)
def index(request: Request, store: StoreDep) -> HTMLResponse:
    classes = store.classes.list()
    by_class = store.candidates.count_by_class()
    keywords: dict[int, list[str]] = defaultdict(list)
    for kw in store.classes.keywords():
        keywords[kw.class_id].append(kw.keyword)
    return _render(
        request,
        "index.html",
        classes=classes,
        counts=by_class,
        keywords=keywords,
        tasks=len(store.tasks.list()),
        revisions=store.revisions.list(),
    )


@router.get("/label/{class_id}/{keyword}", response_class=HTMLResponse)
def label(
    request: Request,
    class_id: int,
    keyword: str,
    store: StoreDep,
    stage: str = "select",
    page: int = 0,
) -> HTMLResponse:
    """Stage 1 shows unused candidates of the keyword; stage 2 the stage-1 picks, pre-checked."""
    cls = store.classes.get(class_id)
    originals = [
        r.id for r in store.references.list(class_id=class_id) if r.keyword == keyword
    ]
    selected, verified = _latest(store, "select"), _latest(store, "verify")
    black = store.blacklist.current()
    pool = [
        c.id
        for c in store.candidates.iter(keyword=keyword)
        if c.class_id in (None, class_id) and c.id not in black
    ]
    if stage == "verify":
        items = [i for i in pool if selected.get(i) == 1 and i not in verified]
    else:
        stage = "select"
        items = [i for i in pool if i not in selected]
    n_verified = sum(1 for i in pool if verified.get(i) == 1)
    needed = next(
        (
            k.original_count
            for k in store.classes.keywords(class_id=class_id)
            if k.keyword == keyword
        ),
        0,
    )
    shown = items[page * PAGE * 2 : (page + 1) * PAGE * 2]
    return _render(
        request,
        "label.html",
        cls=cls,
        keyword=keyword,
        stage=stage,
        originals=originals[:PAGE],
        items=shown,
        remaining=len(items),
        verified=n_verified,
        needed=needed,
        page=page,
    )


@router.get("/tasks", response_class=HTMLResponse)
def tasks(request: Request, store: StoreDep) -> HTMLResponse:
    answers: dict[str, set[str]] = defaultdict(set)
    for e in store.annotations.list(kind="task"):
        if e.task_id and e.assignment_id:
            answers[e.task_id].add(e.assignment_id)
    names = {c.id: c.name for c in store.classes.list()}
    rows = [
        (t, names.get(t.class_id, t.class_id), len(answers[t.id]))
        for t in store.tasks.list()
    ]
    return _render(request, "tasks.html", rows=rows)


@router.get("/task/{task_id}", response_class=HTMLResponse)
def task(request: Request, task_id: str, state: StateDep) -> HTMLResponse:
    t = state.store.tasks.get(task_id)
    cls = state.store.classes.get(t.class_id)
    tokens = [image_token(f"{t.id}|{i}", state.secret) for i in t.items]
    return _render(request, "task.html", task=t, cls=cls, tokens=tokens)


def _pending(
    store: Store, metric: str, threshold: float, top: int
) -> list[dict[str, Any]]:
    black = store.blacklist.current()
    seen: dict[str, set[str]] = defaultdict(set)
    for r in store.neardup.reviews(metric=metric):
        seen[r.candidate_id].update(r.references)
    decided = store.neardup.duplicate_pairs()
    rows = []
    for nl in store.neardup.iter_neighbours(metric=metric):
        if nl.candidate_id in black:
            continue
        refs = [
            (r, d)
            for r, d in zip(nl.ref_ids[:top], nl.distances[:top], strict=True)
            if d <= threshold
            and r != nl.candidate_id
            and r not in black
            and r not in seen[nl.candidate_id]
        ]
        if refs:
            rows.append(
                {
                    "candidate": nl.candidate_id,
                    "refs": refs,
                    "dups": {r for r, _ in refs if (nl.candidate_id, r) in decided},
                }
            )
    return rows


@router.get("/neardup", response_class=HTMLResponse)
def neardup(
    request: Request,
    store: StoreDep,
    metric: str = "pixels",
    threshold: float | None = None,
    page: int = 0,
) -> HTMLResponse:
    """Candidates with neighbours under the threshold that nobody has reviewed yet."""
    thr = (
        threshold
        if threshold is not None
        else DEFAULT_REVIEW_THRESHOLDS.get(metric, 0.0)
    )
    rows = _pending(store, metric, thr, top=30)
    total = sum(1 for _ in store.neardup.iter_neighbours(metric=metric))
    return _render(
        request,
        "neardup.html",
        metric=metric,
        threshold=thr,
        rows=rows[page * 20 : (page + 1) * 20],
        pending=len(rows),
        total=total,
        page=page,
    )


def _frequencies(store: Store) -> dict[str, tuple[int, float]]:
    counts = store.annotations.item_counts(kinds=["task"])
    return {i: (n, pos / n if n else 0.0) for i, (n, pos) in counts.items()}


def _histogram_table(
    store: Store,
    class_id: int,
    per_class: int,
    freq: dict[str, tuple[int, float]],
    black: dict[str, str],
    min_annotations: int,
) -> dict[str, list[int]]:
    nb = len(DEFAULT_BINS) + 1
    orig, valid, annotated = [0] * nb, [0] * nb, [0] * nb
    for r in store.references.list(class_id=class_id):
        n, f = freq.get(r.id, (0, 0.0))
        if n >= min_annotations:
            orig[bin_index(f)] += 1
    for c in store.candidates.iter(class_id=class_id):
        n, f = freq.get(c.id, (0, 0.0))
        if n:
            annotated[bin_index(f)] += 1
            if n >= min_annotations and c.id not in black:
                valid[bin_index(f)] += 1
    target = round_histogram(orig, per_class) if sum(orig) else [0] * nb
    return {
        "original": orig,
        "target": list(target),
        "valid": valid,
        "annotated": annotated,
    }


@router.get("/review/{revision}/{class_id}", response_class=HTMLResponse)
def review(
    request: Request,
    revision: str,
    class_id: int,
    store: StoreDep,
    sort: str = "date",
    show: str = "all",
    min_annotations: int = 10,
) -> HTMLResponse:
    rev = store.revisions.get(revision)
    cls = store.classes.get(class_id)
    members = [m for m in store.revisions.members(revision) if m.class_id == class_id]
    freq, black = _frequencies(store), store.blacklist.current()
    info = {}
    for m in members:
        cand = None if ":" in m.item_id else store.candidates.get(m.item_id)
        n, f = freq.get(m.item_id, (0, 0.0))
        info[m.item_id] = {
            "date": (cand.date_taken if cand else None) or "",
            "freq": f,
            "n": n,
            "black": m.item_id in black,
            "bin": m.bin,
        }
    ids = [
        m.item_id
        for m in members
        if show == "all" or (show == "blacklisted") == info[m.item_id]["black"]
    ]
    key = (
        (lambda i: (info[i]["freq"], i))
        if sort == "frequency"
        else (lambda i: (info[i]["date"], i))
    )
    ids.sort(key=key)
    refs = [r.id for r in store.references.list(class_id=class_id)]
    sample = (
        sorted(
            np.random.default_rng(class_id)
            .choice(refs, size=min(10, len(refs)), replace=False)
            .tolist()
        )
        if refs
        else []
    )
    changed = _changed_classes(store, revision, rev.parent)
    state = store.revisions.reviews(revision).get(class_id)
    table = _histogram_table(
        store, class_id, len(members), freq, black, min_annotations
    )
    return _render(
        request,
        "review.html",
        rev=rev,
        cls=cls,
        ids=ids,
        info=info,
        sample=sample,
        changed=changed,
        state=state,
        table=table,
        sort=sort,
        show=show,
        classes=store.classes.list(),
    )


def _changed_classes(store: Store, name: str, parent: str | None) -> list[int]:
    if parent is None:
        return []

    def by_class(rev: str) -> dict[int, set[str]]:
        out: dict[int, set[str]] = defaultdict(set)
        for m in store.revisions.members(rev):
            out[m.class_id].add(m.item_id)
        return out

    now, before = by_class(name), by_class(parent)
    return sorted(c for c in set(now) | set(before) if now.get(c) != before.get(c))
