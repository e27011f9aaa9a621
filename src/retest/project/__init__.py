"""The project layer: a project on disk and everything several stages and the web app read.

``Project`` (paths, config, store), checkpoints, the people of a campaign, the one
eligibility decision, the classes and their review states, selection frequencies
and target histograms, the verified candidates and the keyword plan's needs, ids
as users give them, the near-duplicate state and verdicts, the label-error review
queue and the live event model with its single writer. Imports adapters (``store``, ``sources``, ``models``), the core
and the foundation; never a stage, the CLI or the web app.
"""

from __future__ import annotations

from retest.project._checkpoint import (
    Checkpoint,
    list_states,
    load_state,
    save_state,
    stage_runs,
)
from retest.project._classes import class_names, review_states
from retest.project._eligibility import (
    AUTO_METRICS,
    ORIGINAL_COPY_REASONS,
    REASONS,
    CandidateReasons,
    Eligibility,
    candidate_eligibility,
    check_fresh,
    class_tallies,
    copies,
    eligibility_summary,
    heavy_automatic_losses,
    ineligible_members,
    pending_reviews,
    stale_candidates,
)
from retest.project._events import (
    WITHDRAWN,
    EventAggregates,
)
from retest.project._ids import MIN_PREFIX, resolve_candidate, resolve_item
from retest.project._ingest_runs import (
    INGEST_STAGE,
    interrupted_ingests,
    missing_index_problem,
    resume_command,
    unfinished_ingest_problem,
)
from retest.project._keywords import (
    PLAN_STATE,
    planned_needs,
    verified_candidates,
    verified_per_keyword,
)
from retest.project._live import (
    EventWriter,
    Live,
    NotReady,
)
from retest.project._neardup import (
    AGAINST,
    BUILTIN_METRICS,
    DEDUP_STAGE,
    STATE_PREFIX,
    candidate_infos,
    dedup_image_shape,
    dedup_review_queue,
    load_neighbours,
    metric_state,
    metrics_run,
    record_review,
    review_targets,
    reviewed_references,
)
from retest.project._people import (
    ControlScore,
    Invitation,
    add_person,
    control_scores,
    excluded_workers,
    new_link,
    resolve_worker,
    revoke_person,
    set_exclusion,
    sign_in_link,
)
from retest.project._pixels import (
    ARRAYS,
    read_arrays,
    reclaim_tail_orphans,
)
from retest.project._project import (
    CLASS_PRESETS,
    DB_NAME,
    Project,
    init_project,
    open_project,
)
from retest.project._receipts import RECEIPT_KIND, record_receipt, stored_receipt
from retest.project._review_queue import (
    SUSPECT_KIND,
    UNCLEAR,
    VERDICT_KIND,
    VERDICTS,
    LabelErrorItem,
    Suspect,
    label_error_items,
    label_error_queue,
    load_suspects,
    queue_label_errors,
    record_label_verdict,
)
from retest.project._secret import project_secret
from retest.project._votes import (
    TARGET_MIN_ANNOTATIONS,
    TARGET_MIN_ORIGINALS,
    selection_frequencies,
    target_histograms,
)

__all__ = [
    "AGAINST",
    "ARRAYS",
    "AUTO_METRICS",
    "BUILTIN_METRICS",
    "CLASS_PRESETS",
    "DB_NAME",
    "DEDUP_STAGE",
    "INGEST_STAGE",
    "MIN_PREFIX",
    "ORIGINAL_COPY_REASONS",
    "PLAN_STATE",
    "REASONS",
    "RECEIPT_KIND",
    "STATE_PREFIX",
    "SUSPECT_KIND",
    "TARGET_MIN_ANNOTATIONS",
    "TARGET_MIN_ORIGINALS",
    "UNCLEAR",
    "VERDICTS",
    "VERDICT_KIND",
    "WITHDRAWN",
    "CandidateReasons",
    "Checkpoint",
    "ControlScore",
    "Eligibility",
    "EventAggregates",
    "EventWriter",
    "Invitation",
    "LabelErrorItem",
    "Live",
    "NotReady",
    "Project",
    "Suspect",
    "add_person",
    "candidate_eligibility",
    "candidate_infos",
    "check_fresh",
    "class_names",
    "class_tallies",
    "control_scores",
    "copies",
    "dedup_image_shape",
    "dedup_review_queue",
    "eligibility_summary",
    "excluded_workers",
    "heavy_automatic_losses",
    "ineligible_members",
    "init_project",
    "interrupted_ingests",
    "label_error_items",
    "label_error_queue",
    "list_states",
    "load_neighbours",
    "load_state",
    "load_suspects",
    "metric_state",
    "metrics_run",
    "missing_index_problem",
    "new_link",
    "open_project",
    "pending_reviews",
    "planned_needs",
    "project_secret",
    "queue_label_errors",
    "read_arrays",
    "reclaim_tail_orphans",
    "record_label_verdict",
    "record_receipt",
    "record_review",
    "resolve_candidate",
    "resolve_item",
    "resolve_worker",
    "resume_command",
    "review_states",
    "review_targets",
    "reviewed_references",
    "revoke_person",
    "save_state",
    "selection_frequencies",
    "set_exclusion",
    "sign_in_link",
    "stage_runs",
    "stale_candidates",
    "stored_receipt",
    "target_histograms",
    "unfinished_ingest_problem",
    "verified_candidates",
    "verified_per_keyword",
]
