"""Write endpoints. Every action is an append-only event with who, when and UI version.

Each write carries the submission key of the page load that produced it; a
second request with the same key (double click, Enter twice, a resent request)
returns the first one's result and writes nothing (:class:`retest.web.deps.Submissions`).
Label and task answers store the key in their assignment id, so the check also
holds across a server restart. Every id in a body is checked against the
project before anything is written.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from retest.project import (
    record_label_verdict,
    record_receipt,
    record_review,
    set_exclusion,
    stored_receipt,
)
from retest.store.base import Store
from retest.store.rows import (
    AnnotationEvent,
    BlacklistEvent,
    DuplicateVerdict,
    ReviewState,
    utc_now,
)
from retest.web.deps import (
    UI_VERSION,
    Annotator,
    AppState,
    ReviewerWriteDep,
    StateDep,
    annotator,
)
from retest.web.schemas import (
    ClassReviewBody,
    ExclusionBody,
    LabelBody,
    LabelErrorBody,
    NearDupBody,
    TaskAnswerBody,
    UndoBody,
)
from retest.web.views import task_tokens

router = APIRouter(prefix="/api", tags=["api"])


def _digest(values: Iterable[str]) -> str:
    """A short fingerprint of an answer (order-free)."""
    h = hashlib.sha256("\n".join(sorted(values)).encode())
    return h.hexdigest()[:12]


def _check_class(store: Store, class_id: int) -> None:
    if class_id not in {c.id for c in store.classes.list()}:
        raise HTTPException(422, f"class {class_id} is not in this project.")


def _unique(ids: list[str], what: str) -> None:
    if len(set(ids)) != len(ids):
        raise HTTPException(422, f"{what} lists an id twice.")


def _reader(state: AppState) -> Store:
    """This thread's read-only store: checks never wait behind a write."""
    return state.live.store()


async def _append(
    state: AppState, events: list[AnnotationEvent], assignment: str
) -> dict[str, Any]:
    """Append the events of one assignment unless it is already stored, batched
    with other requests' (one transaction per batch, answered once committed:
    :class:`retest.project._live.EventWriter`)."""
    n, replayed = await asyncio.wrap_future(
        state.live.writer.submit(events, assignment)
    )
    return {"events": n, "replayed": True} if replayed else {"events": n}


_B = TypeVar("_B", bound=BaseModel)


def _answer_route(
    path: str,
    model: type[_B],
) -> Callable[
    [Callable[[_B, Annotator, AppState], Awaitable[dict[str, Any]]]],
    Callable[[_B, Annotator, AppState], Awaitable[dict[str, Any]]],
]:
    """Register ``handler(body, who, state)`` for POST ``path`` as a plain
    Starlette route: answers are nearly every request of a campaign, and
    FastAPI's resolution of body and dependencies cost each a tenth of its
    server time (in-process at a million events, 1.0 → 0.9 ms per answer).

    The checks are those of the other writes, in the same order: the token,
    origin and name (:func:`~retest.web.deps.annotator`, 401/403), then the
    body (JSON only, 422 in FastAPI's error format)."""

    def register(
        handler: Callable[[_B, Annotator, AppState], Awaitable[dict[str, Any]]],
    ) -> Callable[[_B, Annotator, AppState], Awaitable[dict[str, Any]]]:
        async def endpoint(request: Request) -> JSONResponse:
            who = await annotator(request)
            raw = await request.body()
            kind = request.headers.get("content-type", "").split(";")[0].strip()
            if not (kind == "application/json" or kind.endswith("+json")):
                raise HTTPException(422, "Send the answer as JSON (application/json).")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise HTTPException(
                    422, f"The body is not UTF-8 (byte {err.start}): send UTF-8 JSON."
                ) from None
            try:
                body = model.model_validate_json(text)
            except ValidationError as err:
                raise RequestValidationError(
                    [
                        {**e, "loc": ("body", *e["loc"])}
                        for e in err.errors(include_url=False)
                    ]
                ) from None
            return JSONResponse(await handler(body, who, request.app.state.retest))

        router.add_route(
            router.prefix + path, endpoint, methods=["POST"], include_in_schema=False
        )
        return handler

    return register


