"""Linear fits of new vs original accuracy, with a pairs bootstrap over models.

OLS of the new accuracy on the original one (docs/algorithms.md#linear-fit) on one of
three axis scales: ``linear`` (percent, the paper's 1.69·x − 72.7), ``probit``
(``Φ⁻¹(fraction)``, App. C.2) or ``logit``. Confidence intervals come from a pairs
bootstrap: models are resampled with replacement, 100,000 times by default,
fully vectorised: a block of 8,192 resamples is an index matrix of shape
(B, M); the centred values are gathered and the OLS sums Σx, Σy, Σx², Σxy are
row sums, so no Python loop runs per resample.

Accuracies of exactly 0 or 1 have no probit/logit value. With the number of
examples ``n`` known they become ``(k + 0.5) / (n + 1)`` (a continuity
correction that moves them half an example inwards); without ``n`` they are
clipped to ``[1e-6, 1 − 1e-6]``. Linear axes never clamp.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from retest._progress import ProgressCallback, report
from retest._validation import (
    RandomStateLike,
    check_fraction,
    check_n_boot,
    check_random_state,
)
from retest.errors import InputValidationError
from retest.registry import Registry

__all__ = [
    "AXES",
    "FEW_MODELS",
    "WIDE_SLOPE_INTERVAL",
    "Axis",
    "LinearFit",
    "bootstrap_lines",
    "fit_new_vs_orig",
    "linear_fit",
    "ols",
    "quantile_band",
    "to_axis",
]

FloatArray: TypeAlias = NDArray[np.float64]
_CHUNK = 8192  # resamples per block: fixed so results never depend on memory
_EPS = 1e-6


FEW_MODELS = 10
"""Fits on fewer models carry a caveat (:meth:`LinearFit.caveat`)."""
WIDE_SLOPE_INTERVAL = 0.5
"""A slope interval wider than this carries a caveat."""


@dataclass(frozen=True, slots=True)
class Axis:
    """An axis scale: ``forward`` maps accuracy fractions to the fit domain."""

    name: str
    forward: Callable[[FloatArray], FloatArray]
    inverse: Callable[[FloatArray], FloatArray]
    clamps: bool
    label: str


def _pct(p: FloatArray) -> FloatArray:
    return np.asarray(p, dtype=np.float64) * 100.0


def _unpct(z: FloatArray) -> FloatArray:
    return np.asarray(z, dtype=np.float64) / 100.0


AXES: Registry[Axis] = Registry("axis scale")
AXES.add("linear", Axis("linear", _pct, _unpct, False, "accuracy (%)"))
AXES.add("probit", Axis("probit", special.ndtri, special.ndtr, True, "Φ⁻¹(acc)"))
AXES.add("logit", Axis("logit", special.logit, special.expit, True, "logit(acc)"))


def to_axis(
    acc: ArrayLike, axes: str = "linear", *, n: ArrayLike | None = None
) -> FloatArray:
    """Map accuracy fractions to the fit domain of ``axes``, clamping 0 and 1.

    Examples
    --------
    >>> to_axis([0.5, 0.9], "linear").tolist()
    [50.0, 90.0]
    >>> float(to_axis(1.0, "probit", n=99)) == float(special.ndtri(99.5 / 100))
    True
    """
    ax = AXES.get(axes)
    p = np.asarray(acc, dtype=np.float64)
    if not np.all(np.isfinite(p)) or (p < 0).any() or (p > 1).any():
        raise InputValidationError(
            f"accuracies must be fractions in [0, 1]. Got min {np.nanmin(p):g}, "
            f"max {np.nanmax(p):g}."
        )
    if ax.clamps:
        if n is not None:
            nn = np.broadcast_to(np.asarray(n, dtype=np.float64), p.shape)
            k = np.round(p * nn)
            edge = (k == 0) | (k == nn)
            p = np.where(edge, (k + 0.5) / (nn + 1), p)
        p = np.clip(p, _EPS, 1 - _EPS)
    return np.asarray(ax.forward(p), dtype=np.float64)


def ols(x: ArrayLike, y: ArrayLike) -> tuple[float, float, float]:
    """Ordinary least squares ``y ≈ slope·x + intercept``; returns (slope, intercept, R²)."""
    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    xc, yc = xa - xa.mean(), ya - ya.mean()
    sxx = float(xc @ xc)
    if sxx <= 0:
        raise InputValidationError(
            "a fit needs at least two different original accuracies. "
            f"Got all equal to {xa[0]:g}."
        )
    slope = float(xc @ yc) / sxx
    intercept = float(ya.mean() - slope * xa.mean())
    sst = float(yc @ yc)
    res = ya - (slope * xa + intercept)
    r2 = 1.0 - float(res @ res) / sst if sst > 0 else 1.0
    return slope, intercept, r2


def bootstrap_lines(
    x: ArrayLike,
    y: ArrayLike,
    *,
    n_boot: int = 100_000,
    random_state: RandomStateLike = 0,
    progress: ProgressCallback | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Slopes and intercepts of OLS fits on ``n_boot`` pairs-bootstrap resamples.

    Resamples in which every drawn model has the same ``x`` (possible with very
    few models) have no OLS line and are left out, so the arrays may be shorter
    than ``n_boot``.

    Returns
    -------
    slopes, intercepts : ndarray of float64 of shape (n_used,)
    """
    n_boot = check_n_boot(n_boot)
    rng = check_random_state(random_state)
    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    m = xa.shape[0]
    # Centring keeps the normal equations well conditioned (percent axes ~ 90 ± 5).
    mx, my = xa.mean(), ya.mean()
    xc, yc = xa - mx, ya - my
    tol = 1e-10 * float(xc @ xc) * m
    slopes, inters = [], []
    done = 0
    while done < n_boot:
        b = min(_CHUNK, n_boot - done)
        idx = rng.integers(0, m, size=(b, m))
        # Gathering the resampled values and summing rows measured faster than a
        # (B, M) count matrix times the feature matrix (benchmarks/bench_fits.py).
        xs, ys = xc[idx], yc[idx]
        sx, sy = xs.sum(axis=1), ys.sum(axis=1)
        ys *= xs
        xs *= xs
        sxx, sxy = xs.sum(axis=1), ys.sum(axis=1)
        den = m * sxx - sx * sx
        ok = den > tol
        a = (m * sxy[ok] - sx[ok] * sy[ok]) / den[ok]
        c = (sy[ok] - a * sx[ok]) / m
        slopes.append(a)
        inters.append(c + my - a * mx)
        done += b
        report(progress, "bootstrap", done, n_boot)
    return np.concatenate(slopes), np.concatenate(inters)


