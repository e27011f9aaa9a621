"""Write a comparison table, its fit summary and the figure to files.

Formats: Markdown in the paper's layout (``88.5 [87.9, 89.2]`` cells, one
decimal), LaTeX (same layout, booktabs), CSV and JSON with full precision
(fractions, exact counts, gap interval, error ratio), ``fit.json`` with the fit
summary, and the figure as PNG/SVG/PDF. Every file is written atomically, so a
re-run replaces complete files only.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retest._atomic import atomic_write_bytes
from retest.errors import ConfigError
from retest.evaluate.fits import LinearFit
from retest.evaluate.table import ComparisonRow, ComparisonTable

if TYPE_CHECKING:
    # Typing only; pipeline reporting is allowed matplotlib (see the ruff ban).
    from matplotlib.figure import Figure  # noqa: TID251


__all__ = [
    "FIGURE_FORMATS",
    "PAPER_COLUMNS",
    "paper_rows",
    "save_figure",
    "table_to_csv",
    "table_to_json",
    "table_to_latex",
    "table_to_markdown",
    "write_report",
]

PAPER_COLUMNS = (
    "Model",
    "Orig. Accuracy",
    "New Accuracy",
    "Gap",
    "Orig. Rank",
    "New Rank",
    "Δ Rank",
)
FIGURE_FORMATS = ("png", "svg", "pdf")


def _cell(value: float, lo: float, hi: float) -> str:
    return f"{100 * value:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


def _paper_row(r: ComparisonRow) -> list[str]:
    return [
        r.model,
        _cell(r.orig.value, r.orig.lo, r.orig.hi),
        _cell(r.new.value, r.new.lo, r.new.hi),
        f"{100 * r.gap:.1f}",
        str(r.rank_orig),
        str(r.rank_new),
        str(r.rank_delta),
    ]


def paper_rows(table: ComparisonTable) -> list[list[str]]:
    """Rows of :data:`PAPER_COLUMNS` as formatted strings (percent, one decimal)."""
    return [_paper_row(r) for r in table.rows]


def table_to_markdown(table: ComparisonTable) -> str:
    """The table as GitHub Markdown in the paper's layout."""
    align = [":---", "---:", "---:", "---:", "---:", "---:", "---:"]
    lines = [
        "| " + " | ".join(PAPER_COLUMNS) + " |",
        "| " + " | ".join(align) + " |",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in paper_rows(table)]
    conf = f"{100 * table.confidence:g}%"
    note = (
        f"\n{table.metric} accuracy (%) on {table.dataset_orig} (original) and "
        f"{table.dataset_new} (new), {conf} Clopper-Pearson intervals; "
        "gap = original − new; Δ Rank = original rank − new rank (negative = dropped)."
    )
    if table.dropped:
        note += f" Dropped (one test set only): {', '.join(table.dropped)}."
    return "\n".join(lines) + "\n" + note + "\n"


_LATEX = {
    "\\": r"\textbackslash{}",
    "_": r"\_",
    "%": r"\%",
    "&": r"\&",
    "#": r"\#",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
}


def _latex_escape(s: str) -> str:
    return "".join(_LATEX.get(ch, ch) for ch in s)


def table_to_latex(table: ComparisonTable) -> str:
    """The table as a LaTeX ``tabular`` (booktabs) in the paper's layout."""
    head = [c.replace("Δ", r"$\Delta$") for c in PAPER_COLUMNS]
    out = [
        r"\begin{tabular}{lrrrrrr}",
        r"\toprule",
        " & ".join(head) + r" \\",
        r"\midrule",
    ]
    for row in paper_rows(table):
        out.append(" & ".join(_latex_escape(c) for c in row) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(out) + "\n"


def table_to_csv(table: ComparisonTable) -> str:
    """All columns at full precision (accuracies as fractions), one row per model."""
    recs = table.to_records()
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(recs[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(recs)
    return buf.getvalue()


def table_to_json(table: ComparisonTable) -> dict[str, Any]:
    """JSON-ready dict: metadata plus :meth:`ComparisonRow.as_dict` rows."""
    return {
        "metric": table.metric,
        "confidence": table.confidence,
        "interval": "clopper-pearson",
        "gap_interval": "newcombe-hybrid",
        "dataset_orig": table.dataset_orig,
        "dataset_new": table.dataset_new,
        "dropped": list(table.dropped),
        "rows": table.to_records(),
    }


def _json_bytes(obj: Any) -> bytes:
    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        return v

    return (json.dumps(clean(obj), indent=2, ensure_ascii=False) + "\n").encode()


def save_figure(fig: Figure, path: str | os.PathLike[str]) -> Path:
    """Save ``fig`` atomically; the format follows the suffix (png, svg, pdf)."""
    p = Path(path)
    fmt = p.suffix.lstrip(".").lower()
    if fmt not in FIGURE_FORMATS:
        raise ConfigError(
            f"figure format must be one of {', '.join(FIGURE_FORMATS)}. Got {fmt!r}."
        )
    from retest.evaluate.plots import figure_bytes

    return atomic_write_bytes(p, figure_bytes(fig, fmt))


def write_report(
    table: ComparisonTable,
    fit: LinearFit | None,
    out_dir: str | os.PathLike[str],
    *,
    label_models: Sequence[str] = (),
    figure_formats: Sequence[str] = ("png", "pdf"),
    stem: str = "comparison",
) -> dict[str, Path]:
    """Write ``<stem>.{md,csv,tex,json}``, ``fit.json`` and the figure files.

    Returns
    -------
    dict
        Kind (``"markdown"``, ``"csv"``, ``"latex"``, ``"json"``, ``"fit"``,
        ``"png"``, ...) → written path.
    """
    out = Path(out_dir)
    paths = {
        "markdown": atomic_write_bytes(
            out / f"{stem}.md", table_to_markdown(table).encode()
        ),
        "csv": atomic_write_bytes(out / f"{stem}.csv", table_to_csv(table).encode()),
        "latex": atomic_write_bytes(
            out / f"{stem}.tex", table_to_latex(table).encode()
        ),
        "json": atomic_write_bytes(
            out / f"{stem}.json", _json_bytes(table_to_json(table))
        ),
    }
    if fit is not None:
        paths["fit"] = atomic_write_bytes(out / "fit.json", _json_bytes(fit.summary()))
    if figure_formats:
        from retest.evaluate.plots import plot_comparison

        fig = plot_comparison(table, fit, label_models=label_models)
        for fmt in figure_formats:
            paths[fmt] = save_figure(fig, out / f"{stem}.{fmt}")
    return paths
