"""The plan stage: images needed per class and keyword (``retest plan``).

Reads the reference keyword histogram (first-occurrence order, train before test)
— or, when the reference images carry no keywords, the configured keywords of
each class (``[keywords]`` in ``retest.toml``, all weighted equally, v6 only) —
applies a rule of :mod:`retest.labeling.keyword_plan`, adds the number of verified
candidates per keyword (latest ``verify`` annotation says yes), and saves the plan
as ``reports/plan_<rule>.json`` (recorded in the artifact manifest).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retest.errors import ConfigError, StageError
from retest.labeling.keyword_plan import (
    CIFAR10_V4_EXCLUDE,
    CIFAR10_V4_SKIP,
    KeywordPlan,
    allocate_v4,
    allocate_v6,
    needed_vs_available,
)
from retest.project import (
    CLASS_PRESETS,
    PLAN_STATE,
    Project,
    save_state,
    verified_candidates,
    verified_per_keyword,
)
from retest.stages.reference import reference_keyword_histogram
from retest.store.artifacts import save_json

__all__ = [
    "KEYWORDS_FROM_CONFIG",
    "KEYWORDS_FROM_REFERENCE",
    "PlanResult",
    "make_plan",
    "shared_summary",
]

KEYWORDS_FROM_REFERENCE = "reference"
KEYWORDS_FROM_CONFIG = "retest.toml [keywords]"


@dataclass(frozen=True, slots=True)
class PlanResult:
    """A keyword plan plus the needed-vs-available table and where it was saved."""

    plan: KeywordPlan
    table: list[dict[str, Any]]
    path: str
    keyword_source: str = KEYWORDS_FROM_REFERENCE
    #: images verified for several classes: per keyword, the classes, where they
    #: went and why (docs/algorithms.md#shared-images)
    shared: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        short = [r for r in self.table if r["missing"] > 0]
        return {
            **self.plan.to_json(),
            "keyword_source": self.keyword_source,
            "shared_images": list(self.shared),
            "table": self.table,
            "missing_total": sum(r["missing"] for r in short),
            "keywords_short": len(short),
            "path": self.path,
        }


def make_plan(
    project: Project,
    *,
    rule: str,
    size: int = 2000,
    top_k: int | None = None,
    exclude: Sequence[str] | None = None,
    original_size: int | None = None,
    keywords: Mapping[str, Sequence[str]] | None = None,
    compat: str | None = None,
    shared_class: Mapping[str, str] | None = None,
) -> PlanResult:
    """Compute and save the keyword plan of the project's reference dataset.

    Parameters
    ----------
    project : Project
    rule : {"v4", "v6"}
    size : int
        Target size of the new dataset.
    top_k : int, optional
        Keywords per class (default 25 for v4, 50 for v6).
    exclude : sequence of str, optional
        v4 keywords forced to zero. Default: the published list when the project's
        classes are CIFAR-10's (the published skip list applies then too), else none.
    original_size : int, optional
        v4's original size (default: number of reference images).
    keywords : mapping of class name to keywords, optional
        Keywords per class (default: the project's ``[keywords]``), used only
        when the reference images have none: every listed keyword of a class gets
        the same weight, so v6 spreads the class's images evenly over them (list
        order breaks ties). v4 needs real counts and refuses them.
    compat : {"exact", "authors"}, optional
        Exact shares (default) or the published float arithmetic, recorded in
        the plan's ``params``.
    shared_class : mapping of keyword to class name, optional
        Where images verified for several classes count (default: the class
        with the fewest verified images of the keyword, as CIFAR-10.1 v6).

    Returns
    -------
    PlanResult
        Also saved as ``reports/plan_<rule>.json``.

    Raises
    ------
    StageError
        Neither the reference images nor ``keywords`` give keywords.
    ConfigError, UnknownNameError
        A bad rule or an option the rule does not take.
    """
    store = project.store
    if keywords is None:
        keywords = project.config.keywords
    classes = [c.name for c in sorted(store.classes.list(), key=lambda c: c.id)]
    hist = reference_keyword_histogram(project)
    source = KEYWORDS_FROM_REFERENCE
    if not any(hist.values()):
        if not keywords or not any(keywords.values()):
            raise StageError(
                "the reference images have no keywords: register them with keywords, "
                "run `retest reference keywords TINYIMAGES_DIR`, or list each class's "
                "keywords under [keywords] in retest.toml (rule v6)."
            )
        hist = _configured_histogram(keywords, classes, rule)
        source = KEYWORDS_FROM_CONFIG
    cifar = tuple(classes) == CLASS_PRESETS["cifar10"]
    if rule == "v6":
        if exclude:
            raise ConfigError("--exclude applies to the v4 rule only.")
        plan = allocate_v6(
            hist, size=size, top_k=top_k or 50, class_order=classes, compat=compat
        )
    elif rule == "v4":
        plan = allocate_v4(
            hist,
            original_size=original_size or store.references.count(),
            size=size,
            top_k=top_k or 25,
            exclude=exclude
            if exclude is not None
            else (CIFAR10_V4_EXCLUDE if cifar else ()),
            skip=CIFAR10_V4_SKIP if cifar else {},
            class_order=classes,
            compat=compat,
        )
    else:
        from retest.errors import UnknownNameError

        raise UnknownNameError("keyword plan rule", rule, (), ["v4", "v6"])
    table = needed_vs_available(
        plan, verified_per_keyword(project, shared_class=shared_class)
    )
    rel = f"reports/plan_{rule}.json"
    shared = shared_summary(project, shared_class=shared_class)
    result = PlanResult(plan, table, rel, source, shared)
    save_json(
        store,
        project.root,
        rel,
        result.to_json(),
        stage="plan",
        params={
            "rule": rule,
            "size": size,
            "top_k": top_k,
            "keyword_source": source,
            "compat": plan.params["compat"],
        },
    )
    # what later stages read (the web app's progress vs plan) lives in the store;
    # the report above is for people
    save_state(
        project,
        PLAN_STATE,
        {
            "rule": rule,
            "report": rel,
            "needed": [[r["class"], r["keyword"], int(r["needed"])] for r in table],
        },
        stage="plan",
    )
    return result


def shared_summary(
    project: Project, *, shared_class: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], ...]:
    """Images verified for several classes, one entry per keyword and classes.

    Each entry: ``keyword``, ``classes``, ``n_images``, the class they count for
    (``chosen``), ``chosen_by`` (``"fewest"`` or ``"choice"``) and the choice to
    make, as a sentence for the user.
    """
    _, shared = verified_candidates(project, shared_class=shared_class)
    names = {c.id: c.name for c in project.store.classes.list()}
    groups: dict[tuple[Any, ...], list[str]] = {}
    for s in shared:
        key = (
            s.keyword,
            tuple(names[c] for c in s.classes),
            names[s.chosen],
            s.chosen_by,
        )
        groups.setdefault(key, []).append(s.item)
    out = []
    for (kw, classes, chosen, by), items in groups.items():
        others = [c for c in classes if c != chosen]
        why = (
            "the class with the fewest verified images of the keyword, as CIFAR-10.1 v6"
            if by == "fewest"
            else "your choice"
        )
        out.append(
            {
                "keyword": kw,
                "classes": list(classes),
                "n_images": len(items),
                "items": items,
                "chosen": chosen,
                "chosen_by": by,
                "message": (
                    f"{len(items)} image(s) of keyword {kw!r} are verified for "
                    f"{' and '.join(classes)}; an image has one class, so they count "
                    f"for {chosen} ({why}). To count them for {others[0]} instead, "
                    f"pass --shared-class {kw}={others[0]} to `retest plan` and "
                    "`retest sample`."
                ),
            }
        )
    return tuple(out)


def _configured_histogram(
    keywords: Mapping[str, Sequence[str]], classes: Sequence[str], rule: str
) -> dict[str, dict[str, int]]:
    """Configured keywords as a histogram of equal weights (one per keyword)."""
    if rule == "v4":
        raise ConfigError(
            "rule v4 needs the reference images' keyword counts, and they have none; "
            "retest.toml [keywords] names keywords without counts: use --rule v6."
        )
    missing = [c for c in classes if not keywords.get(c)]
    if missing:
        raise ConfigError(
            f"retest.toml [keywords] lists no keywords for classes {missing}; every "
            "class needs at least one to plan from it."
        )
    return {c: dict.fromkeys(keywords[c], 1) for c in classes}
