"""Write endpoints. Every action is an append-only event with who, when and UI version."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, HTTPException

from retest.build.tasks import image_token
from retest.pipeline.dedup import record_review
from retest.pipeline.review_queue import record_label_verdict
from retest.store.base import (
    AnnotationEvent,
    BlacklistEvent,
    DuplicateVerdict,
    ReviewState,
)
from retest.web.deps import UI_VERSION, AnnotatorDep, StateDep, StoreDep
from retest.web.schemas import (
    ClassReviewBody,
    LabelBody,
    LabelErrorBody,
    NearDupBody,
    TaskAnswerBody,
)

router = APIRouter(prefix="/api", tags=["api"])


@router.post("/label")
def post_label(body: LabelBody, who: AnnotatorDep, store: StoreDep) -> dict[str, int]:
    """Stage 1 (select) or stage 2 (verify): one event per shown candidate."""
    if not set(body.checked) <= set(body.shown):
        raise HTTPException(422, "checked items must be among the shown items.")
    checked = set(body.checked)
    ids = store.annotations.add(
        AnnotationEvent(
            who=who.name,
            kind=body.stage,
            class_id=body.class_id,
            item_id=i,
            value=int(i in checked),
            ui_version=UI_VERSION,
            extra={"keyword": body.keyword},
        )
        for i in body.shown
    )
    return {"events": len(ids)}


@router.post("/task")
def post_task(
    body: TaskAnswerBody, who: AnnotatorDep, state: StateDep
) -> dict[str, int]:
    """A local answer to a grid task, stored like a crowd assignment."""
    try:
        task = state.store.tasks.get(body.task_id)
    except LookupError:
        raise HTTPException(404, "No such task.") from None
    tokens = {image_token(f"{task.id}|{i}", state.secret): i for i in task.items}
    bad = [t for t in body.selected_tokens if t not in tokens]
    if bad:
        raise HTTPException(422, f"unknown image token {bad[0]!r} for this task.")
    selected = {tokens[t] for t in body.selected_tokens}
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    assignment = f"web:{who.name}:{task.id}:{stamp}"
    ids = state.store.annotations.add(
        AnnotationEvent(
            who=who.name,
            kind="task",
            class_id=task.class_id,
            item_id=i,
            value=int(i in selected),
            ui_version=UI_VERSION,
            task_id=task.id,
            assignment_id=assignment,
            assignment_status="Submitted",
            worker=f"local:{who.name}",
        )
        for i in task.items
    )
    return {"events": len(ids)}


@router.post("/neardup")
def post_neardup(
    body: NearDupBody, who: AnnotatorDep, state: StateDep
) -> dict[str, int]:
    """Verdicts for every shown neighbour, then a review mark for the row.

    With ``reviewed`` the dedup stage's :func:`~retest.pipeline.dedup.record_review`
    writes both (so ``retest dedup queue`` and this page agree); without it only
    the verdicts are written.
    """
    dup = set(body.duplicates)
    if not dup <= set(body.shown):
        raise HTTPException(422, "duplicates must be among the shown neighbours.")
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
        state.store.neardup.add_verdicts(
            DuplicateVerdict(body.candidate_id, r, body.metric, r in dup, who.name)
            for r in body.shown
        )
    return {"verdicts": len(body.shown)}


@router.post("/label-error")
def post_label_error(
    body: LabelErrorBody, who: AnnotatorDep, store: StoreDep
) -> dict[str, int]:
    """ "label is correct" / "label is wrong (→ class)" / "unclear" (append-only)."""
    event = record_label_verdict(
        store,
        body.item_id,
        body.verdict,
        who=who.name,
        new_class=body.new_class,
        ui_version=UI_VERSION,
    )
    return {"event": event}


@router.post("/review")
def post_review(
    body: ClassReviewBody, who: AnnotatorDep, store: StoreDep
) -> dict[str, int]:
    """Blacklist edits, near-duplicate sets and the class's review flags."""
    store.revisions.get(body.revision)  # 404 via the exception handler if unknown
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
