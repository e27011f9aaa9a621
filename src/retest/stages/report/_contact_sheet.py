"""Contact sheets: a grid of images with captions saved as a PNG.

Used wherever a person would rather look than read: the closest near-duplicate
pairs, the top label-error suspects, a revision's images.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from retest.errors import InputValidationError

__all__ = ["save_contact_sheet"]


def _as_rgb(img: NDArray[np.generic]) -> NDArray[np.uint8]:
    a = np.asarray(img)
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    elif a.ndim == 3 and a.shape[2] == 1:
        a = np.repeat(a, 3, axis=2)
    if a.ndim != 3 or a.shape[2] not in (3, 4):
        raise InputValidationError(
            f"contact sheet images must be (H, W[, C]). Got {a.shape}."
        )
    if a.dtype != np.uint8:
        a = np.clip(a, 0, 255).astype(np.uint8)
    return a[:, :, :3]


def save_contact_sheet(
    images: Sequence[NDArray[np.generic]],
    captions: Sequence[str],
    path: str | os.PathLike[str],
    *,
    ncols: int = 8,
    title: str | None = None,
    cell_inches: float = 1.6,
    highlight: Sequence[bool] | None = None,
) -> Path:
    """Save ``images`` in a grid with one caption each and return the PNG path.

    Parameters
    ----------
    images : sequence of ndarray of shape (H, W) or (H, W, C)
        uint8 pixels (other dtypes are clipped to [0, 255]).
    captions : sequence of str
        One caption per image (may contain newlines).
    path : path-like
        Output file; the format follows the suffix (``.png`` recommended).
    ncols : int
        Images per row. For pairs (query, neighbour) use an even number.
    highlight : sequence of bool, optional
        Images to frame in red (e.g. the suspect in a pair).
    """
    if len(images) != len(captions):
        raise InputValidationError(
            f"contact sheet needs one caption per image: {len(images)} images, "
            f"{len(captions)} captions."
        )
    if not images:
        raise InputValidationError("contact sheet needs at least one image.")
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    n = len(images)
    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(
            cell_inches * ncols,
            cell_inches * 1.25 * nrows + (0.4 if title else 0),
        ),
        squeeze=False,
    )
    for i, ax in enumerate(axes.ravel()):
        ax.set_xticks([])
        ax.set_yticks([])
        if i >= n:
            ax.axis("off")
            continue
        ax.imshow(_as_rgb(images[i]), interpolation="nearest")
        ax.set_title(captions[i], fontsize=7)
        color = "red" if highlight is not None and highlight[i] else "0.7"
        for spine in ax.spines.values():
            spine.set_edgecolor(color)
            spine.set_linewidth(2.0 if color == "red" else 0.5)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp" + out.suffix)
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, out)
    return out