def _quantile_rows(values: FloatArray, q: float) -> FloatArray:
    """``np.quantile(values, q, axis=1)`` (linear method) via one partition."""
    n = values.shape[1]
    h = q * (n - 1)
    k = int(np.floor(h))
    frac = h - k
    if k + 1 >= n:
        return np.asarray(values.max(axis=1))
    part = np.partition(values, k + 1, axis=1)
    lo = part[:, : k + 1].max(axis=1)
    hi = part[:, k + 1]
    return np.asarray(lo + frac * (hi - lo))


def quantile_band(
    slopes: FloatArray,
    intercepts: FloatArray,
    xs: ArrayLike,
    *,
    confidence: float = 0.95,
) -> tuple[FloatArray, FloatArray]:
    """Pointwise ``confidence`` band of the bootstrap lines at ``xs`` (fit domain)."""
    x = np.atleast_1d(np.asarray(xs, dtype=np.float64))
    alpha = 1.0 - check_fraction(confidence, "confidence", closed="neither")
    lo, hi = np.empty(x.shape[0]), np.empty(x.shape[0])
    step = max(1, 2_000_000 // max(1, slopes.shape[0]))
    for s in range(0, x.shape[0], step):
        lines = x[s : s + step, None] * slopes[None, :] + intercepts[None, :]
        lo[s : s + step] = _quantile_rows(lines, alpha / 2)
        hi[s : s + step] = _quantile_rows(lines, 1 - alpha / 2)
    return lo, hi


@dataclass(frozen=True, slots=True)
class LinearFit:
    """OLS fit of new vs original accuracy on one axis scale, with bootstrap intervals.

    ``x``, ``y``, ``residual``, ``grid`` and the band are in the fit domain
    (percent on linear axes); ``residual_points`` is the residual expressed in
    accuracy points (percent) on every axis: ``100·(new − fit⁻¹(a·x + b))``.
    """

    axes: str
    names: tuple[str, ...]
    slope: float
    intercept: float
    r2: float
    slope_ci: tuple[float, float]
    intercept_ci: tuple[float, float]
    confidence: float
    n_boot: int
    n_boot_used: int
    x: FloatArray = field(repr=False)
    y: FloatArray = field(repr=False)
    residual: FloatArray = field(repr=False)
    residual_points: FloatArray = field(repr=False)
    inside_band: NDArray[np.bool_] = field(repr=False)
    grid: FloatArray = field(repr=False)
    band_lo: FloatArray = field(repr=False)
    band_hi: FloatArray = field(repr=False)
    boot_slopes: FloatArray = field(repr=False)
    boot_intercepts: FloatArray = field(repr=False)

    def predict(self, acc: ArrayLike) -> FloatArray:
        """Predicted new accuracy (fraction) for original accuracies ``acc`` (fractions)."""
        ax = AXES.get(self.axes)
        z = to_axis(acc, self.axes)
        return np.asarray(ax.inverse(self.slope * z + self.intercept))

    def band(self, xs: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """Pointwise band at fit-domain positions ``xs`` (same domain as ``grid``)."""
        return quantile_band(
            self.boot_slopes, self.boot_intercepts, xs, confidence=self.confidence
        )

    def equation(self) -> str:
        """The fitted line as text, e.g. ``new = 1.69·orig − 72.7``."""
        sign = "−" if self.intercept < 0 else "+"
        digits = 1 if self.axes == "linear" else 3
        return (
            f"new = {self.slope:.2f}·orig {sign} {abs(self.intercept):.{digits}f}"
            + ("" if self.axes == "linear" else f" ({self.axes} axes)")
        )

    def caveat(self) -> str | None:
        """Why the slope should not be read yet, or None.

        Fewer than :data:`FEW_MODELS` models, or a slope interval wider than
        :data:`WIDE_SLOPE_INTERVAL`: the interval then holds both "no change" (1)
        and a large drop growing with accuracy, so the fit tells neither.

        >>> f = fit_new_vs_orig([0.6, 0.7, 0.8], [0.5, 0.65, 0.7], n_boot=200)
        >>> f.caveat().startswith("the fit rests on 3 models")
        True
        """
        lo, hi = self.slope_ci
        n = len(self.names)
        if n >= FEW_MODELS and hi - lo <= WIDE_SLOPE_INTERVAL:
            return None
        return (
            f"the fit rests on {n} models and its slope interval [{lo:.2f}, {hi:.2f}] "
            f"is {hi - lo:.2f} wide: too few or too spread models to read the slope; "
            f"evaluate more models (e.g. --preset full) before drawing conclusions"
        )

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (no bootstrap arrays)."""
        return {
            "axes": self.axes,
            "equation": self.equation(),
            "slope": self.slope,
            "intercept": self.intercept,
            "slope_ci": list(self.slope_ci),
            "intercept_ci": list(self.intercept_ci),
            "r2": self.r2,
            "confidence": self.confidence,
            "n_models": len(self.names),
            "n_boot": self.n_boot,
            "n_boot_used": self.n_boot_used,
            "models": [
                {
                    "model": m,
                    "x": float(self.x[i]),
                    "y": float(self.y[i]),
                    "residual": float(self.residual[i]),
                    "residual_points": float(self.residual_points[i]),
                    "inside_band": bool(self.inside_band[i]),
                }
                for i, m in enumerate(self.names)
            ],
        }


def fit_new_vs_orig(
    orig: ArrayLike,
    new: ArrayLike,
    *,
    names: Sequence[str] | None = None,
    axes: str = "linear",
    n_orig: ArrayLike | None = None,
    n_new: ArrayLike | None = None,
    n_boot: int = 100_000,
    confidence: float = 0.95,
    x_range: tuple[float, float] | None = None,
    n_grid: int = 100,
    random_state: RandomStateLike = 0,
    progress: ProgressCallback | None = None,
) -> LinearFit:
    """Fit new vs original accuracy over models, with a pairs-bootstrap interval
    (public as ``retest.linear_fit``).

    Ordinary least squares of the new accuracy on the original one, on percent
    (``linear``), probit or logit axes; models are resampled with replacement
    ``n_boot`` times for the intervals of slope and intercept and a pointwise
    band.

    Parameters
    ----------
    orig, new : array-like of shape (n_models,)
        Accuracies as fractions in [0, 1], one pair per model.
    names : sequence of str, optional
        Model names (default ``model_0``, ...).
    axes : {"linear", "probit", "logit"}
        Axis scale of the fit (see :data:`AXES`).
    n_orig, n_new : array-like of int, optional
        Test-set sizes; on probit/logit axes an accuracy of exactly 0 or 1 becomes
        ``(k + 0.5) / (n + 1)``.
    n_boot : int
        Pairs-bootstrap resamples (models drawn with replacement).
    confidence : float
        Level of the slope/intercept percentile intervals and of the pointwise band.
    x_range : (float, float), optional
        Original-accuracy range (fractions) of the band grid; default: the data range.
    n_grid : int
        Points of the band grid.
    random_state : int or numpy.random.Generator
        Seed; same inputs and seed give identical results.
    progress : ProgressCallback, optional
        Called as the bootstrap advances.

    Returns
    -------
    LinearFit
        ``slope``, ``intercept``, ``r2``, ``slope_ci``, ``intercept_ci``,
        per-model ``residual_points`` (effective robustness, in points),
        ``predict()`` and ``equation()``.

    Raises
    ------
    InputValidationError
        Fewer than 3 models, lengths that differ, accuracies outside [0, 1] or
        all original accuracies equal.

    Examples
    --------
    >>> from retest import linear_fit
    >>> fit = linear_fit([0.80, 0.85, 0.90, 0.95], [0.70, 0.78, 0.86, 0.94], n_boot=1000)
    >>> round(fit.slope, 2), round(fit.intercept, 1), fit.equation()
    (1.6, -58.0, 'new = 1.60·orig − 58.0')
    """
    o = np.asarray(orig, dtype=np.float64).ravel()
    nw = np.asarray(new, dtype=np.float64).ravel()
    labels = (
        tuple(names)
        if names is not None
        else tuple(f"model_{i}" for i in range(o.size))
    )
    if o.shape != nw.shape or len(labels) != o.size:
        raise InputValidationError(
            f"fit needs one original and one new accuracy per model. Got {o.size} "
            f"original, {nw.size} new and {len(labels)} names."
        )
    if o.size < 3:
        raise InputValidationError(
            f"a linear fit needs at least 3 models. Got {o.size} "
            f"({', '.join(labels) or 'none'}); add models or skip the fit."
        )
    conf = check_fraction(confidence, "confidence", closed="neither")
    ax = AXES.get(axes)
    x, y = to_axis(o, axes, n=n_orig), to_axis(nw, axes, n=n_new)
    slope, intercept, r2 = ols(x, y)
    bs, bi = bootstrap_lines(
        x, y, n_boot=n_boot, random_state=random_state, progress=progress
    )
    alpha = 1.0 - conf
    q = [100 * alpha / 2, 100 * (1 - alpha / 2)]
    s_lo, s_hi = np.percentile(bs, q)
    i_lo, i_hi = np.percentile(bi, q)
    lo_x, hi_x = x_range if x_range is not None else (float(o.min()), float(o.max()))
    g_lo, g_hi = to_axis(np.array([lo_x, hi_x]), axes)
    grid = np.linspace(g_lo, g_hi, int(n_grid))
    band = quantile_band(bs, bi, np.concatenate([grid, x]), confidence=conf)
    fitted = slope * x + intercept
    residual = y - fitted
    return LinearFit(
        axes=axes,
        names=labels,
        slope=slope,
        intercept=intercept,
        r2=r2,
        slope_ci=(float(s_lo), float(s_hi)),
        intercept_ci=(float(i_lo), float(i_hi)),
        confidence=conf,
        n_boot=int(n_boot),
        n_boot_used=int(bs.size),
        x=x,
        y=y,
        residual=residual,
        residual_points=100.0 * (nw - np.asarray(ax.inverse(fitted))),
        inside_band=(y >= band[0][grid.size :]) & (y <= band[1][grid.size :]),
        grid=grid,
        band_lo=band[0][: grid.size],
        band_hi=band[1][: grid.size],
        boot_slopes=bs,
        boot_intercepts=bi,
    )


#: The public name of :func:`fit_new_vs_orig` (``retest.linear_fit``).
linear_fit = fit_new_vs_orig
