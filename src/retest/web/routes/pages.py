"""Read-only HTML pages: start, CIFAR-style labeling, grid tasks and the final
class review of a revision (near-duplicates, statistics and the label-error queue
live in :mod:`retest.web.routes.review`)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from retest.build.histogram import bin_index
from retest.build.tasks import image_token
from retest.pipeline.revisions import review_states
from retest.pipeline.sample import selection_frequencies
from retest.store.base import Store, split_reference_id
from retest.web.deps import StateDep, StoreDep
from retest.web.views import (
    BIN_LABELS,
    agreement,
    class_histograms,
    keyword_progress,
    latest_values,
    near_duplicate_ids,
    render,
)

router = APIRouter(tags=["pages"])

PAGE = 40


@router.get("/", response_class=HTMLResponse)
def index(request: Request, store: StoreDep) -> HTMLResponse:
    classes = store.classes.list()
    by_class = store.candidates.count_by_class()
    revisions = store.revisions.list()
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
        revisions=revisions,
        states={r.name: review_states(store, r.name) for r in revisions},
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
    dropped: list[str] = []
    if stage == "verify":
        # copies of originals (and surplus members of a near-duplicate group) are
        # dropped before the verifier sees them: the project's eligibility rule
        auto = near_duplicate_ids(state.project)
        picks = [i for i in pool if selected.get(i) == 1 and i not in verified]
        items = [i for i in picks if i not in auto]
        dropped = [i for i in picks if i in auto]
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
        dropped=len(dropped),
        n_originals=len(originals),
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


_SHOW = {
    "all": lambda i: True,
    "blacklisted": lambda i: i["black"],
    "clean": lambda i: not i["black"],
    "neardup": lambda i: i["ndup"],
    "not-neardup": lambda i: not i["ndup"],
}


@router.get("/review/{revision}/{class_id}", response_class=HTMLResponse)
def review(
    request: Request,
    revision: str,
    class_id: int,
    state: StateDep,
    sort: str = "date",
    order: str = "asc",
    show: str = "all",
    bin: int | None = None,
    originals: int = 10,
    min_annotations: int = 10,
) -> HTMLResponse:
    """Final class review (SPEC §6.2): bin table, filters, originals, flags."""
    store = state.store
    rev = store.revisions.get(revision)
    cls = store.classes.get(class_id)
    members = [m for m in store.revisions.members(revision) if m.class_id == class_id]
    stats, black = selection_frequencies(store), store.blacklist.current()
    ndup = near_duplicate_ids(state.project)
    cands = {c.id: c for c in store.candidates.get_many([m.item_id for m in members])}
    info = {}
    for m in members:
        st = stats.get((m.item_id, class_id))
        f, n = (st.frequency, st.n_assignments) if st else (0.0, 0)
        cand = cands.get(m.item_id)
        info[m.item_id] = {"date": (cand.date_taken if cand else None) or "", "freq": f,
                           "n": n, "black": m.item_id in black, "ndup": m.item_id in ndup,
                           "bin": bin_index(f) if n else None}  # fmt: skip
    keep = _SHOW.get(show, _SHOW["all"])
    ids = [i for i in info if keep(info[i]) and (bin is None or info[i]["bin"] == bin)]
    field = "freq" if sort == "frequency" else "date"
    ids.sort(key=lambda i: (info[i][field], i), reverse=order == "desc")
    table = class_histograms(store, stats, black, min_annotations=min_annotations,
                             per_class={class_id: len(members)},
                             near_duplicates=ndup)[class_id]  # fmt: skip
    return render(
        request,
        "review.html",
        rev=rev,
        cls=cls,
        ids=ids,
        info=info,
        sample=_originals(store, class_id, stats, max(0, min(originals, 50))),
        counts=_review_counts(store, class_id, info, stats),
        changed=_changed_classes(store, revision, rev.parent),
        state=store.revisions.reviews(revision).get(class_id),
        table=table,
        bins=BIN_LABELS,
        query={"sort": sort, "order": order, "show": show, "bin": bin},
        classes=store.classes.list(),
    )


def _originals(
    store: Store, class_id: int, stats: Any, size: int
) -> list[tuple[str, float, int]]:
    """A seeded sample of the class's originals with frequency and answers."""
    refs = [r.id for r in store.references.list(class_id=class_id)]
    if not refs or size == 0:
        return []
    rng = np.random.default_rng(class_id)
    picked = sorted(rng.choice(refs, size=min(size, len(refs)), replace=False).tolist())
    out = []
    for r in picked:
        st = stats.get((r, class_id))
        out.append((r, st.frequency if st else 0.0, st.n_assignments if st else 0))
    return out


def _review_counts(
    store: Store, class_id: int, info: dict[str, dict[str, Any]], stats: Any
) -> dict[str, Any]:
    val = [
        st.frequency
        for (item, cid), st in stats.items()
        if cid == class_id and st.n_assignments and split_reference_id(item) is not None
    ]
    return {
        "total": len(info),
        "blacklisted": sum(i["black"] for i in info.values()),
        "near_duplicates": sum(i["ndup"] for i in info.values()),
        "annotated_originals": len(val),
        "mean_original_frequency": sum(val) / len(val) if val else None,
    }


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
