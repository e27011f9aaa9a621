"""Squared L2 up to small geometric jitter, for re-ranking kNN shortlists.

Pixel L2 punishes a 1-px rescale or a sub-pixel shift as much as a different
object: on 28×28 Fashion-MNIST a ±1 px rescale moves an image further (L2 ≈ 1e6)
than many genuinely different training images lie from it. ``warp`` distance is
the smallest squared L2 between one image and a small axis-aligned warp of the
other, over a grid of warps — per-axis scale changes of up to ``max_scale_px``
pixels (about the image centre) combined with shifts of up to ``max_shift_px`` in
``shift_step`` steps — in both directions::

    warp(x, y) = min_w min(‖w(x) − y‖², ‖x − w(y)‖²)

Why both directions: a near-copy is a warp of its original, and resampling is
not invertible — un-scaling a copy blurs it a second time (on Fashion-MNIST a
top-left-anchored 29/28 upscale still leaves ≈ 4e5 after the best inverse warp,
but ≈ 40 when the original is warped forward), and either side may be the copy.
A top-left-anchored rescale ``n → n ± d`` is a centre rescale plus a shift of
``±d/2`` px, so with the default half-pixel steps it lies exactly on the grid.
Resampling is bilinear; a downscale (scale < 1) widens the triangle filter by
``1/scale`` and renormalises it at the borders, as PIL's ``BILINEAR`` resize
does (antialiasing), otherwise the borders are clamped. ``‖x − w(y)‖²`` needs no
warped copies of ``y``: the cross term is ``⟨wᵀ(x), y⟩`` with the adjoint warp of
``x``, and ``‖w(y)‖²`` is a per-reference quadratic form computed once.

It never turns or flips an image, so a 90° rotation stays a different pose
(docs/algorithms.md#what-is-a-near-duplicate). Like DSSIM it is computed on the
shortlists of other metrics.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest._progress import ProgressCallback, report
from retest._validation import check_image_batch
from retest.errors import ConfigError, InputValidationError

__all__ = ["WarpParams", "warp_grid", "warp_threshold", "warped_sqdist_pairs"]

"""Per-pixel RMS of the CIFAR-10.1 exclusion rule (plain L2 ≤ 1000 on 32×32×3)."""
_NORM_BLOCK = 256  # references per block when computing ‖w(y)‖²


@dataclass(frozen=True, slots=True)
class WarpParams:
    """Keyword arguments of :func:`warped_sqdist_pairs` (the warp grid, direction)."""

    max_scale_px: int = 1
    max_shift_px: float = 1.0
    shift_step: float = 0.5
    symmetric: bool = True


def warp_threshold(image_shape: tuple[int, ...] | list[int]) -> float:
    """Default ``warp`` review target for images of ``image_shape`` (H, W[, C]).

    The CIFAR-10.1 rule "nearest original at plain L2 ≤ 1000 on 32×32×3 raw
    pixels" squared and scaled by the number of pixel values, i.e. a per-pixel
    RMS difference of ``1000/√3072 ≈ 18``: ``1e6 · n / 3072``.

    It is the near-original threshold of the eligibility rule
    (:func:`retest.dedup.rules.near_original_threshold`), one definition.

    >>> warp_threshold((32, 32, 3))
    1000000.0
    >>> round(warp_threshold((28, 28)))
    255208
    """
    from retest.dedup.rules import near_original_threshold

    return near_original_threshold(image_shape)


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

    def axis(n: int) -> list[tuple[float, float]]:
        return [
            ((n + d) / n, t)
            for d in range(-max_scale_px, max_scale_px + 1)
            for t in shifts
        ]

    return axis(shape[0]), axis(shape[1])


def _axis_matrix(n: int, scale: float, shift: float) -> NDArray[np.float64]:
    """Bilinear resampling along one axis as an (n, n) matrix.

    Output ``o`` reads input ``p = (o − centre − shift) / scale + centre`` with
    weights ``tri((i − p) / f)``, ``f = max(1, 1/scale)``, renormalised over the
    pixels inside the image (PIL's ``BILINEAR``); where none is inside, the edge
    pixel. For ``scale ≥ 1`` this equals ``scipy.ndimage.affine_transform(order=1,
    mode="nearest")`` along that axis.
    """
    c = (n - 1) / 2.0
    f = max(1.0, 1.0 / scale)
    pos = (np.arange(n) - c - shift) / scale + c
    m = np.maximum(0.0, 1.0 - np.abs(np.arange(n)[None, :] - pos[:, None]) / f)
    total = m.sum(axis=1, keepdims=True)
    edge = np.clip(np.rint(pos), 0, n - 1).astype(np.intp)
    empty = total[:, 0] <= 0.0
    m[empty, edge[empty]] = 1.0
    total[empty] = 1.0
    m /= total
    return m


def _warps(
    img: NDArray[np.float64], ay: NDArray[np.float64], ax: NDArray[np.float64]
) -> NDArray[np.float64]:
    """All warps of one (H, W, C) image: (len(ay)·len(ax), W·H·C), pixels in
    (W, H, C) order — compare with :func:`_wh_order` references.

    The warps are separable (per-axis scale and shift): warp (a, b) is
    ``A_y[a] · X · A_x[b]ᵀ`` per channel, with small resampling matrices. Column
    resampling last, with (W, H, C) output, makes each warp a contiguous row of
    the product, so no (warps × pixels) transpose copy is needed.
    """
    (na, h, _), (nb, w, _), c = ay.shape, ax.shape, img.shape[2]
    rows = ay.reshape(na * h, -1) @ img.reshape(img.shape[0], -1)  # (a, h), (w', c)
    per_a = rows.reshape(na, h, -1, c).transpose(0, 2, 1, 3).reshape(na, -1, h * c)
    warped: NDArray[np.float64] = np.matmul(ax.reshape(nb * w, -1)[None], per_a)
    return warped.reshape(na * nb, -1)


def _wh_order(imgs: NDArray[np.generic]) -> NDArray[np.float64]:
    """(n, H, W, C) images as float64 rows in the (W, H, C) order of :func:`_warps`."""
    return np.ascontiguousarray(imgs.transpose(0, 2, 1, 3), dtype=np.float64).reshape(
        imgs.shape[0], -1
    )


def _warped_norms(
    imgs: NDArray[np.generic], ay: NDArray[np.float64], ax: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``‖A_y[a] · Y · A_x[b]ᵀ‖²`` per image, shape (len(ay)·len(ax), n).

    With ``G = AᵀA`` (banded: bilinear rows touch ≤ 3 neighbouring pixels) this is
    ``Σ_{δy,δx} Σ_{h,w} G_y[a,h,h+δy] G_x[b,w,w+δx] Σ_c Y[h,w,c] Y[h+δy,w+δx,c]``:
    the products of ``Y`` with its shifted copies (half of them: the ``(−δy, −δx)``
    term equals the ``(δy, δx)`` one), then two matrix products (over ``(δx, w)``
    and over ``(δy, h)``) for a block of images at once, instead of materialising
    every warp.
    """
    gy = np.matmul(ay.transpose(0, 2, 1), ay)
    gx = np.matmul(ax.transpose(0, 2, 1), ax)
    oy = range(-_band(gy), _band(gy) + 1)
    ox = range(-_band(gx), _band(gx) + 1)
    gy_cat = np.concatenate([_offset_diagonal(gy, d) for d in oy], axis=1)  # A, δy·H
    gx_cat = np.concatenate([_offset_diagonal(gx, d) for d in ox], axis=1).T  # δx·W, B
    n, h, w = imgs.shape[:3]
    out = np.empty((ay.shape[0], n, ax.shape[0]))
    for s in range(0, n, _NORM_BLOCK):
        y = np.ascontiguousarray(
            imgs[s : s + _NORM_BLOCK].transpose(3, 1, 0, 2), dtype=np.float64
        )  # c, h, n, w
        m = y.shape[2]
        z = np.zeros((len(oy), h, m, len(ox), w))
        y2 = 2.0 * y
        for iy, dy in enumerate(oy):
            for ix, dx in enumerate(ox):
                # the (−δy, −δx) term equals the (δy, δx) one (G symmetric): count
                # each pair once, doubled, and the (0, 0) term once
                if (dy, dx) > (0, 0):
                    _shifted_products(y, y2, dy, dx, out=z[iy, :, :, ix])
                elif (dy, dx) == (0, 0):
                    _shifted_products(y, y, 0, 0, out=z[iy, :, :, ix])
        u = z.reshape(-1, len(ox) * w) @ gx_cat  # (δy, h, n), b
        out[:, s : s + m] = (gy_cat @ u.reshape(len(oy) * h, -1)).reshape(
            -1, m, ax.shape[0]
        )
    return out.transpose(0, 2, 1).reshape(ay.shape[0] * ax.shape[0], n)


def _shifted_products(
    y: NDArray[np.float64],
    v: NDArray[np.float64],
    dy: int,
    dx: int,
    *,
    out: NDArray[np.float64],
) -> None:
    """``out[h, n, w] = Σ_c y[c, h, n, w] · v[c, h + dy, n, w + dx]`` (0 outside)."""
    h, w = y.shape[1], y.shape[3]
    hs = slice(max(0, -dy), h - max(0, dy))
    ws = slice(max(0, -dx), w - max(0, dx))
    hs2 = slice(hs.start + dy, hs.stop + dy)
    ws2 = slice(ws.start + dx, ws.stop + dx)
    acc = out[hs, :, ws]  # a view: written in place
    np.multiply(y[0, hs, :, ws], v[0, hs2, :, ws2], out=acc)
    if y.shape[0] > 1:
        tmp = np.empty_like(acc)
        for c in range(1, y.shape[0]):
            acc += np.multiply(y[c, hs, :, ws], v[c, hs2, :, ws2], out=tmp)


def _band(g: NDArray[np.float64]) -> int:
    """Largest ``|i − j|`` with a non-zero ``g[·, i, j]``."""
    i, j = np.nonzero(np.abs(g).max(axis=0))
    return int(np.abs(i - j).max()) if i.size else 0


def _offset_diagonal(g: NDArray[np.float64], d: int) -> NDArray[np.float64]:
    """``out[a, h] = g[a, h, h + d]`` (0 where ``h + d`` is outside)."""
    n = g.shape[1]
    out = np.zeros(g.shape[:2])
    h = np.arange(max(0, -d), n - max(0, d))
    out[:, h] = g[:, h, h + d]
    return out


def warped_sqdist_pairs(
    queries: ArrayLike,
    references: ArrayLike,
    qi: ArrayLike,
    ri: ArrayLike,
    *,
    max_scale_px: int = 1,
    max_shift_px: float = 1.0,
    shift_step: float = 0.5,
    symmetric: bool = True,
    progress: ProgressCallback | None = None,
) -> NDArray[np.float64]:
    """Warp distance of each pair ``(queries[qi], references[ri])`` (float64).

    Parameters
    ----------
    queries, references : arrays of shape (n, H, W) or (n, H, W, C), same H, W, C
    qi, ri : int arrays of equal length
        The pairs, e.g. each query with its kNN shortlist. Pairs are grouped by
        query internally, so each query's warps are computed once.
    max_scale_px, max_shift_px, shift_step
        The warp grid (see :func:`warp_grid`); the defaults give 225 warps.
    symmetric : bool
        ``min_w min(‖w(q) − r‖², ‖q − w(r)‖²)`` (default); False: only
        ``min_w ‖w(q) − r‖²``.
    """
    q = check_image_batch(queries, "queries")
    r = check_image_batch(references, "references")
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
    uniq, local = np.unique(ra, return_inverse=True)
    ref_norms = _warped_norms(r[uniq], ay, ax) if symmetric else None
    out = np.empty(qa.size)
    order = np.argsort(qa, kind="stable")
    groups = np.split(order, np.flatnonzero(np.diff(qa[order])) + 1) if qa.size else []
    for g_no, sel in enumerate(groups):
        img = q[qa[sel[0]]].astype(np.float64)
        refs = _wh_order(r[ra[sel]])
        out[sel] = _min_sqdist(_warps(img, ay, ax), refs)
        if ref_norms is not None:
            adj = _warps(img, ay.transpose(0, 2, 1), ax.transpose(0, 2, 1))
            d = (
                float(np.sum(img * img))
                + ref_norms[:, local[sel]]
                - 2.0 * (adj @ refs.T)
            )
            out[sel] = np.minimum(out[sel], np.maximum(d.min(axis=0), 0.0))
        report(progress, "warp", g_no + 1, len(groups))
    return out


def _min_sqdist(
    wq: NDArray[np.float64], refs: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``min_w ‖wq[w] − refs[j]‖²`` per reference ``j``."""
    d = (
        np.einsum("ij,ij->i", wq, wq)[:, None]
        + np.einsum("ij,ij->i", refs, refs)[None, :]
        - 2.0 * (wq @ refs.T)
    )
    nearest: NDArray[np.float64] = np.maximum(d.min(axis=0), 0.0)
    return nearest
