"""Test-set revisions: sample → review → blacklist → resample.

See docs/algorithms.md#revisions.

A revision is immutable once written. Its name is ``<project>-<strategy>-<r>``
with ``r`` one more than the highest revision of that strategy (0 first); names
of the earlier spelling (``a`` threshold, ``b`` matched-frequency, ``c``
top-images, as ImageNetV2's) keep theirs and count.
Revision r+1 normally starts from r (``parent``): still-eligible members carry
over and only the missing slots are drawn.

Per-class review state is a list of events in the store. When a revision is
created from a parent, a class's ``reviewed`` flag carries over iff the parent's
latest state says reviewed and not problematic and the class's member set is
unchanged (``initialize_dataset_review.py carry_over_reviews``).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from retest.errors import ConfigError, StoreError
from retest.names import suggest_name, validate_name
from retest.project import Project, class_names, review_states, selection_frequencies
from retest.sampling.base import SampleResult, strategy_tag, strategy_tags
from retest.sampling.compat import check_compat
from retest.sampling.histogram import DEFAULT_BINS, bin_index
from retest.stages.sample import draw_sample
from retest.store.base import Store
from retest.store.rows import ReviewState, Revision, RevisionMember

__all__ = [
    "ClassDiff",
    "ClassStatistics",
    "CreatedRevision",
    "RevisionStatistics",
    "carry_over_reviews",
    "create_revision",
    "diff_revisions",
    "next_revision_name",
    "revision_statistics",
    "revision_summaries",
    "set_class_review",
]


def next_revision_name(project: Project, strategy: str) -> str:
    """``<project>-<strategy>-<r>`` with ``r`` = 1 + the highest existing ``r``
    (else 0), counting revisions named with the strategy's earlier tag too
    (``<project>-b-3`` is followed by ``<project>-matched-frequency-4``).

    The project name is first made a valid name (:func:`retest.names.suggest_name`:
    other characters become ``-``). The name is only free when read: creating the
    revision under it can still lose a race, which :func:`create_revision` handles.

    Parameters
    ----------
    project : Project
        Its configured name is the first part of the revision name.
    strategy : str
        Sampler name; its tag is the second part.

    Returns
    -------
    str
    """
    base = suggest_name(project.config.name)
    prefixes = [f"{base}-{t}-" for t in strategy_tags(strategy)]
    taken = [
        int(r.name[len(p) :])
        for r in project.store.revisions.list()
        for p in prefixes
        if r.name.startswith(p) and r.name[len(p) :].isdigit()
    ]
    return f"{base}-{strategy_tag(strategy)}-{max(taken) + 1 if taken else 0}"


@dataclass(frozen=True, slots=True)
class CreatedRevision:
    """A new revision, the sample behind it and the classes whose review carried over."""

    revision: Revision
    result: SampleResult
    reviews_carried: tuple[str, ...]
    #: False when the sample was invalid and not kept (``keep_invalid=False``).
    written: bool = True


def create_revision(
    project: Project,
    *,
    strategy: str,
    seed: int,
    per_class: int = 10,
    parent: str | None = None,
    name: str | None = None,
    keep_invalid: bool = True,
    **sample_options: Any,
) -> CreatedRevision:
    """Sample a new immutable revision and write it with its members.

    Parameters
    ----------
    project : Project
        Its name is the first part of the revision name.
    strategy : str
        A sampler name (``threshold``, ``matched-frequency``, ``top-images``,
        ``class-balanced``, ``keyword-count``).
    seed : int
    per_class : int
    parent : str, optional
        Revision to start from (carry-over of still-eligible members).
    name : str, optional
        Explicit name instead of :func:`next_revision_name`.
    keep_invalid : bool
        Write an invalid or empty sample too (a record of what was short). When
        False such a sample writes nothing and comes back with ``written``
        False and an unnamed revision.
    **sample_options
        Passed to :func:`retest.stages.sample._sample.draw_sample` (``threshold``,
        ``class_thresholds``, ``allow_upward``, ``min_annotations``,
        ``keyword_counts``, ``eligibility``, ``compat``: ``"exact"`` by
        default or ``"authors"``, recorded in the revision's parameters;
        ``shared_class``, recorded when given). Without ``eligibility`` the
        project's decision is computed here
        (:func:`retest.project._eligibility.candidate_eligibility`).

    Returns
    -------
    CreatedRevision
        Never raises for a short class: the revision is written invalid, with the
        per-class shortfall in ``revision.shortfall``.

    Raises
    ------
    StageError
        An ingest is unfinished (the pool is incomplete).
    NotFoundError
        ``parent`` is not a revision of the project.
    StoreError
        ``name`` is taken.
    """
    st = project.store
    if name is not None:
        validate_name(name, "revision")
    if sample_options.get("eligibility") is None:
        from retest.project import candidate_eligibility, check_fresh

        check_fresh(project, require_dedup=False)
        sample_options["eligibility"] = candidate_eligibility(project)
    elig = sample_options.get("eligibility")
    previous = None
    if parent is not None:
        st.revisions.get(parent)  # NotFoundError with the known names
        previous = [m.item_id for m in st.revisions.members(parent)]
    result = draw_sample(
        project,
        strategy,
        seed=seed,
        per_class=per_class,
        previous=previous,
        **sample_options,
    )
    ids = {v: k for k, v in class_names(project).items()}
    members = [
        RevisionMember(
            m.id,
            ids[m.class_name],
            m.bin,
            m.how,
            m.target_bin if m.how == "upward" else None,
        )
        for m in result.members
    ]
    rev = Revision(
        "",
        strategy,
        params={
            **result.parameters,
            "compat": check_compat(sample_options.get("compat")),
            **(
                {"shared_class": dict(sample_options["shared_class"])}
                if sample_options.get("shared_class")
                else {}
            ),
            "metadata": result.metadata,
            "include_unreviewed": bool(elig is not None and elig.include_unreviewed),
            "eligibility_checked": elig is not None,
        },
        seed=seed,
        parent=parent,
        valid=result.is_valid,
        shortfall={s.class_name: s.as_dict() for s in result.shortfall},
    )
    if not keep_invalid and (not result.is_valid or not members):
        return CreatedRevision(rev, result, (), written=False)
    rev = _create_named(project, rev, members, name)
    carried = carry_over_reviews(project, rev.name) if parent is not None else []
    names = class_names(project)
    return CreatedRevision(rev, result, tuple(names[c] for c in carried))


_NAME_ATTEMPTS = 50


def _create_named(
    project: Project,
    rev: Revision,
    members: list[RevisionMember],
    name: str | None,
) -> Revision:
    """Write ``rev`` under ``name``, or under the next free automatic name.

    Two unnamed ``sample`` runs may read the same highest number and pick the same
    name; the store refuses the second create (one transaction checks and
    inserts), so the loser takes the next number and tries again. An explicit
    name is never changed: its conflict is the user's error.
    """
    st = project.store
    for _ in range(_NAME_ATTEMPTS):
        auto = next_revision_name(project, rev.strategy) if name is None else name
        validate_name(auto, "revision")
        try:
            return st.revisions.create(dataclasses.replace(rev, name=auto), members)
        except StoreError:
            if name is not None or auto not in {r.name for r in st.revisions.list()}:
                raise
    raise StoreError(
        f"could not find a free revision name after {_NAME_ATTEMPTS} attempts "
        "(other processes keep creating revisions). Pass --name."
    )


def revision_summaries(project: Project) -> list[dict[str, Any]]:
    """One row per revision in creation order.

    Parameters
    ----------
    project : Project

    Returns
    -------
    list of dict
        ``name``, ``strategy``, ``parent``, ``seed``, ``valid``, ``n_images``,
        ``short_classes`` and ``created`` of each revision.
    """
    st = project.store
    rows = []
    for r in st.revisions.list():
        members = st.revisions.members(r.name)
        rows.append(
            {
                "name": r.name,
                "strategy": r.strategy,
                "parent": r.parent,
                "seed": r.seed,
                "valid": r.valid,
                "n_images": len(members),
                "short_classes": sorted(r.shortfall),
                "created": r.created,
            }
        )
    return rows


def _members_by_class(store: Store, name: str) -> dict[int, frozenset[str]]:
    out: dict[int, set[str]] = defaultdict(set)
    for m in store.revisions.members(name):
        out[m.class_id].add(m.item_id)
    return {k: frozenset(v) for k, v in out.items()}


def carry_over_reviews(project: Project, name: str) -> list[int]:
    """Copy ``reviewed`` from the parent for unchanged, unproblematic classes.

    Parameters
    ----------
    project : Project
    name : str
        The new revision (its parent is read from the store).

    Returns
    -------
    list of int
        Class ids whose review carried over; other classes stay unreviewed.
    """
    st = project.store
    rev = st.revisions.get(name)
    if rev.parent is None:
        return []
    old = _members_by_class(st, rev.parent)
    new = _members_by_class(st, name)
    states = st.revisions.reviews(rev.parent)
    carried = []
    for cid in sorted(class_names(project)):
        s = states.get(cid)
        if s is None or not s.reviewed or s.problematic:
            continue
        if old.get(cid, frozenset()) == new.get(cid, frozenset()):
            st.revisions.set_review(
                ReviewState(name, cid, True, False, who=f"carried from {rev.parent}")
            )
            carried.append(cid)
    return carried


def set_class_review(
    project: Project,
    revision: str,
    class_id: int,
    *,
    reviewed: bool,
    problematic: bool = False,
    who: str,
) -> None:
    """Record a reviewer's verdict on one class of a revision (append-only).

    Parameters
    ----------
    project : Project
    revision : str
    class_id : int
    reviewed, problematic : bool
    who : str
        The reviewer's name.

    Raises
    ------
    ConfigError
        ``class_id`` is not a class of the project.
    """
    if class_id not in class_names(project):
        raise ConfigError(f"class id {class_id} is not in the project.")
    project.store.revisions.set_review(
        ReviewState(revision, class_id, bool(reviewed), bool(problematic), who=who)
    )


@dataclass(frozen=True, slots=True)
class ClassDiff:
    """Members of one class added in and removed from revision B relative to A."""

    class_name: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    kept: int


def diff_revisions(project: Project, a: str, b: str) -> list[ClassDiff]:
    """Per-class added/removed member ids from revision ``a`` to ``b``.

    Parameters
    ----------
    project : Project
    a, b : str
        Revision names.

    Returns
    -------
    list of ClassDiff
        By class name; ids sorted.
    """
    st = project.store
    ma, mb = _members_by_class(st, a), _members_by_class(st, b)
    names = class_names(project)
    out = []
    for cid in sorted(set(ma) | set(mb), key=lambda c: names.get(c, str(c))):
        sa, sb = ma.get(cid, frozenset()), mb.get(cid, frozenset())
        out.append(
            ClassDiff(
                names.get(cid, str(cid)),
                tuple(sorted(sb - sa)),
                tuple(sorted(sa - sb)),
                len(sa & sb),
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class ClassStatistics:
    """Statistics of one class of a revision (docs/algorithms.md#revisions)."""

    class_id: int
    class_name: str
    n_images: int
    annotated: int
    mean_frequency: float | None
    min_frequency: float | None
    min_assignments: int | None
    by_bin: tuple[int, ...]
    upward: int
    carried: int
    near_duplicates: int
    blacklisted: int
    reviewed: bool
    problematic: bool
    shortfall: int


@dataclass(frozen=True, slots=True)
class RevisionStatistics:
    """Per-class statistics and totals of a revision."""

    revision: Revision
    classes: tuple[ClassStatistics, ...]

    @property
    def n_images(self) -> int:
        return sum(c.n_images for c in self.classes)

    @property
    def review_coverage(self) -> float:
        """Share of classes reviewed."""
        return sum(c.reviewed for c in self.classes) / max(1, len(self.classes))

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        r = self.revision
        return {
            "name": r.name,
            "strategy": r.strategy,
            "parent": r.parent,
            "seed": r.seed,
            "valid": r.valid,
            "n_images": self.n_images,
            "upward": sum(c.upward for c in self.classes),
            "near_duplicates": sum(c.near_duplicates for c in self.classes),
            "blacklisted": sum(c.blacklisted for c in self.classes),
            "review_coverage": self.review_coverage,
            "classes": [asdict(c) for c in self.classes],
        }


def revision_statistics(
    project: Project,
    name: str,
    *,
    near_duplicates: Collection[str] | None = None,
) -> RevisionStatistics:
    """Images per class, mean/min selection frequency, count by bin, upward
    sampled, near-duplicate, blacklist and review coverage of a revision.

    Blacklist and near-duplicate counts use the *current* state, so they show
    what the next resample will replace.

    Parameters
    ----------
    project : Project
    name : str
        Revision name.
    near_duplicates : collection of str, optional
        Candidates to count as near-duplicates (default: those with a duplicate
        verdict).

    Returns
    -------
    RevisionStatistics

    Raises
    ------
    NotFoundError
        No revision ``name``.
    """
    st = project.store
    rev = st.revisions.get(name)
    # counted the way the revision was sampled (docs/algorithms.md#two-modes)
    stats = selection_frequencies(project, compat=rev.params.get("compat"))
    black = st.blacklist.current()
    ndup = (
        {c for c, _ in st.neardup.duplicate_pairs()}
        if near_duplicates is None
        else set(near_duplicates)
    )
    reviews = review_states(project, name)
    by_class: dict[int, list[RevisionMember]] = defaultdict(list)
    for m in st.revisions.members(name):
        by_class[m.class_id].append(m)
    names = class_names(project)
    out = []
    for cid in sorted(set(names) | set(by_class)):
        cname = names.get(cid, str(cid))
        out.append(
            _class_stats(
                cid,
                cname,
                by_class.get(cid, []),
                stats,
                black,
                ndup,
                reviews.get(cid),
                rev.shortfall.get(cname),
            )
        )
    return RevisionStatistics(rev, tuple(out))


def _class_stats(
    cid: int,
    cname: str,
    members: Iterable[RevisionMember],
    stats: Mapping[tuple[str, int], Any],
    black: Mapping[str, str],
    ndup: Collection[str],
    review: ReviewState | None,
    short: Mapping[str, Any] | None,
) -> ClassStatistics:
    ms = list(members)
    fs = [stats[(m.item_id, cid)] for m in ms if (m.item_id, cid) in stats]
    ann = [s for s in fs if s.n_assignments > 0]
    bins = [0] * (len(DEFAULT_BINS) + 1)
    for m in ms:
        s = stats.get((m.item_id, cid))
        b = (
            m.bin
            if m.bin is not None
            else (bin_index(s.frequency) if s is not None and s.n_assignments else None)
        )
        if b is not None and 0 <= b < len(bins):
            bins[b] += 1
    return ClassStatistics(
        cid,
        cname,
        len(ms),
        len(ann),
        sum(s.frequency for s in ann) / len(ann) if ann else None,
        min(s.frequency for s in ann) if ann else None,
        min(s.n_assignments for s in ann) if ann else None,
        tuple(bins),
        sum(m.origin == "upward" for m in ms),
        sum(m.origin == "carried" for m in ms),
        sum(m.item_id in ndup for m in ms),
        sum(m.item_id in black for m in ms),
        bool(review and review.reviewed),
        bool(review and review.problematic),
        int(short.get("missing", 0)) if short else 0,
    )
