"""Overlap-minimising train/test builder of CIFAR-10.2.

See docs/algorithms.md#train-test-split.

Per class, take up to ``per_class`` eligible images that are *not* in the original
training set (in pool order, i.e. the caller's index order), fill up to
``per_class`` with the overlapping ones in order, then split each class at random
into ``round(train_fraction * n)`` training images and the rest for testing.
``policy="first"`` reproduces the "first_1k" alternative (pool order only).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from typing import Literal

from retest._validation import RandomStateLike, check_fraction
from retest.errors import ConfigError, InputValidationError
from retest.sampling.base import (
    SAMPLERS,
    ClassShortfall,
    SampleMember,
    SampleResult,
    check_per_class,
    class_generators,
    draw,
    finish,
)
from retest.sampling.eligibility import CandidateInfo, EligibilityRules, check_candidate

__all__ = ["build_train_test"]


@SAMPLERS.register("train-test")
def build_train_test(
    pool: Sequence[CandidateInfo],
    *,
    random_state: RandomStateLike = 200,
    per_class: int = 1000,
    train_fraction: float = 0.8,
    in_original_train: Collection[str] = (),
    policy: Literal["min_overlap", "first"] = "min_overlap",
    classes: Iterable[str] | None = None,
) -> SampleResult:
    """Build a class-balanced training and test set from a verified pool.

    Parameters
    ----------
    pool : sequence of CandidateInfo
        Candidates in index order (the order decides which are preferred).
    random_state : int or numpy.random.Generator
        Seed of the split (CIFAR-10.2 used 200).
    per_class : int
        Images per class before the split.
    train_fraction : float
        Share of each class that goes to training (rounded half to even, as
        ``pandas.DataFrame.sample(frac=…)``).
    in_original_train : collection of str
        Ids already in the original training set (overlap to minimise).
    policy : {"min_overlap", "first"}

    Returns
    -------
    SampleResult
        Members carry ``split`` = ``"train"`` or ``"test"``; metadata has per
        class ``overlap`` (overlapping images used) and ``n_train``/``n_test``.

    Examples
    --------
    >>> pool = [CandidateInfo(f"a{i}", "a") for i in range(6)]
    >>> r = build_train_test(pool, per_class=5, in_original_train={"a0"})
    >>> sorted(m.id for m in r.members), sum(m.split == "train" for m in r.members)
    (['a1', 'a2', 'a3', 'a4', 'a5'], 4)
    """
    per_class = check_per_class(per_class)
    frac = check_fraction(train_fraction, "train_fraction")
    if policy not in ("min_overlap", "first"):
        raise ConfigError(
            f"policy must be 'min_overlap' or 'first'. Got {policy!r} instead."
        )
    rules = EligibilityRules(0, None, {}, False)
    overlap = frozenset(in_original_train)
    ordered: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    for c in pool:
        if c.id in seen:
            raise InputValidationError(f"candidate {c.id!r} appears twice in the pool.")
        seen.add(c.id)
        if check_candidate(c, rules) is None:
            ordered[c.class_name].append(c.id)
    names = sorted(
        {str(x) for x in classes}
        if classes is not None
        else {c.class_name for c in pool}
    )
    rngs = class_generators(random_state, names)
    members: list[SampleMember] = []
    short: list[ClassShortfall] = []
    meta: dict[str, dict[str, int]] = {}
    for name in names:
        ids = ordered.get(name, [])
        if policy == "min_overlap":
            ids = [i for i in ids if i not in overlap] + [
                i for i in ids if i in overlap
            ]
        chosen = ids[:per_class]
        n_train = round(frac * len(chosen))
        train = frozenset(draw(rngs[name], chosen, n_train))
        members += [
            SampleMember(i, name, "sampled", split="train" if i in train else "test")
            for i in chosen
        ]
        meta[name] = {
            "overlap": sum(i in overlap for i in chosen),
            "n_train": len(train),
            "n_test": len(chosen) - len(train),
        }
        if len(chosen) < per_class:
            short.append(
                ClassShortfall(
                    name,
                    per_class,
                    len(chosen),
                    "too_few_eligible",
                    (("eligible", len(ids)),),
                )
            )
    params = {"per_class": per_class, "train_fraction": frac, "policy": policy}
    return finish(
        "train-test",
        members,
        short,
        parameters=params,
        metadata={"per_class": meta},
        random_state=random_state,
    )
