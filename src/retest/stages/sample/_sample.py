"""Sampling inputs from the project store: the candidate pool, and one call that
runs a registered sampler on it (selection frequencies, target histograms and the
verified candidates are reads of the project layer).

Classes are identified by *name* in the pure samplers and by *id* in the store;
this module translates. Item ids are the store's (candidate sha256 or
``"<split>:<index>"`` for original images).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import compress, repeat

from retest._gc import no_cyclic_gc
from retest._validation import check_seed
from retest.errors import ConfigError, StageError
from retest.project import (
    Eligibility,
    Project,
    class_names,
    selection_frequencies,
    target_histograms,
    verified_candidates,
)
from retest.sampling.base import (
    SampleResult,
    revision_strategies,
    run_sampler,
    sampler_spec,
)
from retest.sampling.columnar import ColumnarPool
from retest.sampling.compat import check_compat
from retest.sampling.eligibility import CandidateInfo
from retest.sampling.selection_frequency import FrequencyStat
from retest.stages.sample._pool import columnar_pool

__all__ = [
    "candidate_pool",
    "draw_sample",
]


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
            f"strategy {strategy!r} needs keyword counts {{class: {{keyword: n}}}}: "
            "pass a JSON file of them with --keyword-counts FILE (keyword_counts= "
            "in Python)."
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
