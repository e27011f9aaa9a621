"""The ``export`` stage: a revision released as a dataset with a manifest."""

from __future__ import annotations

from retest.stages.export._export import (
    EXPORT_FORMATS,
    ExportFormat,
    ExportResult,
    check_exportable,
    clean_leftovers,
    export_revision,
    is_export_folder,
    verified_pixels,
)

__all__ = [
    "EXPORT_FORMATS",
    "ExportFormat",
    "ExportResult",
    "check_exportable",
    "clean_leftovers",
    "export_revision",
    "is_export_folder",
    "verified_pixels",
]
