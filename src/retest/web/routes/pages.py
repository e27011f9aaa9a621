"""Read-only HTML pages: start, CIFAR-style labeling, grid tasks and the final
class review of a revision (near-duplicates, statistics and the label-error queue
live in :mod:`retest.web.routes.review`).

Labelers see the start page, labeling pages, keyword
progress and grid tasks; results, controls and review pages need the reviewer
token. Aggregates come from :class:`retest.project._live.Live`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from retest.errors import NotFoundError
from retest.labeling.instructions import GRID_INSTRUCTIONS
from retest.project import Live, NotReady, review_states
from retest.sampling.histogram import bin_index
from retest.sampling.selection_frequency import FrequencyStat
from retest.store.base import Store
from retest.store.rows import DuplicateVerdict, Revision
from retest.web.deps import ReviewerDep, RoleDep, StateDep, StoreDep
from retest.web.views import (
    BIN_LABELS,
    Pool,
    agreement,
    busy,
    candidate_pool,
    class_histograms,
    instructions_for,
    keyword_progress,
    keywords_of,
    near_duplicate_ids,
    render,
    task_tokens,
    verified_counts,
)

router = APIRouter(tags=["pages"])

PAGE = 40


def live(state: Any) -> Live:
    lv: Live = state.live
    return lv


def pool(state: Any) -> Pool:
    return live(state).derived("pool", lambda p: candidate_pool(p.store), votes=False)


ELIGIBILITY = "the eligibility decision"


def copies_now(state: Any) -> frozenset[str]:
    """The project's copies (its one eligibility decision), cached per revision.

    Raises :class:`~retest.project._live.NotReady` while it is computed for the
    first time (at server start it is computed in the background)."""
    return live(state).derived(
        "copies", near_duplicate_ids, label=ELIGIBILITY, offload=True
    )


def changes(state: Any, class_id: int | None = None) -> tuple[Any, ...]:
    """A key for :meth:`Live.memo` that changes with every write to the store
    but the votes (fingerprint) and with every vote (of ``class_id`` only when
    given) and stage-1/2 label."""
    lv = live(state)
    fp = lv.fingerprint()
    with lv.lock:
        agg = lv.sync()
        cv = agg.class_version
        votes = cv.get(class_id, 0) if class_id is not None else sum(cv.values())
        return fp, lv.generation, votes, agg.label_version


def keyword_counts(
    state: Any, store: Store, class_id: int | None
) -> dict[tuple[str, int | None], int]:
    """Candidates per (keyword, class id) of the class's keywords (all classes
    for None), through the keyword index; kept until the store changes."""
    lv = live(state)
    return lv.memo(
        f"keyword-counts|{class_id}",
        lv.fingerprint(),
        lambda: store.candidates.count_by_keyword(
            {k.keyword for k in store.classes.keywords(class_id=class_id)}
        ),
    )


def progress(state: Any, store: Store, class_id: int | None) -> Any:
    """Keyword progress of a class (all classes for None), recomputed after a
    stage-1/2 label or a change of the other tables."""
    lv = live(state)

    def compute() -> Any:
        p = pool(state)
        with lv.lock:
            agg = lv.sync()
            sel = dict(agg.latest_by_item["select"])
            ver = dict(agg.latest_by_item["verify"])
            latest = dict(agg.latest["verify"])
        names = {c.id: c.name for c in store.classes.list()}
        kw_of = keywords_of(store, {i for i, _ in latest})
        verified = verified_counts(latest, kw_of, names)
        return keyword_progress(
            lv.read_project(),
            class_id=class_id,
            selected=sel,
            verdicts=ver,
            verified=verified,
            pool=p,
            counts=keyword_counts(state, store, class_id),
        )

    fp, gen, _, labels = changes(state)
    return lv.memo(f"progress|{class_id}", (fp, gen, labels), compute)


@router.get("/", response_class=HTMLResponse)
def index(
    request: Request, state: StateDep, store: StoreDep, role: RoleDep
) -> HTMLResponse:
    lv = live(state)

    def compute() -> dict[str, Any]:
        revisions = store.revisions.list()
        keywords: dict[int, list[str]] = defaultdict(list)
        for kw in store.classes.keywords():
            keywords[kw.class_id].append(kw.keyword)
        return {
            "classes": store.classes.list(),
            "counts": store.candidates.count_by_class(),
            "keywords": keywords,
            "tasks": len(store.tasks.list()),
            "revisions": revisions,
            "states": {
                r.name: review_states(lv.read_project(), r.name) for r in revisions
            },
        }

    return render(request, "index.html", **lv.memo("index", lv.fingerprint(), compute))


def _label_items(
    state: Any, store: Store, class_id: int, keyword: str, stage: str
) -> tuple[list[str], int]:
    """What the stage shows for the keyword, and how many were dropped as copies."""
    lv = live(state)
    ids = lv.memo(
        f"keyword-ids|{class_id}|{keyword}",
        lv.fingerprint(),
        lambda: pool(state).ids(store, keyword, class_id),
    )
    with lv.lock:
        agg = lv.sync()
        selected = agg.latest_by_item["select"]
        verified = agg.latest_by_item["verify"]
        if stage == "verify":
            picks = [i for i in ids if selected.get(i) == 1 and i not in verified]
        else:
            picks = [i for i in ids if i not in selected]
    if stage != "verify":
        return picks, 0
    # copies of originals (and surplus members of a near-duplicate group) are
    # dropped before the verifier sees them: the project's eligibility rule
    auto = copies_now(state)
    return [i for i in picks if i not in auto], sum(1 for i in picks if i in auto)


@router.get("/label/{class_id}/{keyword}", response_class=HTMLResponse)
def label(
    request: Request,
    class_id: int,
    keyword: str,
    state: StateDep,
    store: StoreDep,
    stage: str = "select",
    page: int = 0,
) -> HTMLResponse:
    """Stage 1 shows unused candidates of the keyword; stage 2 the stage-1 picks, pre-checked."""
    cls = store.classes.get(class_id)
    stage = stage if stage == "verify" else "select"
    lv = live(state)
    if keyword not in lv.memo(
        f"keywords|{class_id}",
        lv.fingerprint(),
        lambda: {k.keyword for k in store.classes.keywords(class_id=class_id)},
    ):
        raise NotFoundError(f"{keyword[:60]!r} is not a keyword of class {cls.name}.")
    originals = lv.memo(
        f"originals|{class_id}|{keyword}",
        lv.fingerprint(),
        lambda: [
            r.id
            for r in store.references.list(class_id=class_id)
            if r.keyword == keyword
        ],
    )
    try:
        items, dropped = _label_items(state, store, class_id, keyword, stage)
    except NotReady as err:
        return busy(request, err)
    rows, plan = progress(state, store, class_id)
    kp = next((k for k in rows if k.keyword == keyword), None)
    page = max(0, page)
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
        dropped=dropped,
        n_originals=len(originals),
        verified=kp.verified if kp else 0,
        needed=kp.needed if kp else 0,
        plan=plan,
        page=page,
        pages=(len(items) + PAGE * 2 - 1) // (PAGE * 2),
        next_url=f"/next/label/{class_id}/{quote(keyword, safe='')}?stage={stage}",
        instructions=instructions_for(state.project.config, cls.name, keyword),
    )


@router.get("/next/label/{class_id}/{keyword}")
def next_label(
    class_id: int, keyword: str, state: StateDep, store: StoreDep, stage: str = "select"
) -> RedirectResponse:
    """Where a labeler goes after submitting: the same keyword while it has work
    left in this stage, else the class's next keyword that has, else the list."""
    stage = stage if stage == "verify" else "select"
    kws = [k.keyword for k in store.classes.keywords(class_id=class_id)]
    order = (
        kws[kws.index(keyword) :] + kws[: kws.index(keyword)] if keyword in kws else kws
    )
    for kw in order:
        try:
            todo = _label_items(state, store, class_id, kw, stage)[0]
        except NotReady:
            todo = [kw]  # its page says what is being computed
        if todo:
            return RedirectResponse(
                f"/label/{class_id}/{quote(kw, safe='')}?stage={stage}", 303
            )
    return RedirectResponse(f"/keywords/{class_id}", 303)


