"""Selection frequencies: the one aggregation of crowd votes (grid tasks), and the
target histograms of the originals built from them.

Read by the eligibility decision, the near-duplicate rules, the samplers and the
web app's review page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retest.project._classes import class_names
from retest.project._people import excluded_workers
from retest.project._project import Project
from retest.sampling.histogram import DEFAULT_BINS
from retest.sampling.selection_frequency import (
    FrequencyStat,
    TargetHistogram,
    aggregate_item_events,
    class_target_histograms,
)

__all__ = [
    "TARGET_MIN_ANNOTATIONS",
    "TARGET_MIN_ORIGINALS",
    "selection_frequencies",
    "target_histograms",
]


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


TARGET_MIN_ANNOTATIONS = 10
"""Valid assignments an original needs to count in its class's target histogram."""
TARGET_MIN_ORIGINALS = 20
"""Counted originals a class needs for a valid target histogram (MatchedFrequency)."""


def target_histograms(
    project: Project,
    *,
    split: str | None = None,
    bins: Sequence[float] = DEFAULT_BINS,
    min_annotations: int = TARGET_MIN_ANNOTATIONS,
    min_images: int = TARGET_MIN_ORIGINALS,
    stats: Mapping[tuple[str, int], FrequencyStat] | None = None,
    compat: str | None = None,
) -> dict[str, TargetHistogram]:
    """Each class's histogram of original images over selection-frequency bins.

    Uses the original (reference) images of ``split`` (all splits if None) that
    were shown in tasks of their own class, with ≥ ``min_annotations`` valid
    assignments.

    Parameters
    ----------
    project : Project
    split : str, optional
        Original split whose images count (all splits when None).
    bins : sequence of float
        Selection-frequency bin edges.
    min_annotations, min_images : int
        Assignments an original needs to count; counted originals a class needs
        to be valid.
    stats : mapping, optional
        :func:`selection_frequencies` when the caller already has it.
    compat : {"exact", "authors"}, optional
        How assignments are counted when ``stats`` is computed here.

    Returns
    -------
    dict of class name to TargetHistogram
    """
    if stats is None:
        stats = selection_frequencies(project, compat=compat)
    names = class_names(project)
    freq: list[float] = []
    n: list[int] = []
    cls: list[str] = []
    for ref in project.store.references.list(split=split):
        st = stats.get((ref.id, ref.class_id))
        if st is None:
            continue
        freq.append(st.frequency)
        n.append(st.n_assignments)
        cls.append(names.get(ref.class_id, str(ref.class_id)))
    return class_target_histograms(
        freq,
        n,
        cls,
        bins=bins,
        min_annotations=min_annotations,
        min_images=min_images,
        all_classes=names.values(),
    )
