"""Test-set revisions: sample → review → blacklist → resample (SPEC §5.7).

A revision is immutable once written. Its name is ``<project>-<tag>-<r>`` with tag
``a`` (threshold), ``b`` (matched-frequency), ``c`` (top-images) or the strategy
name, and ``r`` one more than the highest revision of that prefix (0 first).
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
from typing import Any, Protocol

from retest.errors import ConfigError, StoreError
from retest.names import suggest_name, validate_name
from retest.pipeline.sample import (
    class_names,
    draw_sample,
    selection_frequencies,
)
from retest.sampling.base import SampleResult, revision_strategies, strategy_tag
from retest.sampling.histogram import DEFAULT_BINS, bin_index
from retest.store.base import Store
from retest.store.rows import ReviewState, Revision, RevisionMember

__all__ = [
    "STRATEGY_TAGS",
    "ClassDiff",
    "ClassStatistics",
    "CreatedRevision",
    "RevisionStatistics",
    "carry_over_reviews",
    "create_revision",
    "diff_revisions",
    "next_revision_name",
    "review_states",
    "revision_statistics",
    "revision_summaries",
    "set_class_review",
]

STRATEGY_TAGS = {s: strategy_tag(s) for s in revision_strategies()}


class _HasStore(Protocol):
    @property
    def store(self) -> Store: ...


def _store(obj: Store | _HasStore) -> Store:
    return obj if isinstance(obj, Store) else obj.store


def next_revision_name(store: Store | _HasStore, project: str, strategy: str) -> str:
    """``<project>-<tag>-<r>`` with ``r`` = 1 + the highest existing ``r`` (else 0).

    The project name is first made a valid name (:func:`retest.names.suggest_name`:
    other characters become ``-``). The name is only free when read: creating the
    revision under it can still lose a race, which :func:`create_revision` handles.
    """
    project = suggest_name(project)
    prefix = f"{project}-{strategy_tag(strategy)}-"
    taken = [
        int(r.name[len(prefix) :])
        for r in _store(store).revisions.list()
        if r.name.startswith(prefix) and r.name[len(prefix) :].isdigit()
    ]
    return f"{prefix}{max(taken) + 1 if taken else 0}"


@dataclass(frozen=True, slots=True)
class CreatedRevision:
    """A new revision, the sample behind it and the classes whose review carried over."""

    revision: Revision
    result: SampleResult
    reviews_carried: tuple[str, ...]


def create_revision(
    store: Store | _HasStore,
    *,
    project: str,
    strategy: str,
    seed: int,
    per_class: int = 10,
    parent: str | None = None,
    name: str | None = None,
    **sample_options: Any,
) -> CreatedRevision:
    """Sample a new immutable revision and write it with its members.

    Parameters
    ----------
    store : Store or an object with a ``store`` attribute (a project)
    project : str
        Project name, the first part of the revision name.
    strategy : str
        A sampler name (``threshold``, ``matched-frequency``, ``top-images``,
        ``class-balanced``, ``keyword-count``).
    seed : int
    per_class : int
    parent : str, optional
        Revision to start from (carry-over of still-eligible members).
    name : str, optional
        Explicit name instead of :func:`next_revision_name`.
    **sample_options
        Passed to :func:`retest.pipeline.sample.draw_sample` (``threshold``,
        ``class_thresholds``, ``allow_upward``, ``min_annotations``,
        ``keyword_counts``, ``eligibility``). Given a project and no
        ``eligibility``, the project's decision is computed here
        (:func:`retest.pipeline.eligibility.candidate_eligibility`).

    Returns
    -------
    CreatedRevision
        Never raises for a short class: the revision is written invalid, with the
        per-class shortfall in ``revision.shortfall``.
    """
    st = _store(store)
    if name is not None:
        validate_name(name, "revision")
    if sample_options.get("eligibility") is None and hasattr(store, "pixels"):
        # a project: the one eligibility decision applies (a bare store has no
        # pixels and no dedup state, so only its blacklist does)
        from retest.pipeline.eligibility import candidate_eligibility, check_fresh

        check_fresh(store, require_dedup=False)  # type: ignore[arg-type]
        sample_options["eligibility"] = candidate_eligibility(store)  # type: ignore[arg-type]
    elig = sample_options.get("eligibility")
    previous = None
    if parent is not None:
        st.revisions.get(parent)  # NotFoundError with the known names
        previous = [m.item_id for m in st.revisions.members(parent)]
    result = draw_sample(
        st,
        strategy,
        seed=seed,
        per_class=per_class,
        previous=previous,
        **sample_options,
    )
    ids = {v: k for k, v in class_names(st).items()}
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
            "metadata": result.metadata,
            "include_unreviewed": bool(elig is not None and elig.include_unreviewed),
            "eligibility_checked": elig is not None,
        },
        seed=seed,
        parent=parent,
        valid=result.is_valid,
        shortfall={s.class_name: s.as_dict() for s in result.shortfall},
    )
    rev = _create_named(st, rev, members, name, project)
    carried = carry_over_reviews(st, rev.name) if parent is not None else []
    names = class_names(st)
    return CreatedRevision(rev, result, tuple(names[c] for c in carried))


_NAME_ATTEMPTS = 50


def _create_named(
    st: Store,
    rev: Revision,
    members: list[RevisionMember],
    name: str | None,
    project: str,
) -> Revision:
    """Write ``rev`` under ``name``, or under the next free automatic name.

    Two unnamed ``sample`` runs may read the same highest number and pick the same
    name; the store refuses the second create (one transaction checks and
    inserts), so the loser takes the next number and tries again. An explicit
    name is never changed: its conflict is the user's error.
    """
    for _ in range(_NAME_ATTEMPTS):
        auto = next_revision_name(st, project, rev.strategy) if name is None else name
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


def revision_summaries(store: Store | _HasStore) -> list[dict[str, Any]]:
    """One row per revision in creation order: name, strategy, parent, seed,
    validity, images, classes short and creation time."""
    st = _store(store)
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


def carry_over_reviews(store: Store | _HasStore, name: str) -> list[int]:
    """Copy ``reviewed`` from the parent for unchanged, unproblematic classes.

    Returns the class ids whose review carried over; other classes stay
    unreviewed (SPEC §5.7).
    """
    st = _store(store)
    rev = st.revisions.get(name)
    if rev.parent is None:
        return []
    old = _members_by_class(st, rev.parent)
    new = _members_by_class(st, name)
    states = st.revisions.reviews(rev.parent)
    carried = []
    for cid in sorted(class_names(st)):
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
    store: Store | _HasStore,
    revision: str,
    class_id: int,
    *,
    reviewed: bool,
    problematic: bool = False,
    who: str,
) -> None:
    """Record a reviewer's verdict on one class of a revision (append-only)."""
    st = _store(store)
    if class_id not in class_names(st):
        raise ConfigError(f"class id {class_id} is not in the project.")
    st.revisions.set_review(
        ReviewState(revision, class_id, bool(reviewed), bool(problematic), who=who)
    )