def task_list(state: Any, store: Store) -> tuple[dict[int, str], list[Any]]:
    """Class names and every task (read again after any change but a vote)."""
    lv = live(state)
    return lv.memo(
        "tasks",
        lv.fingerprint(),
        lambda: ({c.id: c.name for c in store.classes.list()}, store.tasks.list()),
    )


@router.get("/tasks", response_class=HTMLResponse)
def tasks(
    request: Request, state: StateDep, store: StoreDep, role: RoleDep
) -> HTMLResponse:
    lv = live(state)
    names, all_tasks = task_list(state, store)
    with lv.lock:
        agg = lv.sync()
        answers = {t.id: agg.answers(t.id) for t in all_tasks}
    rows = [(t, names.get(t.class_id, t.class_id), answers[t.id]) for t in all_tasks]
    return render(request, "tasks.html", rows=rows)


@router.get("/task/{task_id}", response_class=HTMLResponse)
def task(
    request: Request, task_id: str, state: StateDep, store: StoreDep
) -> HTMLResponse:
    """A grid task; its images are rendered now, together (the browser asks for
    all of them at once next)."""
    t = live(state).task(task_id)
    cls = store.classes.get(t.class_id)
    items = tuple(dict.fromkeys(t.items))
    tokens = task_tokens(t.id, items, state.secret)
    state.images.prefetch(items, live(state).read_project())
    # reopened: the person's own answer is shown, to keep or correct
    mine, can_undo, (done, today) = live(state).mine(t.id, request.state.who.worker)
    total = len(task_list(state, store)[1])
    return render(
        request,
        "task.html",
        task=t,
        cls=cls,
        tokens=list(tokens),
        checked={tok for tok, i in tokens.items() if mine and mine.get(i)},
        answered=mine is not None,
        can_undo=can_undo,
        k=min(done + (mine is None), total),
        total=total,
        done=done,
        today=today,
        instructions=instructions_for(
            state.project.config, cls.name, default=GRID_INSTRUCTIONS
        ),
        next_url=f"/next/task?after={quote(t.id, safe='')}",
    )


