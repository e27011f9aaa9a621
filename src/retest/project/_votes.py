"""Selection frequencies: the one aggregation of crowd votes (grid tasks).

Read by the eligibility decision, the near-duplicate rules and the samplers.
"""

from __future__ import annotations

from retest.project._people import excluded_workers
from retest.project._project import Project
from retest.sampling.selection_frequency import FrequencyStat, aggregate_item_events

__all__ = ["selection_frequencies"]


def selection_frequencies(
    project: Project, *, compat: str | None = None
) -> dict[tuple[str, int], FrequencyStat]:
    """Selection frequency of every (item, class id) shown in a crowd/grid task.

    Computed from the append-only ``kind="task"`` annotation events (one per
    assignment and image shown); rejected assignments are ignored, a worker's
    repeated assignments of one task count once (the latest valid one), and
    workers excluded for their quality on the controls count for nothing.

    Parameters
    ----------
    project : Project
    compat : {"exact", "authors"}, optional
        ``"authors"`` counts every valid assignment, as published.

    Returns
    -------
    dict of (item id, class id) to FrequencyStat
        Pairs never shown are absent: treat them as ``FrequencyStat(0.0, 0)``.
    """
    store = project.store
    return aggregate_item_events(
        store.annotations.list(kind="task"),
        compat=compat,
        excluded=excluded_workers(store),
    )