def review_states(store: Store | _HasStore, revision: str) -> dict[int, ReviewState]:
    """Latest review state of every class (unreviewed when no event exists)."""
    st = _store(store)
    latest = st.revisions.reviews(revision)
    return {
        cid: latest.get(cid, ReviewState(revision, cid, False, False))
        for cid in sorted(class_names(st))
    }


@dataclass(frozen=True, slots=True)
class ClassDiff:
    """Members of one class added in and removed from revision B relative to A."""

    class_name: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    kept: int


def diff_revisions(store: Store | _HasStore, a: str, b: str) -> list[ClassDiff]:
    """Per-class added/removed member ids from revision ``a`` to ``b`` (sorted)."""
    st = _store(store)
    ma, mb = _members_by_class(st, a), _members_by_class(st, b)
    names = class_names(st)
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
    """Statistics of one class of a revision (SPEC §5.7 dataset checks)."""

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
    store: Store | _HasStore,
    name: str,
    *,
    near_duplicates: Collection[str] | None = None,
) -> RevisionStatistics:
    """Images per class, mean/min selection frequency, count by bin, upward
    sampled, near-duplicate, blacklist and review coverage of a revision.

    Blacklist and near-duplicate counts use the *current* state, so they show
    what the next resample will replace.
    """
    st = _store(store)
    rev = st.revisions.get(name)
    stats = selection_frequencies(st)
    black = st.blacklist.current()
    ndup = (
        {c for c, _ in st.neardup.duplicate_pairs()}
        if near_duplicates is None
        else set(near_duplicates)
    )
    reviews = review_states(st, name)
    by_class: dict[int, list[RevisionMember]] = defaultdict(list)
    for m in st.revisions.members(name):
        by_class[m.class_id].append(m)
    names = class_names(st)
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