@router.get("/done", response_class=HTMLResponse)
def finished(
    request: Request, state: StateDep, store: StoreDep, role: RoleDep
) -> HTMLResponse:
    """The finish page: every grid task has this person's answer."""
    _, can_undo, (done, today) = live(state).mine("", request.state.who.worker)
    total = len(task_list(state, store)[1])
    return render(
        request, "done.html", done=done, today=today, total=total, can_undo=can_undo
    )


@router.get("/next/task")
def next_task(
    request: Request, state: StateDep, store: StoreDep, role: RoleDep, after: str = ""
) -> RedirectResponse:
    """The next task (in list order, wrapping) this person has not answered yet."""
    worker = ("w", request.state.who.worker)
    ids = [t.id for t in task_list(state, store)[1]]
    start = ids.index(after) + 1 if after in ids else 0
    lv = live(state)
    with lv.lock:
        agg = lv.sync()
        for tid in ids[start:] + ids[:start]:
            if worker not in agg.answered_by(tid):
                return RedirectResponse(f"/task/{quote(tid, safe='')}", 303)
    return RedirectResponse("/done", 303)  # no loop: a finish page


@router.get("/task/{task_id}/results", response_class=HTMLResponse)
def task_results(
    request: Request, task_id: str, state: StateDep, store: StoreDep, role: ReviewerDep
) -> HTMLResponse:
    """For reviewers: each image's selection frequency, valid answers, agreement."""
    t = live(state).task(task_id)
    role_of = {i: r for r, ids in t.controls.items() for i in ids}
    rows = []
    lv = live(state)
    with lv.lock:
        stats = lv.sync().stats
        for i in t.items:
            st = stats.get((i, t.class_id))
            f, n = (st.frequency, st.n_assignments) if st else (0.0, 0)
            rows.append(
                {
                    "id": i,
                    "freq": f,
                    "n": n,
                    "agree": agreement(f) if n else None,
                    "role": role_of.get(i, "candidate"),
                }
            )
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
    store: StoreDep,
    role: ReviewerDep,
    sort: str = "date",
    order: str = "asc",
    show: str = "all",
    bin: int | None = None,
    originals: int = 10,
    min_annotations: int = 10,
) -> HTMLResponse:
    """Final class review: bin table, filters, originals, flags.

    Everything but the filter and the order is kept per class until a vote
    for the class or a change of the other tables (blacklist, near-duplicate
    sets, review flags, the eligibility decision) comes in."""
    rev = store.revisions.get(revision)
    cls = store.classes.get(class_id)
    try:
        ndup = copies_now(state)
    except NotReady as err:
        return busy(request, err)
    black = pool(state).black
    originals = max(0, min(originals, 50))
    data = live(state).memo(
        f"review|{revision}|{class_id}|{originals}|{min_annotations}",
        (changes(state, class_id), ndup, black),
        lambda: _review_data(
            state, store, rev, class_id, ndup, black, originals, min_annotations
        ),
    )
    info = data["info"]
    keep = _SHOW.get(show, _SHOW["all"])
    ids = [i for i in info if keep(info[i]) and (bin is None or info[i]["bin"] == bin)]
    field = "freq" if sort == "frequency" else "date"
    ids.sort(key=lambda i: (info[i][field], i), reverse=order == "desc")
    return render(
        request,
        "review.html",
        rev=rev,
        cls=cls,
        ids=ids,
        bins=BIN_LABELS,
        query={"sort": sort, "order": order, "show": show, "bin": bin},
        **data,
    )


