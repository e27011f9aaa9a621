"""The original-vs-new accuracy figure (paper Fig. 1/2): the only matplotlib user here.

matplotlib is imported lazily inside the function and only the object API
(:class:`matplotlib.figure.Figure`) is used, so no global pyplot state or GUI
backend is involved. Saving is the caller's job (``pipeline.report`` writes it
atomically).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from retest.errors import InputValidationError
from retest.evaluate.fits import AXES, LinearFit, to_axis
from retest.evaluate.table import ComparisonTable

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["figure_bytes", "plot_comparison"]

_TICKS = np.array(
    [0.1, 0.5, 1, 2, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 98, 99, 99.5, 99.9]
)


def _tick_positions(
    lo: float, hi: float, axes: str
) -> tuple[NDArray[np.float64], list[str]]:
    vals = _TICKS[
        (_TICKS / 100 >= AXES.get(axes).inverse(np.array(lo)))
        & (_TICKS / 100 <= AXES.get(axes).inverse(np.array(hi)))
    ]
    return to_axis(vals / 100, axes), [f"{v:g}" for v in vals]


def plot_comparison(
    table: ComparisonTable,
    fit: LinearFit | None = None,
    *,
    axes: str | None = None,
    label_models: Sequence[str] = (),
    title: str | None = None,
    figsize: tuple[float, float] = (6.0, 6.0),
) -> Figure:
    """Scatter of new vs original accuracy with CP error bars, y = x and the fit.

    Parameters
    ----------
    table : ComparisonTable
        One point per row; error bars are the rows' confidence intervals.
    fit : LinearFit, optional
        Drawn as a line with its shaded pointwise bootstrap band.
    axes : {"linear", "probit", "logit"}, optional
        Axis scale; default the fit's scale (or linear). Probit/logit axes keep
        tick labels at accuracy values (percent).
    label_models : sequence of str
        Models to annotate with their names.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure

    scale = axes or (fit.axes if fit is not None else "linear")
    AXES.get(scale)
    if fit is not None and fit.axes != scale:
        raise InputValidationError(
            f"the fit is on {fit.axes!r} axes but the plot was asked for {scale!r}."
        )
    unknown = sorted(set(label_models) - set(table.models))
    if unknown:
        raise InputValidationError(
            f"cannot label models not in the table: {', '.join(unknown)}."
        )
    col = table.column
    n_o, n_n = col("orig_n"), col("new_n")
    x = to_axis(col("orig_acc"), scale, n=n_o)
    y = to_axis(col("new_acc"), scale, n=n_n)
    xl, xh = (
        to_axis(col("orig_lo"), scale, n=n_o),
        to_axis(col("orig_hi"), scale, n=n_o),
    )
    yl, yh = to_axis(col("new_lo"), scale, n=n_n), to_axis(col("new_hi"), scale, n=n_n)

    fig = Figure(figsize=figsize, layout="constrained")
    ax = fig.add_subplot()
    lo = float(min(xl.min(), yl.min()))
    hi = float(max(xh.max(), yh.max()))
    pad = 0.05 * (hi - lo or 1.0)
    lo, hi = lo - pad, hi + pad
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="Ideal reproducibility (y = x)")
    if fit is not None:
        gx = np.linspace(float(xl.min()) - pad, float(xh.max()) + pad, 60)
        band_lo, band_hi = fit.band(gx)
        ax.fill_between(
            gx,
            band_lo,
            band_hi,
            color="C1",
            alpha=0.25,
            lw=0,
            label=f"{100 * fit.confidence:g}% bootstrap band",
        )
        ax.plot(
            gx,
            fit.slope * gx + fit.intercept,
            color="C1",
            lw=1.5,
            label=f"Linear fit: {fit.equation()}",
        )
    ax.errorbar(
        x,
        y,
        xerr=[x - xl, xh - x],
        yerr=[y - yl, yh - y],
        fmt="o",
        ms=4,
        color="C0",
        ecolor="C0",
        elinewidth=0.8,
        capsize=0,
        label=f"Model accuracy ({100 * table.confidence:g}% CP interval)",
    )
    for i, m in enumerate(table.models):
        if m in label_models:
            ax.annotate(
                m, (x[i], y[i]), xytext=(4, -10), textcoords="offset points", fontsize=8
            )
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    if scale != "linear":
        pos, labels = _tick_positions(lo, hi, scale)
        ax.set_xticks(pos, labels)
        ax.set_yticks(pos, labels)
    unit = "" if scale == "linear" else f", {scale} scale"
    ax.set_xlabel(f"{table.dataset_orig} {table.metric} accuracy (%{unit})")
    ax.set_ylabel(f"{table.dataset_new} {table.metric} accuracy (%{unit})")
    ax.grid(True, lw=0.3, alpha=0.5)
    ax.legend(loc="upper left", fontsize=8)
    if title:
        ax.set_title(title)
    return fig


def figure_bytes(fig: Figure, fmt: str, *, dpi: int = 150) -> bytes:
    """Render ``fig`` as ``fmt`` (png, svg, pdf) bytes, reproducibly.

    SVG element ids are seeded and PDF/SVG dates left out, so the same figure
    gives the same bytes on every run.
    """
    import io

    import matplotlib

    buf = io.BytesIO()
    meta = {"Date": None} if fmt in ("svg", "pdf") else {}
    with matplotlib.rc_context({"svg.hashsalt": "retest"}):
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta)
    return buf.getvalue()
