"""Records, registry and shared helpers of the samplers.

Import samplers from :mod:`retest.build.sampling`, which also registers the
built-in ones; this module only holds what they share.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retest._validation import RandomStateLike, check_random_state
from retest.build.eligibility import CandidateInfo
from retest.errors import ConfigError
from retest.registry import Registry

__all__ = [
    "SAMPLERS",
    "ClassShortfall",
    "SampleMember",
    "SampleResult",
    "Sampler",
    "check_per_class",
    "class_generators",
    "draw",
    "finish",
    "required_classes",
    "seed_of",
]

HOW = ("carried", "sampled", "upward")


@dataclass(frozen=True, slots=True)
class SampleMember:
    """One image of a sample and how it got there.

    Parameters
    ----------
    id, class_name : str
    how : {"carried", "sampled", "upward"}
        Kept from the previous revision, newly drawn, or drawn from a higher
        selection-frequency bin because a bin ran short (MatchedFrequency).
    bin : int, optional
        The image's own selection-frequency bin (the bin it came from).
    target_bin : int, optional
        The target-histogram bin whose slot it fills; differs from ``bin`` only
        for upward-sampled images.
    keyword : str, optional
        Keyword (CIFAR keyword sampler).
    split : str, optional
        ``"train"`` or ``"test"`` (train/test builder).
    """

    id: str
    class_name: str
    how: str = "sampled"
    bin: int | None = None
    target_bin: int | None = None
    keyword: str | None = None
    split: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "class_name": self.class_name,
            "how": self.how,
            "bin": self.bin,
            "target_bin": self.target_bin,
            "keyword": self.keyword,
            "split": self.split,
        }


@dataclass(frozen=True, slots=True)
class ClassShortfall:
    """A class (or keyword) that did not get the images it needs.

    ``detail`` lists the missing count per part, e.g. ``(("bin 2", 3),)`` or
    ``(("keyword tabby", 1),)``.
    """

    class_name: str
    needed: int
    got: int
    reason: str
    detail: tuple[tuple[str, int], ...] = ()

    @property
    def missing(self) -> int:
        return self.needed - self.got

    def as_dict(self) -> dict[str, Any]:
        return {
            "class_name": self.class_name,
            "needed": self.needed,
            "got": self.got,
            "missing": self.missing,
            "reason": self.reason,
            "detail": [list(d) for d in self.detail],
        }


@dataclass(frozen=True, slots=True)
class SampleResult:
    """What a sampler returns: members, validity, shortfalls and metadata.

    ``members`` are ordered by (class, id); a sample is a set, any release order
    is the exporter's business. ``is_valid`` is True iff ``shortfall`` is empty.
    """

    strategy: str
    members: tuple[SampleMember, ...]
    shortfall: tuple[ClassShortfall, ...]
    parameters: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None

    @property
    def is_valid(self) -> bool:
        return not self.shortfall

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.members]

    def by_class(self) -> dict[str, list[SampleMember]]:
        out: dict[str, list[SampleMember]] = defaultdict(list)
        for m in self.members:
            out[m.class_name].append(m)
        return dict(sorted(out.items()))

    def class_counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.by_class().items()}

    def as_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "seed": self.seed,
            "is_valid": self.is_valid,
            "parameters": self.parameters,
            "members": [m.as_dict() for m in self.members],
            "shortfall": [s.as_dict() for s in self.shortfall],
            "metadata": self.metadata,
        }


Sampler = Callable[..., SampleResult]
SAMPLERS: Registry[Sampler] = Registry("sampler", entry_point_group="retest.samplers")


def seed_of(random_state: RandomStateLike) -> int | None:
    """The integer seed to record, when the caller gave one."""
    if isinstance(random_state, (int, np.integer)) and not isinstance(
        random_state, bool
    ):
        return int(random_state)
    return None


def check_per_class(per_class: int) -> int:
    if int(per_class) != per_class or per_class < 1:
        raise ConfigError(f"per_class must be a positive integer. Got {per_class!r}.")
    return int(per_class)


def class_generators(
    random_state: RandomStateLike, classes: Sequence[str]
) -> dict[str, np.random.Generator]:
    """One independent generator per class, derived from ``random_state``.

    Each class's draws depend only on the seed and the class name, so changing
    one class's candidates never changes another class's sample.
    """
    rng = check_random_state(random_state)
    base = int(rng.integers(0, 2**63 - 1))
    out = {}
    for name in classes:
        digest = hashlib.sha256(name.encode()).digest()
        words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
        out[name] = np.random.default_rng(np.random.SeedSequence([base, *words]))
    return out


def draw(rng: np.random.Generator, pool: Sequence[str], k: int) -> list[str]:
    """``k`` distinct items of ``pool`` uniformly at random (all if ``k >= len``).

    The result keeps ``pool`` order, so a sorted pool gives a sorted draw.
    """
    if k <= 0:
        return []
    if k >= len(pool):
        return list(pool)
    idx = rng.choice(len(pool), size=k, replace=False)
    return [pool[i] for i in sorted(int(i) for i in idx)]


def required_classes(
    pool: Iterable[CandidateInfo], classes: Iterable[str] | None
) -> list[str]:
    """Sorted classes to sample: the given ones, else those present in the pool."""
    if classes is not None:
        names = sorted({str(c) for c in classes})
        if names:
            return names
    return sorted({c.class_name for c in pool})


def finish(
    strategy: str,
    members: Iterable[SampleMember],
    shortfall: Iterable[ClassShortfall],
    *,
    parameters: dict[str, Any],
    metadata: dict[str, Any],
    random_state: RandomStateLike,
) -> SampleResult:
    """Assemble a :class:`SampleResult` with members in (class, id) order."""
    ms = tuple(sorted(members, key=lambda m: (m.class_name, m.id)))
    ids = [m.id for m in ms]
    if len(set(ids)) != len(ids):  # pragma: no cover - a sampler bug, not user error
        raise AssertionError(f"{strategy}: a sample must not repeat an image")
    return SampleResult(
        strategy,
        ms,
        tuple(sorted(shortfall, key=lambda s: s.class_name)),
        parameters,
        metadata,
        seed_of(random_state),
    )
