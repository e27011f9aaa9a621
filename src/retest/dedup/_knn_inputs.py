"""Input checks of the exact kNN engine: shapes, dimensions, k, exclusions.

Errors name the input, what was expected and what to do; nothing is computed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from retest.errors import ConfigError, InputValidationError

__all__ = ["validate_knn_inputs"]


def _as_2d(x: Any, name: str) -> NDArray[Any]:
    # Arrays pass through uncopied, so a memmap stays on disk (read in chunks later).
    arr: NDArray[Any] = (
        x if hasattr(x, "shape") and hasattr(x, "dtype") else np.asarray(x)
    )
    if arr.ndim < 2:
        raise InputValidationError(
            f"{name} must be an array of shape (n, d) or (n, H, W[, C]). Got shape {arr.shape}."
        )
    if arr.dtype.kind not in "uif":
        raise InputValidationError(f"{name} must be numeric. Got dtype {arr.dtype}.")
    if arr.ndim > 2:
        arr = arr.reshape(arr.shape[0], -1)
    return arr


def _resolve_exclude(
    exclude: ArrayLike | None, exclude_self: bool, nq: int, nr: int
) -> NDArray[np.int64] | None:
    if exclude_self:
        if nq != nr:
            raise InputValidationError(
                f"exclude_self needs the query set to be the reference set, but there are "
                f"{nq} queries and {nr} references. Pass exclude= instead."
            )
        return np.arange(nq, dtype=np.int64)
    if exclude is None:
        return None
    ex = np.asarray(exclude, dtype=np.int64).reshape(-1)
    if ex.shape[0] != nq:
        raise InputValidationError(
            f"exclude must give one reference index (or −1) per query: {nq} queries, "
            f"{ex.shape[0]} entries."
        )
    return ex


def _validate(
    queries: Any,
    references: Any,
    k: int | None,
    pad: bool,
    ex: NDArray[np.int64] | None,
) -> None:
    nq, d = queries.shape
    nr, dr = references.shape
    if d != dr:
        raise InputValidationError(
            f"queries have {d} features but references have {dr}; both sides must "
            "share one dimension (resize images to a common size first)."
        )
    if nr == 0:
        raise InputValidationError("references are empty; expected at least one row.")
    if nq == 0:
        raise InputValidationError("queries are empty; expected at least one row.")
    if k is None:
        return
    if k < 1:
        raise ConfigError(f"k must be a positive integer. Got {k}.")
    n_avail = nr - (1 if ex is not None and (ex >= 0).any() else 0)
    if k > n_avail and not pad:
        self_note = " (self-matches excluded)" if n_avail < nr else ""
        raise InputValidationError(
            f"k={k} exceeds the {n_avail} available references{self_note}; "
            f"use k ≤ {n_avail} or add references."
        )


def validate_knn_inputs(
    queries: ArrayLike,
    references: ArrayLike,
    k: int | None,
    *,
    exclude: ArrayLike | None = None,
    exclude_self: bool = False,
    pad: bool = False,
) -> tuple[NDArray[Any], NDArray[Any], NDArray[np.int64] | None]:
    """Check kNN inputs without computing; returns 2-d views and the exclusions.

    Raises :class:`~retest.errors.InputValidationError` naming the bad input
    (mismatched dimensions, empty references, ``k`` above the available references).
    NaN/inf values are detected while streaming.
    """
    q = _as_2d(queries, "queries")
    refs = _as_2d(references, "references")
    ex = _resolve_exclude(exclude, exclude_self, q.shape[0], refs.shape[0])
    if k is not None and (
        isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer))
    ):  # int("3") and int(2.7) would silently pass
        raise ConfigError(f"k must be a positive integer. Got {k!r}.")
    _validate(q, refs, None if k is None else int(k), pad, ex)
    return q, refs, ex
