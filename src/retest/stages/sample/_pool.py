"""The project's candidate pool as columns (:class:`ColumnarPool`).

Only candidates that carry something are listed, each as one entry of a few
arrays: those with crowd answers for their class, the blacklisted, and (left
out, as the project's decision says) the blocked. Everyone else is counted per
class (``count_by_class``, an index scan). The id order of a whole class is read
from the store only when a sampler's rules let unanswered candidates in
(``class-balanced``), and ids are read only for the images drawn. The pool holds
what :func:`retest.stages.sample._sample.candidate_pool` holds, so every sampler gives
the same sample on either.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest.project import Eligibility, Project
from retest.sampling.columnar import ColumnarPool
from retest.sampling.selection_frequency import FrequencyStat

__all__ = ["columnar_pool"]


class _StoreRows:
    """:class:`retest.sampling.columnar.PlainRows` over the candidate store."""

    def __init__(self, repo: Any, class_ids: list[int]) -> None:
        self._repo = repo
        self._class_ids = class_ids
        self._orders: dict[int, NDArray[np.int64]] | None = None

    def order(self, class_code: int) -> NDArray[np.int64]:
        if self._orders is None:  # one scan for every class
            self._orders = self._repo.id_orders()
        got = self._orders.get(self._class_ids[class_code])
        return np.zeros(0, np.int64) if got is None else got

    def ids(self, handles: NDArray[np.int64]) -> list[str]:
        out: list[str] = self._repo.ids_at(handles)
        return out

    def handles(self, ids: Collection[str]) -> NDArray[np.int64]:
        return np.array([h for h, _ in self._repo.locate(ids).values()], np.int64)


def columnar_pool(
    project: Project,
    *,
    stats: Mapping[tuple[str, int], FrequencyStat],
    eligibility: Eligibility | None,
) -> ColumnarPool:
    """Every candidate with a class, as a :class:`ColumnarPool`.

    Parameters
    ----------
    project : Project
    stats : mapping
        Selection frequencies ``{(item id, class id): FrequencyStat}``.
    eligibility : Eligibility, optional
        Candidates it blocks are left out (see
        :func:`retest.stages.sample._sample.candidate_pool`).
    """
    store = project.store
    repo = store.candidates
    names = {c.id: c.name for c in store.classes.list()}
    counts = {k: n for k, n in repo.count_by_class().items() if k is not None and n}
    class_ids = sorted(counts)
    code = {k: i for i, k in enumerate(class_ids)}
    black = store.blacklist.current()
    blocked: set[str] = set()
    if eligibility is not None:
        blocked = {c for c, _ in eligibility.excluded() if eligibility.blocking(c)}
    special = {item for item, _ in stats} | set(black) | blocked
    found = repo.locate(special)
    ids: list[str] = []
    handles: list[int] = []
    cls: list[int] = []
    freq: list[float] = []
    n_ans: list[int] = []
    removed: list[int] = []
    listed = dict.fromkeys(class_ids, 0)
    zero = FrequencyStat(0.0, 0)
    for item in sorted(found):  # a fixed order, whatever the set's
        seq, k = found[item]
        if k is None or k not in code:
            continue
        listed[k] += 1
        if item in blocked:
            removed.append(seq)
            continue
        st = stats.get((item, k), zero)
        ids.append(item)
        handles.append(seq)
        cls.append(code[k])
        freq.append(st.frequency)
        n_ans.append(st.n_assignments)
    n = len(ids)
    return ColumnarPool(
        tuple(names.get(k, str(k)) for k in class_ids),
        ids,
        np.array(cls, np.int64),
        np.array(freq, np.float64),
        np.array(n_ans, np.float64),
        np.array([i in black for i in ids], np.bool_),
        np.zeros(n, np.bool_),
        np.ones(n, np.bool_),
        np.full(n, np.nan),
        handles=np.array(handles, np.int64),
        plain={code[k]: counts[k] - listed[k] for k in class_ids},
        plain_rows=_StoreRows(repo, class_ids),
        removed=np.array(removed, np.int64),
    )
