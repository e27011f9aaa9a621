"""The near-duplicate state of a project, as the dedup stage left it in the store.

The read side of the ``dedup`` stage: which metrics ran, their review targets,
the stored neighbour lists, THE review queue, and a reviewer's verdicts (the web
app and ``retest dedup-review`` record them). It is here, below the stages,
because the one eligibility decision (:mod:`retest.project._eligibility`), the web
app and several stages read it; :mod:`retest.stages.dedup` writes it. Nothing
here needs the metric registry: a run stores its metric's kind, order and review
target, and lists written without a run (older projects, built-in metrics only)
get the built-in defaults of :func:`retest.dedup.rules.default_thresholds`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retest.dedup.rules import (
    DedupCandidate,
    ReviewItem,
    default_thresholds,
    review_queue,
    review_threshold,
)
from retest.errors import InputValidationError
from retest.names import validate_person_name
from retest.project._checkpoint import list_states, load_state
from retest.project._ids import resolve_candidate, resolve_item
from retest.project._project import Project
from retest.project._votes import selection_frequencies
from retest.store.rows import DuplicateVerdict, NeighbourReview

__all__ = [
    "AGAINST",
    "BUILTIN_METRICS",
    "DEDUP_STAGE",
    "STATE_PREFIX",
    "candidate_infos",
    "dedup_image_shape",
    "dedup_review_queue",
    "load_neighbours",
    "metric_state",
    "metrics_run",
    "record_review",
    "review_targets",
    "reviewed_references",
]

DEDUP_STAGE = "dedup"
BUILTIN_METRICS = ("l2", "features", "dssim", "warp")
"""The built-in metrics in computation order (``metric_names()`` adds plug-ins)."""
_BUILTIN_ORDER = {
    "l2": ("exact", 0),
    "features": ("exact", 1),
    "dssim": ("shortlist", 2),
    "warp": ("shortlist", 3),
}


def _builtin_default_target(metric: str, shape: tuple[int, ...]) -> float:
    """What the built-in metric's ``default_target`` gives (the core's rules)."""
    if metric == "warp":
        from retest.dedup.warp import warp_threshold

        return float(warp_threshold(list(shape)))
    return float(default_thresholds(shape)[metric])


AGAINST = ("original-train", "original-test", "pool")
STATE_PREFIX = "dedup/metric/"
"""Checkpoint state name of a metric's run: ``STATE_PREFIX + metric``."""


def _states(project: Project) -> dict[str, dict[str, Any]]:
    """Metric → its stored state."""
    return {
        name[len(STATE_PREFIX) :]: state
        for name, state in list_states(project, DEDUP_STAGE, STATE_PREFIX).items()
    }


def metric_state(project: Project, metric: str) -> dict[str, Any] | None:
    """What the last run of ``metric`` stored.

    Parameters
    ----------
    project : Project
    metric : str

    Returns
    -------
    dict or None
        Fingerprint, image_shape, target, embedder, calibration, complete,
        created, ...; None if the metric never ran.
    """
    return load_state(project, f"{STATE_PREFIX}{metric}")


def _metric_key(name: str, state: Mapping[str, Any] | None) -> tuple[int, int, str]:
    kind, order = _BUILTIN_ORDER.get(name, (None, 0))
    if state and "kind" in state:  # stored by the run (plug-in metrics too)
        kind, order = state["kind"], int(state.get("order", 0))
    if kind is None:
        return (2, 0, name)
    return (int(kind != "exact"), order, name)


def metrics_run(project: Project) -> tuple[str, ...]:
    """Every metric ever run on the project (stored state or neighbour lists:
    the store keeps which metrics have lists, so no list index is scanned).

    Parameters
    ----------
    project : Project

    Returns
    -------
    tuple of str
        Exact metrics first, then shortlist metrics, then unknown names (a
        metric's kind and order are stored with its run).
    """
    states = _states(project)
    names = set(states)
    names |= set(BUILTIN_METRICS) & project.store.neardup.list_metrics()
    return tuple(sorted(names, key=lambda m: _metric_key(m, states.get(m))))


def dedup_image_shape(project: Project) -> tuple[int, ...] | None:
    """Image shape the most recent dedup run compared.

    Parameters
    ----------
    project : Project

    Returns
    -------
    tuple of int or None
        None before any run.
    """
    states = sorted(_states(project).values(), key=lambda r: r["created"] or "")
    for state in reversed(states):
        shape = state.get("image_shape")
        if shape:
            return tuple(int(x) for x in shape)
    return None


def review_targets(project: Project) -> dict[str, float]:
    """Review target (a distance) of every metric that has been run.

    The target stored with the metric's run (``features``: calibrated on the
    originals; the others: their default for the image size), overridden by
    ``[thresholds]`` in retest.toml under the metric's name. Metrics with
    neighbour lists but no stored state (older projects) get their default.

    Parameters
    ----------
    project : Project

    Returns
    -------
    dict of metric name to float
    """
    overrides: Mapping[str, Any] = getattr(project.config, "thresholds", {}) or {}
    out: dict[str, float] = {}
    shape: tuple[int, ...] | None = None
    for m in metrics_run(project):
        state = metric_state(project, m) or {}
        target = state.get("target")
        if target is None and m in BUILTIN_METRICS:
            # lists not written by run_dedup (older projects, built-in metrics
            # only): ImageNet's size, the reference point of the published targets
            shape = shape or dedup_image_shape(project) or (256, 256, 3)
            target = _builtin_default_target(m, shape)
        if m in overrides:
            target = overrides[m]
        if target is not None:
            out[m] = float(target)
    return out


