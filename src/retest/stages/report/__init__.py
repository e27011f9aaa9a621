"""What people read: comparison tables, fit summaries, figures and contact sheets."""

from __future__ import annotations

from retest.stages.report._contact_sheet import (
    save_contact_sheet,
)
from retest.stages.report._report import (
    FIGURE_FORMATS,
    PAPER_COLUMNS,
    paper_rows,
    save_figure,
    table_to_csv,
    table_to_json,
    table_to_latex,
    table_to_markdown,
    write_report,
)

__all__ = [
    "FIGURE_FORMATS",
    "PAPER_COLUMNS",
    "paper_rows",
    "save_contact_sheet",
    "save_figure",
    "table_to_csv",
    "table_to_json",
    "table_to_latex",
    "table_to_markdown",
    "write_report",
]
