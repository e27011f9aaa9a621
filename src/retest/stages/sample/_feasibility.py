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

from retest.project import Eligibility, Project, candidate_eligibility, class_tallies
from retest.sampling.selection_frequency import FrequencyStat
from retest.stages.sample._sample import (
    TARGET_MIN_ANNOTATIONS,
    TARGET_MIN_ORIGINALS,
    target_histograms,
)
from retest.store.rows import TaskRow, split_reference_id

__all__ = [
    "MIN_ANNOTATIONS",
    "STRATEGIES",
    "ClassFeasibility",
    "class_feasibility",
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

    def missing(self, strategy: str) -> list[str]:
        """What the class lacks for ``strategy`` (empty: it can be sampled)."""
        out = []
        if strategy == "class-balanced":
            if self.eligible < self.per_class:
                out.append(
                    f"{self.per_class - self.eligible} more eligible candidates "
                    f"(has {self.eligible} of {self.per_class})"
                )
            return out
        if self.annotated_eligible < self.per_class:
            out.append(
                f"{self.per_class - self.annotated_eligible} more eligible candidates "
                f"with ≥ {self.min_annotations} valid assignments (has "
                f"{self.annotated_eligible} of {self.per_class})"
            )
        if strategy == "matched-frequency" and (
            self.originals_annotated < self.originals_needed
        ):
            out.append(
                f"{self.originals_needed - self.originals_annotated} more originals "
                f"with ≥ {TARGET_MIN_ANNOTATIONS} valid assignments for the target "
                f"histogram (has {self.originals_annotated} of {self.originals_needed})"
            )
        return out

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
