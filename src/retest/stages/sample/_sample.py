"""Sampling inputs from the project store: selection frequencies, target histograms,
the candidate pool, and one call that runs a registered sampler on them.

Classes are identified by *name* in the pure samplers and by *id* in the store;
this module translates. Item ids are the store's (candidate sha256 or
``"<split>:<index>"`` for original images).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress, repeat

from retest._gc import no_cyclic_gc
from retest._validation import check_seed
from retest.errors import ConfigError, StageError
from retest.labeling.keyword_plan import SharedImage, assign_verified
from retest.project import Eligibility, Project, selection_frequencies
from retest.sampling.base import (
    SampleResult,
    revision_strategies,
    run_sampler,
    sampler_spec,
)
from retest.sampling.columnar import ColumnarPool
from retest.sampling.compat import check_compat
from retest.sampling.eligibility import CandidateInfo
from retest.sampling.histogram import DEFAULT_BINS
from retest.sampling.selection_frequency import (
    FrequencyStat,
    TargetHistogram,
    class_target_histograms,
)
from retest.stages.sample._pool import columnar_pool

__all__ = [
    "TARGET_MIN_ANNOTATIONS",
    "TARGET_MIN_ORIGINALS",
    "candidate_pool",
    "class_names",
    "draw_sample",
    "target_histograms",
    "verified_candidates",
]


def class_names(project: Project) -> dict[int, str]:
    """``class_id → name`` of the project's classes, as stored.

    Parameters
    ----------
    project : Project

    Returns
    -------
    dict of int to str
    """
    return {c.id: c.name for c in project.store.classes.list()}


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


def verified_candidates(
    project: Project, *, shared_class: Mapping[str, str] | None = None
) -> tuple[dict[str, int], list[SharedImage[int]]]:
    """Candidates whose latest ``kind="verify"`` judgment is yes (CIFAR stage 2),
    each with the one class it counts for.

    An image verified for several classes (CIFAR-10.1's ``cruiser`` images in
    both the automobile and the ship list) goes where
    :func:`retest.labeling.keyword_plan.assign_verified` puts it: the class
    named in ``shared_class[keyword]``, else the class with the fewest verified
    images of the keyword (docs/algorithms.md#shared-images).

    Parameters
    ----------
    project : Project
    shared_class : mapping of keyword to class name, optional

    Returns
    -------
    classes : dict of str to int
        Candidate id → class id.
    shared : list of SharedImage
        The images verified for several classes and where they went.
    """
    store = project.store
    latest: dict[tuple[str, int], int] = {}
    for e in store.annotations.list(kind="verify"):
        latest[(e.item_id, e.class_id)] = e.value
    ids = {c.name: c.id for c in store.classes.list()}
    choice = {}
    for kw, name in (shared_class or {}).items():
        if name not in ids:
            from retest.errors import UnknownNameError

            raise UnknownNameError("class", name, (), sorted(ids))
        choice[kw] = ids[name]
    yes = Counter(item for (item, _), v in latest.items() if v > 0)
    keyword_of: dict[str, str] = {}
    if any(n > 1 for n in yes.values()):  # the rule weighs each class's list
        known = sorted(store.candidates.existing(yes))
        keyword_of = {
            r.id: r.keyword for r in store.candidates.get_many(known) if r.keyword
        }
    return assign_verified(latest, keyword_of, choice)


def candidate_pool(
    project: Project,
    *,
    stats: Mapping[tuple[str, int], FrequencyStat] | None = None,
    eligibility: Eligibility | None = None,
    verified_only: bool = False,
    shared_class: Mapping[str, str] | None = None,
) -> list[CandidateInfo]:
    """Every candidate with a class, as :class:`CandidateInfo`, in insertion order.

    Parameters
    ----------
    project : Project
    stats : mapping, optional
        Selection frequencies (computed when omitted).
    eligibility : Eligibility, optional
        The project's decision (:func:`retest.project._eligibility.candidate_eligibility`):
        candidates it blocks are left out of the pool, so no sampler rule (some do
        not ask for reviews) can let them back in, and carried-over members that
        became ineligible drop out. Without it only the blacklist applies.
    verified_only : bool
        Keep only candidates verified in CIFAR stage 2 (keyword sampler), each
        in the class it was verified for (:func:`verified_candidates`).
    shared_class : mapping of keyword to class name, optional
        With ``verified_only``: where images verified for several classes go.

    Returns
    -------
    list of CandidateInfo
    """
    store = project.store
    stats = selection_frequencies(project) if stats is None else stats
    names = class_names(project)
    black = store.blacklist.current()
    keep = (
        verified_candidates(project, shared_class=shared_class)[0]
        if verified_only
        else None
    )
    # the project's decision is final, whatever the sampler's rules
    blocked = set()
    if eligibility is not None:
        blocked = {c for c, _ in eligibility.excluded() if eligibility.blocking(c)}
    # three columns, not a row object per candidate (ten million at scale)
    cols = store.candidates.columns(
        ("id", "class_id", "keyword"), ids=keep, has_class=True
    )
    ids, ks, kws = cols["id"], cols["class_id"], cols["keyword"]
    del cols
    if blocked or keep is not None:
        take = [c not in blocked and (keep is None or c in keep) for c in ids]
        ids, ks, kws = (list(compress(col, take)) for col in (ids, ks, kws))
    if keep is not None:  # the class each image was verified for
        ks = [keep[c] for c in ids]
    label = {k: names.get(k, str(k)) for k in set(ks)}
    one = {k: k for k in set(kws)}
    kws = list(map(one.__getitem__, kws))  # one str per keyword, not per row
    zero = FrequencyStat(0.0, 0)
    st = [stats.get(p, zero) for p in zip(ids, ks, strict=True)] if stats else []
    # positional CandidateInfo(id, class_name, frequency, n_assignments,
    # blacklisted, near_duplicate, reviewed, keyword): map() builds them in C
    with no_cyclic_gc():
        pool = list(
            map(
                CandidateInfo,
                ids,
                map(label.__getitem__, ks),
                [s.frequency for s in st] if st else repeat(0.0),
                [s.n_assignments for s in st] if st else repeat(0),
                [c in black for c in ids] if black else repeat(False),
                repeat(False),
                repeat(True),
                kws,
            )
        )
    return pool


def draw_sample(
    project: Project,
    strategy: str,
    *,
    seed: int,
    per_class: int = 10,
    previous: Iterable[str] | None = None,
    threshold: float = 0.7,
    class_thresholds: Mapping[str, float] | None = None,
    min_annotations: int | None = None,
    allow_upward: bool = True,
    keyword_counts: Mapping[str, Mapping[str, int]] | None = None,
    eligibility: Eligibility | None = None,
    reference_split: str | None = None,
    compat: str | None = None,
    shared_class: Mapping[str, str] | None = None,
) -> SampleResult:
    """Run the registered sampler ``strategy`` on the project's current pool.

    The sampler's registration (:func:`retest.sampling.sampler_spec`) says
    what it needs; this function offers every input and the sampler takes its
    own (``min_annotations`` None means the sampler's default; ``keyword_counts``
    ``{class name: {keyword: n}}`` is required by ``keyword-count``).
    ``eligibility`` is the project's decision of who may enter (see
    :func:`candidate_pool`). ``compat="authors"`` counts every valid assignment
    and hands the sampler the published arithmetic
    (docs/algorithms.md#two-modes). ``shared_class`` ``{keyword: class}``
    decides where images verified for several classes go (see
    :func:`verified_candidates`).

    Parameters
    ----------
    project : Project
    strategy : str
        A registered sampler that makes revisions.
    seed, per_class : int
    previous : iterable of str, optional
        Members of the parent revision (carried over while eligible).

    Returns
    -------
    SampleResult

    Raises
    ------
    ConfigError
        ``strategy`` does not make revisions, or ``keyword_counts`` is missing.
    StageError
        The project has no classes.
    """
    check_seed(seed)
    spec = sampler_spec(strategy)  # unknown names fail with suggestions
    if not spec.revision:
        raise ConfigError(
            f"strategy {strategy!r} does not make a test-set revision; choose one of "
            f"{', '.join(revision_strategies())}."
        )
    compat = check_compat(compat)
    stats = selection_frequencies(project, compat=compat)
    # columns, not a record per candidate, for the samplers that take them
    pool: list[CandidateInfo] | ColumnarPool = (
        columnar_pool(project, stats=stats, eligibility=eligibility)
        if spec.columnar and not spec.verified_only
        else candidate_pool(
            project,
            stats=stats,
            eligibility=eligibility,
            verified_only=spec.verified_only,
            shared_class=shared_class,
        )
    )
    classes = sorted(class_names(project).values())
    if not classes:
        raise StageError("the project has no classes; add them before sampling.")
    if "keyword_counts" in spec.required_inputs() and not keyword_counts:
        raise ConfigError(
            f"strategy {strategy!r} needs keyword counts {{class: {{keyword: n}}}}; "
            "run `retest plan` and pass its counts."
        )
    targets = (
        target_histograms(project, split=reference_split, stats=stats)
        if "targets" in spec.inputs
        else None
    )
    with no_cyclic_gc():  # a record per candidate, and no cycles
        return run_sampler(
            strategy,
            pool,
            random_state=seed,
            per_class=per_class,
            previous=None if previous is None else list(previous),
            classes=classes,
            min_annotations=min_annotations,
            threshold=threshold,
            class_thresholds=class_thresholds,
            allow_upward=allow_upward,
            targets=targets,
            keyword_counts=keyword_counts,
            compat=compat,
        )
