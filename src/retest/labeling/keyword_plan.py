"""Keyword (sub-class) plans: how many new images each keyword needs.

See docs/algorithms.md#keyword-plans.

Two published rules:

* ``v4`` (CIFAR-10.1 v4, docs/algorithms.md#rule-v4):
  ``n_k = 0 if c_k/r < 0.5 else ceil(c_k/r)`` with ``r = original_size / target_size``,
  forced zeros (exclusion list) and a per-keyword skip list of classes whose occurrences
  are ignored when a keyword is assigned to a class.
* ``v6`` (CIFAR-10.1 v6/v7, docs/algorithms.md#rule-v6): top-k keywords per class,
  fractional ``per_class * c / sum(top-k c)``, floor plus largest remainder with a
  stable tie-break, zeros dropped; every class gets exactly ``size / n_classes``.

Both rules compute shares exactly (integers) by default; ``compat="authors"``
uses the published float expressions, ``c_k / r`` (v4) and ``per_class * (c /
total)`` (v6), whose rounding can move a boundary case by one image
(docs/algorithms.md#two-modes).

Pure functions on plain mappings; the pipeline reads counts from the store.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from retest.errors import ConfigError, InputValidationError
from retest.registry import Registry
from retest.sampling.compat import AUTHORS, check_compat

__all__ = [
    "CIFAR10_V4_EXCLUDE",
    "CIFAR10_V4_SKIP",
    "PLAN_RULES",
    "KeywordConflict",
    "KeywordPlan",
    "SharedImage",
    "allocate_v4",
    "allocate_v6",
    "assign_verified",
    "needed_vs_available",
    "top_k_keywords",
]

ClassCounts = Mapping[str, Mapping[str, int]]

#: Keywords forced to zero new images in CIFAR-10.1 v4 ("no adequate images").
CIFAR10_V4_EXCLUDE: tuple[str, ...] = (
    "sport_car",
    "door",
    "ford",
    "opel",
    "sports_car",
)

#: Published v4 skip list: keyword → CIFAR-10 class ids whose occurrences of the
#: keyword are ignored when assigning the keyword to a class
#: (docs/algorithms.md#rule-v4).
CIFAR10_V4_SKIP: dict[str, tuple[int, ...]] = {
    "cruiser": (8,),
    "sound_truck": (1,),
    "cavalier": (1,),
    "domestic_dog": (3,),
    "persian_cat": (5,),
    "trailer_truck": (1,),
    "frog": (5,),
    "cab": (9,),
    "tractor_trailer": (8,),
    "pet": (3,),
    "ambulance": (9, 8),
    "gray": (6,),
    "taxi": (0,),
    "toy": (2, 8, 3),
    "automobile": (8,),
    "sparrow": (8,),
    "lark": (7,),
    "ford": (9,),
}


@dataclass(frozen=True, slots=True)
class KeywordConflict:
    """A keyword claimed by more than one class."""

    keyword: str
    classes: tuple[str, ...]
    counts: tuple[int, ...]
    resolution: str


@dataclass(frozen=True, slots=True)
class KeywordPlan:
    """Images to collect per class and keyword.

    Attributes
    ----------
    rule : str
        ``"v4"`` or ``"v6"``.
    size : int
        Target dataset size the rule was asked for.
    allocation : dict of str to dict of str to int
        ``{class: {keyword: n}}`` in class order, keywords in rule order, no zeros.
    conflicts : tuple of KeywordConflict
    params : dict
        The parameters the rule ran with (for the manifest).
    """

    rule: str
    size: int
    allocation: Mapping[str, Mapping[str, int]]
    conflicts: tuple[KeywordConflict, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)

    def totals(self) -> dict[str, int]:
        """Planned images per class."""
        return {c: sum(kws.values()) for c, kws in self.allocation.items()}

    @property
    def total(self) -> int:
        return sum(self.totals().values())

    def rows(self) -> list[tuple[str, str, int]]:
        """``(class, keyword, n)`` rows in plan order."""
        return [(c, k, n) for c, kws in self.allocation.items() for k, n in kws.items()]

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "size": self.size,
            "params": dict(self.params),
            "allocation": {c: dict(k) for c, k in self.allocation.items()},
            "totals": self.totals(),
            "conflicts": [
                {
                    "keyword": c.keyword,
                    "classes": list(c.classes),
                    "counts": list(c.counts),
                    "resolution": c.resolution,
                }
                for c in self.conflicts
            ],
        }


def top_k_keywords(counts: Mapping[str, int], k: int) -> list[tuple[str, int]]:
    """The ``k`` most frequent keywords, ties kept in first-occurrence order.

    Same as ``collections.Counter(...).most_common(k)`` (a stable sort by count,
    descending) on a mapping whose insertion order is first occurrence.

    Examples
    --------
    >>> top_k_keywords({"a": 1, "b": 3, "c": 1, "d": 3}, 3)
    [('b', 3), ('d', 3), ('a', 1)]
    """
    if k < 1:
        raise ConfigError(f"top_k must be >= 1. Got {k}.")
    return sorted(counts.items(), key=lambda kv: kv[1], reverse=True)[:k]


def _check_counts(counts: ClassCounts) -> None:
    for cls, kws in counts.items():
        for kw, c in kws.items():
            if int(c) != c or c < 0:
                raise InputValidationError(
                    f"keyword count of {kw!r} in class {cls!r} must be a non-negative "
                    f"integer. Got {c!r}."
                )


def _round_class(
    top: list[tuple[str, int]], per_class: int, cls: str, compat: str = "exact"
) -> dict[str, int]:
    denom = sum(c for _, c in top)
    if denom == 0:
        raise InputValidationError(
            f"class {cls!r} has no keyword occurrences to plan from."
        )
    n: dict[str, int] = {}
    gap: dict[str, float | int] = {}
    for kw, c in top:
        if compat == AUTHORS:  # the published float expression, digit for digit
            f = per_class * (c / denom)
            n[kw] = math.floor(f)
            gap[kw] = f - math.floor(f)
        else:  # exact: remainders over one denominator compare as integers
            n[kw], gap[kw] = divmod(per_class * c, denom)
    floor_sum = sum(n.values())
    # Published invariant: the floors lose less than one image per keyword.
    assert per_class - len(top) <= floor_sum <= per_class, (cls, floor_sum)
    # Python's sorted(reverse=True) is stable: equal gaps keep insertion order.
    by_gap = sorted(n, key=gap.__getitem__, reverse=True)
    for kw in by_gap[: per_class - floor_sum]:
        n[kw] += 1
    return {kw: v for kw, v in n.items() if v > 0}


def _conflicts(
    allocation: Mapping[str, Mapping[str, int]],
) -> tuple[KeywordConflict, ...]:
    owners: dict[str, list[tuple[str, int]]] = {}
    for cls, kws in allocation.items():
        for kw, n in kws.items():
            owners.setdefault(kw, []).append((cls, n))
    return tuple(
        KeywordConflict(
            kw,
            tuple(c for c, _ in v),
            tuple(n for _, n in v),
            "unresolved: give each class its own candidate list for this keyword",
        )
        for kw, v in owners.items()
        if len(v) > 1
    )


def allocate_v6(
    counts: ClassCounts,
    *,
    size: int = 2000,
    top_k: int = 50,
    class_order: Sequence[str] | None = None,
    compat: str | None = None,
) -> KeywordPlan:
    """The CIFAR-10.1 v6/v7 rule: exactly ``size / n_classes`` images per class.

    Parameters
    ----------
    counts : mapping of class to (mapping of keyword to int)
        Keyword occurrences per class in the original dataset; each inner mapping's
        order must be first-occurrence order (it breaks count ties).
    size : int
        Target size; must be divisible by the number of classes.
    top_k : int
        Keywords kept per class (50 in the published run).
    class_order : sequence of str, optional
        Class order of the output; defaults to the order of ``counts``.
    compat : {"exact", "authors"}, optional
        Exact shares (default) or the published ``per_class * (c / total)``.

    Returns
    -------
    KeywordPlan

    Examples
    --------
    >>> allocate_v6({"a": {"x": 41, "y": 39}}, size=200).allocation
    {'a': {'x': 103, 'y': 97}}
    >>> allocate_v6({"a": {"x": 41, "y": 39}}, size=200, compat="authors").allocation
    {'a': {'x': 102, 'y': 98}}
    >>> plan = allocate_v6({"a": {"x": 3, "y": 1}, "b": {"z": 5}}, size=8)
    >>> plan.allocation
    {'a': {'x': 3, 'y': 1}, 'b': {'z': 4}}
    """
    _check_counts(counts)
    compat = check_compat(compat)
    classes = list(class_order) if class_order is not None else list(counts)
    if not classes or size <= 0 or size % len(classes):
        raise ConfigError(
            f"v6 needs a positive size divisible by the {len(classes)} classes. "
            f"Got size={size}. Pick a multiple of {max(len(classes), 1)}."
        )
    per_class = size // len(classes)
    allocation: dict[str, dict[str, int]] = {}
    for cls in classes:
        top = top_k_keywords(counts.get(cls, {}), top_k)
        allocation[cls] = _round_class(top, per_class, cls, compat)
    params = {"top_k": top_k, "per_class": per_class, "compat": compat}
    return KeywordPlan("v6", size, allocation, _conflicts(allocation), params)


def _v4_owner(
    kw: str,
    counts: ClassCounts,
    classes: Sequence[str],
    skip: Mapping[str, Sequence[int | str]],
) -> tuple[str | None, KeywordConflict | None]:
    skipped = {classes[s] if isinstance(s, int) else s for s in skip.get(kw, ())}
    present = [(c, int(counts[c].get(kw, 0))) for c in classes if counts[c].get(kw, 0)]
    left = [(c, n) for c, n in present if c not in skipped]
    if len(left) == 1:
        return left[0][0], None
    if not left:
        return None, None
    # Not covered by the skip list: keep the class with the most occurrences.
    best = max(left, key=lambda cn: (cn[1], -classes.index(cn[0])))
    conflict = KeywordConflict(
        kw,
        tuple(c for c, _ in left),
        tuple(n for _, n in left),
        f"assigned to {best[0]!r} (most occurrences); add a skip-list entry to decide",
    )
    return best[0], conflict


def allocate_v4(
    counts: ClassCounts,
    *,
    original_size: int,
    size: int = 2000,
    top_k: int = 25,
    exclude: Sequence[str] = (),
    skip: Mapping[str, Sequence[int | str]] | None = None,
    class_order: Sequence[str] | None = None,
    compat: str | None = None,
) -> KeywordPlan:
    """The CIFAR-10.1 v4 rule: ``n_k = 0 if c_k/r < 0.5 else ceil(c_k/r)``.

    Keywords are the top-``top_k`` of each class (the published ``keywords_v4``,
    250 = 25 × 10). ``c_k`` is the keyword's count over the whole original
    dataset, ``r = original_size / size``. A keyword goes to the one class where
    it occurs once the classes in ``skip[keyword]`` (ids or names) are ignored;
    remaining ties are reported as conflicts and go to the class with the most
    occurrences. Keywords in ``exclude`` get 0 (and are listed in ``params``).
    ``c_k / r`` is compared exactly (``2·c_k·size < original_size``); with
    ``compat="authors"`` in float, as published.

    [AMBIGUOUS] The published pipeline says ``keyword_counts_v4.json`` holds the count
    "in CIFAR-10"; we read this as the count over all classes, skipped ones included.

    Examples
    --------
    >>> p = allocate_v4({"a": {"x": 44, "y": 14}, "b": {"z": 16}},
    ...                 original_size=60000, size=2000)
    >>> p.allocation  # 44/30 -> 2, 14/30 < 0.5 -> 0, 16/30 -> 1
    {'a': {'x': 2}, 'b': {'z': 1}}
    """
    _check_counts(counts)
    compat = check_compat(compat)
    classes = list(class_order) if class_order is not None else list(counts)
    if size <= 0 or original_size <= 0:
        raise ConfigError(
            f"v4 needs positive sizes. Got size={size}, original_size={original_size}."
        )
    full = {c: counts.get(c, {}) for c in classes}
    r = original_size / size
    skip = CIFAR10_V4_SKIP if skip is None else skip
    excluded = {e.strip().lower() for e in exclude}
    allocation: dict[str, dict[str, int]] = {c: {} for c in classes}
    conflicts: list[KeywordConflict] = []
    seen: set[str] = set()
    for cls in classes:
        for kw, _ in top_k_keywords(full[cls], top_k):
            if kw in seen:
                continue
            seen.add(kw)
            owner, conflict = _v4_owner(kw, full, classes, skip)
            if conflict is not None:
                conflicts.append(conflict)
            total = sum(int(full[c].get(kw, 0)) for c in classes)
            n = (
                0
                if kw.lower() in excluded
                else _v4_count(total, original_size, size, compat)
            )
            if owner is not None and n > 0:
                allocation[owner][kw] = n
    params = {
        "top_k": top_k,
        "original_size": original_size,
        "r": r,
        "exclude": sorted(excluded),
        "skip": {k: list(v) for k, v in skip.items()},
        "compat": compat,
    }
    return KeywordPlan("v4", size, allocation, tuple(conflicts), params)


def _v4_count(total: int, original_size: int, size: int, compat: str) -> int:
    """``0 if c/r < 0.5 else ceil(c/r)`` with ``r = original_size / size``."""
    if compat == AUTHORS:
        x = total / (original_size / size)
        return 0 if x < 0.5 else math.ceil(x)
    if 2 * total * size < original_size:
        return 0
    return -(-total * size // original_size)


C = TypeVar("C", bound=Hashable)


@dataclass(frozen=True, slots=True)
class SharedImage(Generic[C]):
    """An image verified as a good example of several classes (CIFAR-10.1's 7
    ``cruiser`` images in both the automobile and the ship list).

    ``chosen`` is the one class it counts for; ``chosen_by`` says why:
    ``"fewest"`` (the default rule) or ``"choice"`` (the user's).
    """

    item: str
    keyword: str | None
    classes: tuple[C, ...]
    chosen: C
    chosen_by: str


def _class_key(c: Hashable) -> tuple[int, int, str]:
    """Class ids in numeric order (names, if used, after them by text)."""
    return (0, c, "") if isinstance(c, int) else (1, 0, str(c))


def assign_verified(
    latest: Mapping[tuple[str, C], int],
    keyword_of: Mapping[str, str],
    choice: Mapping[str, C] | None = None,
) -> tuple[dict[str, C], list[SharedImage[C]]]:
    """The one class of every image whose latest verify judgment is yes.

    An image verified for one class belongs to it. An image verified for several
    classes (docs/algorithms.md#shared-images) belongs to ``choice[keyword]``
    when given, else to the class with the fewest verified images of its
    keyword, ties to the smallest class id: the released CIFAR-10.1 v6 took its
    ship ``cruiser`` from the 7-image ship list, all 7 also in automobile's 30.

    Parameters
    ----------
    latest : mapping of (item, class) to int
        Latest verify judgment per image and class (1 = yes).
    keyword_of : mapping of item to keyword
    choice : mapping of keyword to class, optional
        Where the shared images of a keyword go; must be one of their classes.

    Returns
    -------
    classes : dict of item to class
    shared : list of SharedImage
        Every image verified for several classes, sorted by keyword and item.

    Examples
    --------
    >>> latest = {("a", 1): 1, ("s", 1): 1, ("s", 8): 1, ("b", 1): 1}
    >>> kw = {"a": "cruiser", "s": "cruiser", "b": "cruiser"}
    >>> classes, shared = assign_verified(latest, kw)
    >>> classes["s"], shared[0].classes, shared[0].chosen_by
    (8, (1, 8), 'fewest')
    >>> assign_verified(latest, kw, {"cruiser": 1})[0]["s"]
    1
    """
    yes: dict[str, list[C]] = {}
    for (item, cls), v in latest.items():
        if v > 0:
            yes.setdefault(item, []).append(cls)
    size = Counter(
        (cls, keyword_of.get(item)) for item, cs in yes.items() for cls in cs
    )
    choice = choice or {}
    out: dict[str, C] = {}
    shared: list[SharedImage[C]] = []
    for item, cs in yes.items():
        if len(cs) == 1:
            out[item] = cs[0]
            continue
        kw = keyword_of.get(item)
        classes = tuple(sorted(cs, key=_class_key))
        want = choice.get(kw) if kw is not None else None
        if want is not None and want not in classes:
            raise ConfigError(
                f"shared images of keyword {kw!r} are verified for {list(classes)}; "
                f"the chosen class {want!r} is not one of them."
            )
        chosen = (
            want
            if want is not None
            else min(classes, key=lambda c: (size[(c, kw)], _class_key(c)))
        )
        out[item] = chosen
        shared.append(
            SharedImage(
                item, kw, classes, chosen, "fewest" if want is None else "choice"
            )
        )
    shared.sort(key=lambda s: (s.keyword or "", s.item))
    return out, shared


def needed_vs_available(
    plan: KeywordPlan, available: Mapping[tuple[str, str], int]
) -> list[dict[str, Any]]:
    """Per (class, keyword): needed, available verified candidates, shortfall."""
    out = []
    for cls, kw, n in plan.rows():
        have = int(available.get((cls, kw), 0))
        out.append(
            {
                "class": cls,
                "keyword": kw,
                "needed": n,
                "available": have,
                "missing": max(0, n - have),
            }
        )
    return out


#: Plan rules by name, for the CLI (``retest plan --rule``).
PLAN_RULES: Registry[Any] = Registry("keyword plan rule")
PLAN_RULES.add("v4", allocate_v4)
PLAN_RULES.add("v6", allocate_v6)
