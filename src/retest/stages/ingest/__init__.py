"""The ingest stage: candidate sources → the project store (resumable, idempotent).

:func:`add_source` is ``retest source add``; :func:`ingest_source` ingests a built
source; :class:`Ingest` is one run of a job, its stages explicit (read → dedup by
content id → write pixels, then rows, log line and checkpoint).
"""

from retest.stages.ingest._ingest import (
    INGEST_STAGE,
    FaultHook,
    Ingest,
    add_source,
    ingest_job_key,
    ingest_source,
    interrupted_ingests,
    list_ingests,
    load_tinyimages_index,
    reference_mode,
    resume_command,
)
from retest.stages.ingest._log import (
    MAX_LISTED_DUPLICATES,
    REPORT_DIR,
    IngestReport,
    Tally,
    append_log_line,
)
from retest.stages.ingest._writer import (
    ARRAY_DIR,
    IMAGE_DIR,
    BatchWriter,
    PreparedBatch,
    batch_content_ids,
    remove_stale_temporaries,
    resolve_class_ids,
)

__all__ = [
    "ARRAY_DIR",
    "IMAGE_DIR",
    "INGEST_STAGE",
    "MAX_LISTED_DUPLICATES",
    "REPORT_DIR",
    "BatchWriter",
    "FaultHook",
    "Ingest",
    "IngestReport",
    "PreparedBatch",
    "Tally",
    "add_source",
    "append_log_line",
    "batch_content_ids",
    "ingest_job_key",
    "ingest_source",
    "interrupted_ingests",
    "list_ingests",
    "load_tinyimages_index",
    "reference_mode",
    "remove_stale_temporaries",
    "resolve_class_ids",
    "resume_command",
]