def load_neighbours(
    project: Project,
    metrics: Sequence[str] | None = None,
    *,
    within: Mapping[str, float] | None = None,
) -> dict[str, dict[str, list[tuple[str, float]]]]:
    """Stored neighbour lists.

    Parameters
    ----------
    project : Project
    metrics : sequence of str, optional
        Default: every metric run.
    within : mapping of metric to float, optional
        Of these metrics, lists whose closest distance is above the value may be
        left out (SQLite skips them unread): for callers that only look at
        distances within it.

    Returns
    -------
    dict
        ``candidate → metric → [(reference, distance), …]``, closest first.
    """
    out: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for m in metrics_run(project) if metrics is None else metrics:
        t = (within or {}).get(m)
        for nl in project.store.neardup.iter_neighbours(metric=m, within=t):
            out.setdefault(nl.candidate_id, {})[m] = list(
                zip(nl.ref_ids, nl.distances, strict=True)
            )
    return out


def candidate_infos(project: Project) -> dict[str, DedupCandidate]:
    """What the near-duplicate rules need to know of every candidate.

    Parameters
    ----------
    project : Project

    Returns
    -------
    dict of candidate id to DedupCandidate
        Class, selection frequency for its own class (the one aggregation of
        crowd votes the samplers use), blacklist state and source id.
    """
    store = project.store
    black = set(store.blacklist.current())
    stats = selection_frequencies(project)
    out = {}
    for c in store.candidates.iter():
        st = stats.get((c.id, c.class_id)) if c.class_id is not None else None
        out[c.id] = DedupCandidate(
            class_id=c.class_id,
            selection_frequency=st.frequency if st and st.n_assignments else None,
            blacklisted=c.id in black,
            source_id=f"{c.source}:{c.source_ref}",
        )
    return out


def reviewed_references(project: Project) -> dict[str, dict[str, set[str]]]:
    """References already shown to a reviewer.

    Parameters
    ----------
    project : Project

    Returns
    -------
    dict
        ``candidate → metric → set of reference ids``.
    """
    out: dict[str, dict[str, set[str]]] = {}
    for r in project.store.neardup.reviews():
        out.setdefault(r.candidate_id, {}).setdefault(r.metric, set()).update(
            r.references
        )
    return out


def dedup_review_queue(
    project: Project,
    *,
    thresholds: dict[str, float] | None = None,
    top: int = 30,
    candidates: dict[str, DedupCandidate] | None = None,
) -> list[ReviewItem]:
    """THE review queue: pairs under their metric's target not yet reviewed.

    Covers every metric run on the project with :func:`review_targets`;
    ``thresholds`` replaces them (only the metrics it names are queued). See
    :func:`retest.dedup.rules.review_queue` for the order.

    Parameters
    ----------
    project : Project
    thresholds : dict of metric to float, optional
        Replaces :func:`review_targets`.
    top : int
        References shown per candidate.
    candidates : dict, optional
        :func:`candidate_infos` when the caller already has it.

    Returns
    -------
    list of ReviewItem
    """
    th = review_targets(project) if thresholds is None else dict(thresholds)
    if not th:  # no metric ever ran: nothing to review
        return []
    # only lists with a distance within their metric's target can be queued
    within = {m: t for m in th if (t := review_threshold(m, th)) is not None}
    return review_queue(
        load_neighbours(project, list(th), within=within),
        thresholds=th,
        candidates=candidate_infos(project) if candidates is None else candidates,
        blacklist=set(project.store.blacklist.current()),
        reviewed=reviewed_references(project),
        top=top,
    )


def record_review(
    project: Project,
    candidate_id: str,
    metric: str,
    *,
    reviewer: str,
    shown: Sequence[str],
    duplicates: Sequence[str] = (),
) -> None:
    """Append a verdict per shown reference and a review mark (both append-only).

    Candidate ids may be given as unique prefixes, as ``retest dedup-queue``
    prints them (:func:`retest.project._ids.resolve_candidate`).

    Parameters
    ----------
    project : Project
    candidate_id, metric : str
    reviewer : str
        Checked by :func:`retest.names.validate_person_name`.
    shown : sequence of str
        References shown to the reviewer.
    duplicates : sequence of str
        Those the reviewer marked as copies (a subset of ``shown``).

    Raises
    ------
    InputValidationError
        A duplicate that was not shown, an ambiguous id prefix or a reviewer name
        that is not one line of text.
    NotFoundError
        An unknown candidate.
    """
    reviewer = validate_person_name(reviewer)  # NFC: one spelling per person
    candidate_id = resolve_candidate(project, candidate_id)
    shown = [resolve_item(project, r) for r in shown]
    duplicates = [resolve_item(project, r) for r in duplicates]
    bad = set(duplicates) - set(shown)
    if bad:
        raise InputValidationError(
            f"duplicates {sorted(bad)[:3]} were not among the shown references of "
            f"{candidate_id!r}."
        )
    dup = set(duplicates)
    project.store.neardup.add_verdicts(
        DuplicateVerdict(candidate_id, r, metric, r in dup, reviewer) for r in shown
    )
    project.store.neardup.add_reviews(
        [NeighbourReview(candidate_id, metric, reviewer, tuple(sorted(set(shown))))]
    )
