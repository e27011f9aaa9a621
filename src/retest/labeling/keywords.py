"""Original keywords: exact-match recovery and the per-class histogram.

See docs/algorithms.md#keyword-recovery.

CIFAR-10 images carry no keyword; each one is an exact copy of a TinyImages record,
whose keyword is its sub-class. Recovery matches content ids (any exact-duplicate
finder is acceptable, docs/algorithms.md#keyword-recovery), then makes each image's
keyword unique by the published rule: per class count the keywords over all matches,
pick the keyword maximising ``(class count, keyword)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from retest.errors import InputValidationError

__all__ = [
    "choose_unique_keywords",
    "find_exact_matches",
    "keyword_histogram",
]


def find_exact_matches(
    query_ids: Sequence[str],
    pool: Iterable[tuple[str, int, str]],
) -> list[list[tuple[int, str]]]:
    """All pool records whose content id equals each query's.

    Parameters
    ----------
    query_ids : sequence of str
        Content ids of the original images (e.g. 60,000 CIFAR-10 images).
    pool : iterable of (content_id, pool_index, keyword)
        Streamed pool records (e.g. TinyImages), in any order.

    Returns
    -------
    list of list of (pool_index, keyword)
        Per query, its matches in pool order of arrival.

    Examples
    --------
    >>> find_exact_matches(["a", "b"], [("b", 7, "cat"), ("x", 8, "dog"), ("b", 9, "kitty")])
    [[], [(7, 'cat'), (9, 'kitty')]]
    """
    where: dict[str, list[int]] = {}
    for i, q in enumerate(query_ids):
        where.setdefault(q, []).append(i)
    out: list[list[tuple[int, str]]] = [[] for _ in query_ids]
    for cid, idx, kw in pool:
        for i in where.get(cid, ()):
            out[i].append((int(idx), kw))
    return out


def choose_unique_keywords(
    matches: Sequence[Sequence[str]], labels: ArrayLike
) -> list[str | None]:
    """One keyword per image from its matched keywords (``make_cifar10_keywords_unique``).

    Per class, every match of every image counts once for its keyword; an image
    then takes the keyword maximising ``(class count, keyword)``: ties go to the
    lexicographically largest keyword (Python ``sorted(...)[-1]`` on tuples).

    Parameters
    ----------
    matches : sequence of sequence of str
        Matched keywords per image (repeats allowed, they count).
    labels : array-like of shape (n_images,)
        Class id per image.

    Returns
    -------
    list of str or None
        ``None`` for an image without matches.

    Examples
    --------
    >>> choose_unique_keywords([["cat", "kitty"], ["kitty"], ["cat"], ["b", "a"]],
    ...                        [0, 0, 0, 1])
    ['kitty', 'kitty', 'cat', 'b']
    """
    y = np.asarray(labels).reshape(-1)
    if y.shape[0] != len(matches):
        raise InputValidationError(
            f"{len(matches)} match lists but {y.shape[0]} labels; they must align."
        )
    counts: dict[int, dict[str, int]] = {}
    for kws, c in zip(matches, y.tolist(), strict=True):
        per = counts.setdefault(int(c), {})
        for kw in kws:
            per[kw] = per.get(kw, 0) + 1
    out: list[str | None] = []
    for kws, c in zip(matches, y.tolist(), strict=True):
        if not kws:
            out.append(None)
            continue
        per = counts[int(c)]
        out.append(max((per[kw], kw) for kw in kws)[1])
    return out


def keyword_histogram(
    labels: ArrayLike,
    keywords: Sequence[str | None],
    class_names: Sequence[str],
) -> dict[str, dict[str, int]]:
    """Per class, keyword → occurrences, in first-occurrence order.

    Images without a keyword are not counted. The insertion order is the order in
    which keywords first appear, which the v6 plan uses to break count ties.

    Examples
    --------
    >>> keyword_histogram([0, 1, 0, 0], ["x", "z", "y", "x"], ["a", "b"])
    {'a': {'x': 2, 'y': 1}, 'b': {'z': 1}}
    """
    y = np.asarray(labels).reshape(-1)
    if y.shape[0] != len(keywords):
        raise InputValidationError(
            f"{len(keywords)} keywords but {y.shape[0]} labels; they must align."
        )
    hist: dict[str, dict[str, int]] = {c: {} for c in class_names}
    for c, kw in zip(y.tolist(), keywords, strict=True):
        if kw is None:
            continue
        if not 0 <= c < len(class_names):
            raise InputValidationError(
                f"label {c} is outside [0, {len(class_names)}) of the class names."
            )
        per = hist[class_names[c]]
        per[kw] = per.get(kw, 0) + 1
    return hist
