"""Read-only HTML pages: start, CIFAR-style labeling, grid tasks and the final
class review of a revision (near-duplicates, statistics and the label-error queue
live in :mod:`retest.web.routes.review`)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from retest.build.tasks import image_token
from retest.pipeline.sample import selection_frequencies
from retest.store.base import Store
from retest.web.deps import StateDep, StoreDep
from retest.web.views import (
    BIN_LABELS,
    agreement,
    class_histograms,
    keyword_progress,
    latest_values,
    render,
)

router = APIRouter(tags=["pages"])

PAGE = 40


@router.get("/", response_class=HTMLResponse)
def index(request: Request, store: StoreDep) -> HTMLResponse:
    classes = store.classes.list()
    by_class = store.candidates.count_by_class()
    keywords: dict[int, list[str]] = defaultdict(list)
    for kw in store.classes.keywords():
        keywords[kw.class_id].append(kw.keyword)
    return render(
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
    state: StateDep,
    stage: str = "select",
    page: int = 0,
) -> HTMLResponse:
    """Stage 1 shows unused candidates of the keyword; stage 2 the stage-1 picks, pre-checked."""
    store = state.store
    cls = store.classes.get(class_id)
    originals = [
        r.id for r in store.references.list(class_id=class_id) if r.keyword == keyword
    ]
    selected, verified = latest_values(store, "select"), latest_values(store, "verify")
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
    progress, plan = keyword_progress(store, state.project.root, class_id=class_id)
    kp = next((k for k in progress if k.keyword == keyword), None)
    shown = items[page * PAGE * 2 : (page + 1) * PAGE * 2]
    return render(
        request,
        "label.html",
        cls=cls,
        keyword=keyword,
        stage=stage,
        originals=originals[:PAGE],
        items=shown,
        remaining=len(items),
        verified=kp.verified if kp else 0,
        needed=kp.needed if kp else 0,
        plan=plan,
        page=page,
        pages=(len(items) + PAGE * 2 - 1) // (PAGE * 2),
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
    return render(request, "tasks.html", rows=rows)


@router.get("/task/{task_id}", response_class=HTMLResponse)
def task(request: Request, task_id: str, state: StateDep) -> HTMLResponse:
    t = state.store.tasks.get(task_id)
    cls = state.store.classes.get(t.class_id)
    tokens = [image_token(f"{t.id}|{i}", state.secret) for i in t.items]
    return render(request, "task.html", task=t, cls=cls, tokens=tokens)


@router.get("/task/{task_id}/results", response_class=HTMLResponse)
def task_results(request: Request, task_id: str, store: StoreDep) -> HTMLResponse:
    """For reviewers: each image's selection frequency, valid answers, agreement."""
    t = store.tasks.get(task_id)
    stats = selection_frequencies(store)
    role = {i: r for r, ids in t.controls.items() for i in ids}
    rows = []
    for i in t.items:
        st = stats.get((i, t.class_id))
        f, n = (st.frequency, st.n_assignments) if st else (0.0, 0)
        rows.append({"id": i, "freq": f, "n": n, "agree": agreement(f) if n else None,
                     "role": role.get(i, "candidate")})  # fmt: skip
    return render(
        request,
        "task_results.html",
        task=t,
        cls=store.classes.get(t.class_id),
        rows=rows,
    )


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
    stats, black = selection_frequencies(store), store.blacklist.current()
    info = {}
    for m in members:
        cand = None if ":" in m.item_id else store.candidates.get(m.item_id)
        st = stats.get((m.item_id, class_id))
        n, f = (st.n_assignments, st.frequency) if st else (0, 0.0)
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
    table = class_histograms(
        store,
        stats,
        black,
        min_annotations=min_annotations,
        per_class={class_id: len(members)},
    )[class_id]
    return render(
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
        bins=BIN_LABELS,
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