@_answer_route("/label", LabelBody)
async def post_label(
    body: LabelBody, who: Annotator, state: AppState
) -> dict[str, Any]:
    """Stage 1 (select) or stage 2 (verify): one event per shown candidate.

    The shown ids must be candidates of the keyword (of the class, or without a
    class); a resubmission of the same item later simply becomes its latest answer.
    The checks read a few indexed rows on the event loop's read-only connection
    (WAL readers never wait); the append waits in the writer's queue, not in a
    thread.
    """
    store = _reader(state)
    _check_class(store, body.class_id)
    if body.keyword not in {
        k.keyword for k in store.classes.keywords(class_id=body.class_id)
    }:
        raise HTTPException(
            422, f"{body.keyword[:40]!r} is not a keyword of class {body.class_id}."
        )
    _unique(body.shown, "shown")
    checked = set(body.checked)
    if not checked <= set(body.shown):
        raise HTTPException(422, "checked items must be among the shown items.")
    known = set(store.candidates.existing(body.shown))
    rows = {
        c.id: c
        for c in store.candidates.get_many([i for i in body.shown if i in known])
    }
    bad = [
        i
        for i in body.shown
        if i not in rows
        or rows[i].keyword != body.keyword
        or rows[i].class_id not in (None, body.class_id)
    ]
    if bad:
        raise HTTPException(
            422, f"{bad[0][:70]!r} is not a candidate of keyword {body.keyword[:40]!r}."
        )
    assignment = f"web:{who.name}:{body.stage}:{body.submission}:{_digest(checked)}"
    now = utc_now()  # stamped here, so the aggregates see what is stored
    events = [
        AnnotationEvent(
            who=who.name,
            kind=body.stage,
            class_id=body.class_id,
            item_id=i,
            value=int(i in checked),
            when=now,
            ui_version=UI_VERSION,
            assignment_id=assignment,
            extra={"keyword": body.keyword},
        )
        for i in body.shown
    ]
    return await state.submissions.run_async(
        f"label|{assignment}", lambda: _append(state, events, assignment)
    )


@_answer_route("/task", TaskAnswerBody)
async def post_task(
    body: TaskAnswerBody, who: Annotator, state: AppState
) -> dict[str, Any]:
    """A local answer to a grid task, stored like a crowd assignment.

    The worker is the signed-in person's (``local:<name>``): a later answer of
    the same person to the same task replaces the earlier one in every
    selection frequency (the latest valid assignment of a worker counts).
    """
    task = state.live.task(body.task_id)
    items = tuple(dict.fromkeys(task.items))
    tokens = task_tokens(task.id, items, state.secret)
    bad = [t for t in body.selected_tokens if t not in tokens]
    if bad:
        raise HTTPException(422, f"unknown image token {bad[0]!r} for this task.")
    selected = {tokens[t] for t in body.selected_tokens}
    # the page load's key and what was answered: a replay is a no-op, a
    # corrected answer sent again from the same page (Back) is a new answer
    assignment = f"web:{who.name}:{task.id}:{body.submission}:{_digest(selected)}"
    if not state.live.aggregates.built:  # once: the stored events are read
        await run_in_threadpool(state.live.sync)
    updated = state.live.aggregates.has_answered(task.id, who.worker)
    now = utc_now()  # stamped here, so the aggregates see what is stored
    events = [
        AnnotationEvent(
            who=who.name,
            kind="task",
            class_id=task.class_id,
            item_id=i,
            value=int(i in selected),
            when=now,
            ui_version=UI_VERSION,
            task_id=task.id,
            assignment_id=assignment,
            assignment_status="Submitted",
            worker=who.worker,
        )
        for i in items
    ]
    result = await state.submissions.run_async(
        f"task|{assignment}", lambda: _append(state, events, assignment)
    )
    return (
        {**result, "updated": True}
        if updated and not result.get("replayed")
        else result
    )


def _once(
    state: Any,
    body: BaseModel,
    name: str,
    write: Callable[[], dict[str, Any]],
    who: str = "",
) -> dict[str, Any]:
    """``write()`` once per submission key and content: a replay is a no-op, a
    changed form sent again with its page's key is a new write. The key is
    stored with the write (:mod:`retest.project._receipts`), so a replay after
    a restart is a no-op too."""
    key = getattr(body, "submission", None)
    if key is None:
        return write()
    full = f"{name}|{key}|{_digest([body.model_dump_json(exclude={'submission'})])}"

    def write_once() -> dict[str, Any]:
        result = write()
        record_receipt(state.store, full, who, result, UI_VERSION)
        return result

    return state.submissions.run(
        full, write_once, stored=lambda: stored_receipt(state.store, full)
    )


