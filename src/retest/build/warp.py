"""Squared L2 up to small geometric jitter, for re-ranking kNN shortlists.

Pixel L2 punishes a 1-px rescale or a sub-pixel shift as much as a different
object: on 28×28 Fashion-MNIST a ±1 px rescale moves an image further (L2 ≈ 1e6)
than many genuinely different training images lie from it. ``warp`` distance is
``min_w ‖w(x) − y‖²`` over a small grid ``w`` of axis-aligned warps of the query —
per-axis scale changes of up to ``max_scale_px`` pixels (about the image centre)
combined with shifts of up to ``max_shift_px`` in ``shift_step`` steps — with
bilinear resampling. It covers small shifts, rescales and one-axis stretches;
it never turns or flips an image, so a 90° rotation stays a different pose
(SPEC §4.1). Like DSSIM it is computed on the shortlists of other metrics.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._progress import ProgressCallback, report
from retest.errors import ConfigError, InputValidationError

__all__ = ["warp_grid", "warped_sqdist_pairs"]


def warp_grid(
    shape: tuple[int, int],
    *,
    max_scale_px: int = 1,
    max_shift_px: float = 1.0,
    shift_step: float = 0.5,
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """Per-axis (scale, shift) settings for y and for x; the warps are all pairs."""
    if max_scale_px < 0 or max_shift_px < 0 or shift_step <= 0:
        raise ConfigError(
            "warp grid needs max_scale_px ≥ 0, max_shift_px ≥ 0 and shift_step > 0. "
            f"Got {max_scale_px}, {max_shift_px}, {shift_step}."
        )
    n_steps = round(max_shift_px / shift_step)
    shifts = [i * shift_step for i in range(-n_steps, n_steps + 1)]
    return tuple(  # type: ignore[return-value]
        [
            ((n + d) / n, t)
            for d in range(-max_scale_px, max_scale_px + 1)
            for t in shifts
        ]
        for n in shape
    )


def _axis_matrix(n: int, scale: float, shift: float) -> NDArray[np.float64]:
    """Bilinear resampling along one axis as an (n, n) matrix (edges clamped).

    Output ``o`` reads input ``(o − centre − shift) / scale + centre``; equals
    ``scipy.ndimage.affine_transform(order=1, mode="nearest")`` along that axis.
    """
    c = (n - 1) / 2.0
    pos = np.clip((np.arange(n) - c - shift) / scale + c, 0.0, n - 1.0)
    lo = np.minimum(np.floor(pos).astype(np.intp), n - 1)
    hi = np.minimum(lo + 1, n - 1)
    frac = pos - lo
    m = np.zeros((n, n))
    np.add.at(m, (np.arange(n), lo), 1.0 - frac)
    np.add.at(m, (np.arange(n), hi), frac)
    return m


def _warps(
    img: NDArray[np.float64], ay: NDArray[np.float64], ax: NDArray[np.float64]
) -> NDArray[np.float64]:
    """All warps of one (H, W, C) image, flattened: (len(ay)·len(ax), H·W·C).

    The warps are separable (per-axis scale and shift): warp (a, b) is
    ``A_y[a] · X · A_x[b]ᵀ`` per channel, with small resampling matrices.
    """
    rows = np.einsum("ayh,hwc->aywc", ay, img)
    return np.einsum("bxw,aywc->abyxc", ax, rows).reshape(ay.shape[0] * ax.shape[0], -1)


def warped_sqdist_pairs(
    queries: ArrayLike,
    references: ArrayLike,
    qi: ArrayLike,
    ri: ArrayLike,
    *,
    max_scale_px: int = 1,
    max_shift_px: float = 1.0,
    shift_step: float = 0.5,
    progress: ProgressCallback | None = None,
) -> NDArray[np.float64]:
    """``min_w ‖w(queries[qi]) − references[ri]‖²`` per pair (float64).

    Parameters
    ----------
    queries, references : arrays of shape (n, H, W) or (n, H, W, C), same H, W, C
    qi, ri : int arrays of equal length
        The pairs, e.g. each query with its kNN shortlist. Pairs are grouped by
        query internally, so each query's warps are computed once.
    max_scale_px, max_shift_px, shift_step
        The warp grid (see :func:`warp_grid`); the defaults give 225 warps.
    """
    q = _as_hwc(queries, "queries")
    r = _as_hwc(references, "references")
    if q.shape[1:] != r.shape[1:]:
        raise InputValidationError(
            f"queries {q.shape[1:]} and references {r.shape[1:]} differ in size; "
            "resize both sides to one size first."
        )
    qa = np.asarray(qi, dtype=np.intp).ravel()
    ra = np.asarray(ri, dtype=np.intp).ravel()
    if qa.shape != ra.shape:
        raise InputValidationError(
            f"qi and ri must pair up: {qa.size} query indices, {ra.size} reference indices."
        )
    gy, gx = warp_grid(
        q.shape[1:3],
        max_scale_px=max_scale_px,
        max_shift_px=max_shift_px,
        shift_step=shift_step,
    )
    ay = np.stack([_axis_matrix(q.shape[1], s, t) for s, t in gy])
    ax = np.stack([_axis_matrix(q.shape[2], s, t) for s, t in gx])
    out = np.empty(qa.size)
    order = np.argsort(qa, kind="stable")
    bounds = np.flatnonzero(np.diff(qa[order])) + 1
    groups = np.split(order, bounds) if qa.size else []
    for g_no, sel in enumerate(groups):
        wq = _warps(q[qa[sel[0]]].astype(np.float64), ay, ax)
        refs = r[ra[sel]].reshape(sel.size, -1).astype(np.float64)
        d = (
            np.einsum("ij,ij->i", wq, wq)[:, None]
            + np.einsum("ij,ij->i", refs, refs)[None, :]
            - 2.0 * (wq @ refs.T)
        )
        out[sel] = np.maximum(d.min(axis=0), 0.0)
        report(progress, "warp", g_no + 1, len(groups))
    return out


def _as_hwc(images: ArrayLike, name: str) -> NDArray[np.generic]:
    a = np.asarray(images)
    if a.ndim == 3:
        a = a[..., None]
    if a.ndim != 4 or a.dtype.kind not in "uif":
        raise InputValidationError(
            f"{name} must be numeric images of shape (n, H, W[, C]). Got {a.dtype} {a.shape}."
        )
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        raise InputValidationError(f"{name} contain NaN or infinite pixels.")
    return a
