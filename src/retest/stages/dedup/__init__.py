"""The ``dedup`` stage: neighbours per metric, the metric registry, the review CSV."""

from __future__ import annotations

from retest.stages.dedup._dedup import (
    MAX_RESIZE,
    DedupResult,
    check_resize,
    dedup_report,
    run_dedup,
)
from retest.stages.dedup._inputs import (
    BASE_METRICS,
    SHORTLIST_METRICS,
    DedupInputs,
    gather_inputs,
    load_images,
)
from retest.stages.dedup._metrics import (
    DEDUP_METRICS,
    DEFAULT_EMBEDDER,
    DedupMetric,
    DedupOptions,
    MetricContext,
    Space,
    check_metric_names,
    metric_names,
)
from retest.stages.dedup._review_csv import (
    QUEUE_COLUMNS,
    ReviewFileResult,
    check_review_out,
    read_review_file,
    record_review_file,
    write_review_file,
)
from retest.stages.dedup._shortlist import (
    shortlist_chunk,
    shortlist_pairs,
)

__all__ = [
    "BASE_METRICS",
    "DEDUP_METRICS",
    "DEFAULT_EMBEDDER",
    "MAX_RESIZE",
    "QUEUE_COLUMNS",
    "SHORTLIST_METRICS",
    "DedupInputs",
    "DedupMetric",
    "DedupOptions",
    "DedupResult",
    "MetricContext",
    "ReviewFileResult",
    "Space",
    "check_metric_names",
    "check_resize",
    "check_review_out",
    "dedup_report",
    "gather_inputs",
    "load_images",
    "metric_names",
    "read_review_file",
    "record_review_file",
    "run_dedup",
    "shortlist_chunk",
    "shortlist_pairs",
    "write_review_file",
]