def _review_data(
    state: Any,
    store: Store,
    rev: Revision,
    class_id: int,
    ndup: frozenset[str],
    black: Mapping[str, str],
    originals: int,
    min_annotations: int,
) -> dict[str, Any]:
    """The class review page's content but the order and filter of the grid."""
    lv = live(state)
    members = [m for m in store.revisions.members(rev.name) if m.class_id == class_id]
    cands = {c.id: c for c in store.candidates.get_many([m.item_id for m in members])}
    with lv.lock:
        stats = lv.sync().class_stats(class_id)
    # the copy of the class's counts is read without holding the lock
    info = {}
    for m in members:
        st = stats.get((m.item_id, class_id))
        f, n = (st.frequency, st.n_assignments) if st else (0.0, 0)
        cand = cands.get(m.item_id)
        info[m.item_id] = {
            "date": (cand.date_taken if cand else None) or "",
            "freq": f,
            "n": n,
            "black": m.item_id in black,
            "ndup": m.item_id in ndup,
            "bin": bin_index(f) if n else None,
        }
    refs = [r.id for r in store.references.list(class_id=class_id)]
    table = class_histograms(
        lv.read_project(),
        stats,
        black,
        min_annotations=min_annotations,
        per_class={class_id: len(members)},
        near_duplicates=ndup,
    )[class_id]
    return {
        "info": info,
        "sample": _originals(refs, class_id, stats, originals),
        "counts": _review_counts(refs, class_id, info, stats),
        "changed": _changed_classes(store, rev.name, rev.parent),
        "state": store.revisions.reviews(rev.name).get(class_id),
        "table": table,
        "classes": store.classes.list(),
        "ndsets": _review_sets(store.neardup.verdicts(), set(info)),
    }


def _review_sets(verdicts: list[DuplicateVerdict], members: set[str]) -> dict[str, str]:
    """Member → the name of its near-duplicate set from earlier class reviews
    (the set's first member's short id), so the fields keep what was saved."""
    latest: dict[tuple[str, str], bool] = {}
    for v in verdicts:
        if v.metric == "review" and v.candidate_id in members:
            latest[(v.candidate_id, v.ref_id)] = v.is_duplicate
    out: dict[str, str] = {}
    for (member, head), dup in latest.items():
        if dup:
            out[head] = out[member] = head[:8]
    return out


def _originals(
    refs: list[str], class_id: int, stats: Mapping[Any, FrequencyStat], size: int
) -> list[tuple[str, float, int]]:
    """A seeded sample of the class's originals with frequency and answers."""
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
    refs: list[str],
    class_id: int,
    info: dict[str, dict[str, Any]],
    stats: Mapping[Any, FrequencyStat],
) -> dict[str, Any]:
    """Counts above the grid. The originals' mean is over the class's own
    originals only: originals of other classes shown as negative controls in
    this class's tasks are not originals of this class."""
    val = []
    for r in refs:
        st = stats.get((r, class_id))
        if st is not None and st.n_assignments:
            val.append(st.frequency)
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
