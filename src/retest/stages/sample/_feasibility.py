"""What each sampling strategy needs per class, and what the project has.

Shown by ``retest status`` (and ``retest plan``) before any work, and named by
``retest sample`` when a sample cannot be valid, so that nobody crowd-labels a
project that MatchedFrequency can never sample. The numbers are the samplers' own
defaults (:data:`TARGET_MIN_ORIGINALS`, :data:`MIN_ANNOTATIONS`,
docs/algorithms.md#matched-frequency):

* class-balanced: ``per_class`` eligible candidates;
* threshold, top-images: ``per_class`` eligible candidates with
  ≥ ``min_annotations`` valid crowd assignments;
* matched-frequency: that too, plus a target histogram: ≥ 20 originals of the
  class shown in tasks of their class with ≥ 10 valid assignments each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from retest.project import (
    TARGET_MIN_ANNOTATIONS,
    TARGET_MIN_ORIGINALS,
    Eligibility,
    Project,
    candidate_eligibility,
    class_tallies,
    target_histograms,
)
from retest.sampling.selection_frequency import FrequencyStat
from retest.store.rows import TaskRow, split_reference_id

__all__ = [
    "MIN_ANNOTATIONS",
    "STRATEGIES",
    "ClassFeasibility",
    "class_feasibility",
    "originals_needed",
    "originals_shown",
]

MIN_ANNOTATIONS = 10
"""Valid assignments a candidate needs for the annotation-based samplers (their
``min_annotations`` default)."""


@dataclass(frozen=True, slots=True)
class ClassFeasibility:
    """One class: what it has against what each strategy needs."""

    class_name: str
    eligible: int
    annotated_eligible: int
    originals_annotated: int
    per_class: int
    originals_needed: int = TARGET_MIN_ORIGINALS
    min_annotations: int = MIN_ANNOTATIONS
    originals_in_tasks: int | None = None
    """Originals its crowd tasks show as positive controls (None: not counted):
    the most that can ever reach the target histogram without new tasks."""

    def shortfall(self, strategy: str) -> dict[str, int]:
        """How many more of each thing ``strategy`` needs: ``eligible``
        (candidates), ``annotated`` (eligible candidates with enough valid
        assignments), ``originals`` (annotated originals); empty: it can be
        sampled. The one rule :meth:`missing` and the tables read."""
        out = {}
        if strategy == "class-balanced":
            if self.eligible < self.per_class:
                out["eligible"] = self.per_class - self.eligible
            return out
        if self.annotated_eligible < self.per_class:
            out["annotated"] = self.per_class - self.annotated_eligible
        if strategy == "matched-frequency" and (
            self.originals_annotated < self.originals_needed
        ):
            out["originals"] = self.originals_needed - self.originals_annotated
        return out

    def missing(self, strategy: str) -> list[str]:
        """What the class lacks for ``strategy``, in words (empty: it can be sampled)."""
        short, out = self.shortfall(strategy), []
        if "eligible" in short:
            out.append(
                f"{short['eligible']} more eligible candidates "
                f"(has {self.eligible} of {self.per_class})"
            )
        if "annotated" in short:
            out.append(
                f"{short['annotated']} more eligible candidates "
                f"with ≥ {self.min_annotations} valid assignments (has "
                f"{self.annotated_eligible} of {self.per_class})"
            )
        if "originals" in short:
            text = (
                f"{short['originals']} more originals "
                f"with ≥ {TARGET_MIN_ANNOTATIONS} valid assignments for the target "
                f"histogram (has {self.originals_annotated} of {self.originals_needed})"
            )
            shown = self.originals_in_tasks
            if shown is not None and shown < self.originals_needed:
                text += (
                    f"; its crowd tasks show only {shown} originals: make tasks "
                    "with more controls (`retest crowd tasks --controls N`)"
                )
            out.append(text)
        return out

    def cell(self, strategy: str) -> str:
        """A table cell: ``ok``, or how many more of what it needs."""
        short = self.shortfall(strategy)
        return ", ".join(f"+{n} {what}" for what, n in short.items()) if short else "ok"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["missing"] = {s: self.missing(s) for s in STRATEGIES}
        return d


#: The strategies whose needs are counted here (keyword-count needs a plan).
STRATEGIES = ("class-balanced", "threshold", "matched-frequency")


def class_feasibility(
    project: Project,
    *,
    per_class: int = 10,
    eligibility: Eligibility | None = None,
    stats: Mapping[tuple[str, int], FrequencyStat] | None = None,
    min_annotations: int = MIN_ANNOTATIONS,
) -> list[ClassFeasibility]:
    """Per class (id order), the counts each strategy's needs are checked against.

    Parameters
    ----------
    project : Project
    per_class : int
        Images per class the revision would take.
    eligibility : Eligibility, optional
        The project's decision when the caller has it.
    stats : mapping, optional
        :func:`retest.stages.sample._sample.selection_frequencies` when known.
    min_annotations : int
        Valid assignments an eligible candidate needs to count as annotated.
    """
    from retest.stages.sample._sample import selection_frequencies

    elig = candidate_eligibility(project) if eligibility is None else eligibility
    stats = selection_frequencies(project) if stats is None else stats
    tallies = class_tallies(elig)
    annotated: Counter[int] = Counter()
    for (item, cls), st in stats.items():
        if (
            split_reference_id(item) is None
            and st.n_assignments >= min_annotations
            and elig.is_eligible(item)
        ):
            annotated[cls] += 1
    targets = target_histograms(project, stats=stats)
    # no task yet: nothing to say about the tasks' originals
    shown = originals_shown(project) if project.store.tasks.list() else {}
    out = []
    for c in project.store.classes.list():
        hist = targets.get(c.name)
        out.append(
            ClassFeasibility(
                c.name,
                tallies.get(c.id, Counter())["eligible"],
                annotated[c.id],
                0 if hist is None else hist.n_images,
                per_class,
                min_annotations=min_annotations,
                originals_in_tasks=shown.get(c.name),
            )
        )
    return out


def originals_shown(project: Project, extra: Sequence[TaskRow] = ()) -> dict[str, int]:
    """Class name → distinct originals shown as positive controls in its tasks.

    Each becomes an annotated original (for the class's target histogram) once
    ≥ :data:`TARGET_MIN_ANNOTATIONS` valid assignments answered it; ``extra`` are
    tasks not stored yet (a dry run).
    """
    shown: dict[int, set[str]] = {}
    for t in (*project.store.tasks.list(), *extra):
        shown.setdefault(t.class_id, set()).update(t.controls.get("pos", ()))
    return {c.name: len(shown.get(c.id, ())) for c in project.store.classes.list()}


def originals_needed(strategy: str | None) -> int:
    """Distinct originals per class that ``strategy`` needs answered by ≥
    :data:`TARGET_MIN_ANNOTATIONS` valid assignments: its target histogram's
    (matched-frequency; 0 for the others, which sample candidates only).

    >>> originals_needed("matched-frequency"), originals_needed("class-balanced")
    (20, 0)
    """
    return TARGET_MIN_ORIGINALS if strategy == "matched-frequency" else 0
