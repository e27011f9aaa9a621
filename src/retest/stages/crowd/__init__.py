"""The crowd stage: grid tasks → MTurk batch files → results import → worker reports.

:mod:`retest.stages.crowd.mturk` reads and writes MTurk's files and needs no
project; the private modules hold the project side: ``_tasks`` (which candidates
get tasks), ``_export`` (a batch of a project's tasks), ``_import`` (results into
annotation events), ``_workers`` (control accuracy per worker) and ``_secret``
(the key of image tokens and worker-id hashes).
"""

from retest.project import project_secret
from retest.stages.crowd._export import (
    EXPORT_STAGE,
    export_mturk,
    exported_task_ids,
    task_instructions,
)
from retest.stages.crowd._import import CrowdImport, StatusChange, import_mturk
from retest.stages.crowd._tasks import (
    COPY_REASONS,
    TaskBatch,
    create_task_batch,
    create_tasks,
    original_copies,
    pending_task_candidates,
    task_from_row,
)
from retest.stages.crowd._workers import (
    MIN_CONTROL_ACCURACY,
    worker_ids_from_results,
    worker_report,
)
from retest.stages.crowd.mturk import REQUIRED_RESULT_COLUMNS

__all__ = [
    "COPY_REASONS",
    "EXPORT_STAGE",
    "MIN_CONTROL_ACCURACY",
    "REQUIRED_RESULT_COLUMNS",
    "CrowdImport",
    "StatusChange",
    "TaskBatch",
    "create_task_batch",
    "create_tasks",
    "export_mturk",
    "exported_task_ids",
    "import_mturk",
    "original_copies",
    "pending_task_candidates",
    "project_secret",
    "task_from_row",
    "task_instructions",
    "worker_ids_from_results",
    "worker_report",
]
