"""CIFAR-10.1 keyword-count sampler (docs/algorithms.md#keyword-plans, #keyword-count).

The plan gives ``n_k`` new images per (class, keyword). Candidates are the
verified images of the keyword minus the blacklist minus those whose nearest
original image is at L2 distance ≤ ``max_nn_distance`` (1000).

* **v4** (no previous revision): draw ``n_k`` per keyword uniformly.
* **v6** (``previous`` given): start from the previous revision's still-eligible
  images of the keyword; remove a random subset when it has more than ``n_k``,
  add a random draw from the other candidates when it has fewer.

Decisions (documented deviations): classes and keywords are visited in sorted
order with a generator per class, never in Python ``set`` order
(docs/algorithms.md#deviations); a keyword with too few candidates keeps all it has and
is reported as a shortfall (the original notebook skipped it and printed a message), so
the result is visibly invalid rather than silently short. Previous members that
became ineligible (e.g. blacklisted in review) are dropped before the
add/remove step, which is what the review loop needs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from retest._validation import RandomStateLike
from retest.errors import ConfigError
from retest.sampling.base import (
    ClassShortfall,
    SampleMember,
    SampleResult,
    class_generators,
    draw,
    finish,
    register_sampler,
)
from retest.sampling.eligibility import CandidateInfo, EligibilityRules, split_eligible

__all__ = ["sample_keyword_counts"]


def _check_counts(
    keyword_counts: Mapping[str, Mapping[str, int]],
) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for cls in sorted(keyword_counts):
        row = {}
        for kw in sorted(keyword_counts[cls]):
            n = keyword_counts[cls][kw]
            if int(n) != n or n < 0:
                raise ConfigError(
                    f"keyword count of {cls!r}/{kw!r} must be a non-negative integer. "
                    f"Got {n!r}."
                )
            if n:
                row[kw] = int(n)
        out[str(cls)] = row
    return out


@register_sampler(
    "keyword-count",
    summary="the keyword plan's count of verified images per keyword (CIFAR-10.1)",
    revision=True,
    inputs=("keyword_counts", "previous"),
    verified_only=True,
)
def sample_keyword_counts(
    pool: Sequence[CandidateInfo],
    keyword_counts: Mapping[str, Mapping[str, int]],
    *,
    random_state: RandomStateLike,
    previous: Iterable[str] | None = None,
    max_nn_distance: float | None = 1000.0,
) -> SampleResult:
    """Draw ``keyword_counts[class][keyword]`` verified images per keyword.

    Parameters
    ----------
    pool : sequence of CandidateInfo
        Verified candidates, each with ``keyword`` (and ``nn_distance`` if known).
    keyword_counts : mapping ``{class: {keyword: n}}``
        The keyword plan (v4 counts grouped by class, or v6/v7 counts).
    random_state : int or numpy.random.Generator
    previous : iterable of str, optional
        Member ids of the revision to start from (v6 behaviour).
    max_nn_distance : float or None
        Candidates whose nearest original is at most this far are excluded.

    Examples
    --------
    >>> pool = [CandidateInfo(f"t{i}", "cat", keyword="tabby") for i in range(4)]
    >>> r = sample_keyword_counts(pool, {"cat": {"tabby": 2}}, random_state=0)
    >>> r.class_counts(), r.is_valid
    ({'cat': 2}, True)
    """
    plan = _check_counts(keyword_counts)
    rules = EligibilityRules(0, None, {}, False, max_nn_distance)
    eligible, report = split_eligible(pool, rules)
    by_kw: dict[tuple[str, str], list[str]] = defaultdict(list)
    for cls, cands in eligible.items():
        for c in cands:  # sorted by id
            by_kw[(cls, c.keyword or "")].append(c.id)
    prev = None if previous is None else frozenset(previous)
    rngs = class_generators(random_state, list(plan))
    members: list[SampleMember] = []
    short: list[ClassShortfall] = []
    per_keyword: dict[str, dict[str, Any]] = {}
    for cls, row in plan.items():
        missing: list[tuple[str, int]] = []
        got_cls = 0
        for kw, n in row.items():
            ids = by_kw.get((cls, kw), [])
            chosen = _keyword_draw(cls, kw, ids, n, prev, rngs[cls])
            members += chosen
            got_cls += len(chosen)
            per_keyword[f"{cls}/{kw}"] = {
                "needed": n,
                "got": len(chosen),
                "eligible": len(ids),
            }
            if len(chosen) < n:
                missing.append((f"keyword {kw}", n - len(chosen)))
        if missing:
            short.append(
                ClassShortfall(
                    cls, sum(row.values()), got_cls, "too_few_eligible", tuple(missing)
                )
            )
    params = {
        "keyword_counts": plan,
        "mode": "v4" if prev is None else "v6",
        "max_nn_distance": max_nn_distance,
    }
    meta = {"exclusions": report.as_dict(), "per_keyword": per_keyword}
    return finish(
        "keyword-count",
        members,
        short,
        parameters=params,
        metadata=meta,
        random_state=random_state,
    )


def _keyword_draw(
    cls: str,
    kw: str,
    ids: list[str],
    n: int,
    prev: frozenset[str] | None,
    rng: Any,
) -> list[SampleMember]:
    if prev is None:
        return [SampleMember(i, cls, "sampled", keyword=kw) for i in draw(rng, ids, n)]
    existing = [i for i in ids if i in prev]
    if len(existing) > n:
        gone = frozenset(draw(rng, existing, len(existing) - n))
        existing = [i for i in existing if i not in gone]
    have = frozenset(existing)
    added = draw(rng, [i for i in ids if i not in have], n - len(existing))
    return [SampleMember(i, cls, "carried", keyword=kw) for i in existing] + [
        SampleMember(i, cls, "sampled", keyword=kw) for i in added
    ]