@router.post("/neardup")
def post_neardup(
    body: NearDupBody, who: ReviewerWriteDep, state: StateDep
) -> dict[str, Any]:
    """Verdicts for every shown neighbour, then a review mark for the row.

    With ``reviewed`` the project layer's :func:`~retest.project.record_review`
    writes both (so ``retest dedup queue`` and this page agree); without it only
    the verdicts are written. The shown ids must be neighbours of the candidate
    under the metric.
    """
    store = state.store
    store.candidates.get(body.candidate_id)  # 404 if unknown
    known = {
        r
        for nl in store.neardup.neighbours(body.candidate_id, metric=body.metric)
        for r in nl.ref_ids
    }
    _unique(body.shown, "shown")
    if not set(body.shown) <= known:
        raise HTTPException(
            422,
            f"shown ids must be {body.metric} neighbours of {body.candidate_id[:16]}.",
        )
    dup = set(body.duplicates)
    if not dup <= set(body.shown):
        raise HTTPException(422, "duplicates must be among the shown neighbours.")

    def write() -> dict[str, Any]:
        if body.reviewed:
            record_review(
                state.project,
                body.candidate_id,
                body.metric,
                reviewer=who.name,
                shown=body.shown,
                duplicates=body.duplicates,
            )
        else:
            store.neardup.add_verdicts(
                DuplicateVerdict(body.candidate_id, r, body.metric, r in dup, who.name)
                for r in body.shown
            )
        return {"verdicts": len(body.shown)}

    return _once(state, body, f"neardup|{who.name}", write, who.name)


@router.post("/exclusion")
def post_exclusion(
    body: ExclusionBody, who: ReviewerWriteDep, state: StateDep
) -> dict[str, Any]:
    """Exclude a worker's answers from the counts, or include them again (an
    audited event in the store; the aggregates are read again)."""

    def write() -> dict[str, Any]:
        changed = set_exclusion(
            state.project,
            body.worker,
            excluded=body.exclude,
            by=who.name,
            reason=body.reason,
        )
        if changed:
            state.live.rebuild()
        return {"changed": changed}

    return _once(state, body, f"exclusion|{who.name}", write, who.name)


@router.post("/label-error")
def post_label_error(
    body: LabelErrorBody, who: ReviewerWriteDep, state: StateDep
) -> dict[str, Any]:
    """ "label is correct" / "label is wrong (→ class)" / "unclear" (append-only)."""

    def write() -> dict[str, Any]:
        event = record_label_verdict(
            state.project,
            body.item_id,
            body.verdict,
            who=who.name,
            new_class=body.new_class,
            ui_version=UI_VERSION,
        )
        return {"event": event}

    return _once(state, body, f"label-error|{who.name}", write, who.name)


@router.post("/review")
def post_review(
    body: ClassReviewBody, who: ReviewerWriteDep, state: StateDep
) -> dict[str, Any]:
    """Blacklist edits, near-duplicate sets and the class's review flags.

    Every id must be a member of the revision in this class.
    """
    store = state.store
    store.revisions.get(body.revision)  # 404 via the exception handler if unknown
    _check_class(store, body.class_id)
    members = {
        m.item_id
        for m in store.revisions.members(body.revision)
        if m.class_id == body.class_id
    }
    given = [
        *body.blacklist,
        *body.unblacklist,
        *(i for g in body.near_duplicate_sets for i in g),
    ]
    bad = [i for i in given if i not in members]
    if bad:
        raise HTTPException(
            422,
            f"{bad[0][:70]!r} is not in revision {body.revision[:40]} class {body.class_id}.",
        )

    def write() -> dict[str, Any]:
        events = [BlacklistEvent(i, body.reason, who.name) for i in body.blacklist]
        events += [
            BlacklistEvent(i, "taken off in the class review", who.name, undo=True)
            for i in body.unblacklist
        ]
        if events:
            store.blacklist.add(events)
        verdicts = [
            DuplicateVerdict(member, group[0], "review", True, who.name)
            for group in body.near_duplicate_sets
            if len(group) >= 2
            for member in group[1:]
        ]
        if verdicts:
            store.neardup.add_verdicts(verdicts)
        store.revisions.set_review(
            ReviewState(
                body.revision, body.class_id, body.reviewed, body.problematic, who.name
            )
        )
        return {"blacklist_events": len(events), "verdicts": len(verdicts)}

    return _once(state, body, f"review|{who.name}", write, who.name)


@_answer_route("/undo", UndoBody)
async def post_undo(body: UndoBody, who: Annotator, state: AppState) -> dict[str, Any]:
    """Undo the signed-in person's latest grid answer (see
    :meth:`retest.project._live.Live.withdraw_last`); their previous answer to that
    task, if any, counts again. Once per page load (a double click undoes one
    answer). Says which task, so the page can reopen it."""
    live = state.live
    key = f"undo|{who.name}|{body.submission}"

    async def undo() -> dict[str, Any]:
        # a replay after a restart: the receipt says which answer it undid
        prev = await run_in_threadpool(stored_receipt, state.store, key)
        if prev is not None:
            return {**prev, "replayed": True}
        last = await run_in_threadpool(live.withdraw_last, who.worker)
        if last is None:
            raise HTTPException(409, "Nothing to undo: you have no grid answer stored.")
        result = {"undone": last[1], "task_id": last[0]}
        await run_in_threadpool(
            record_receipt, state.store, key, who.name, result, UI_VERSION
        )
        return result

    return await state.submissions.run_async(key, undo)
