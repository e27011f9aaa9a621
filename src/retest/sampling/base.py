"""Records, registry and shared helpers of the samplers.

Import samplers from :mod:`retest.sampling`, which also registers the
built-in ones; this module only holds what they share, including the registry:
:func:`register_sampler` stores a sampler in :data:`SAMPLERS` with a
:class:`SamplerSpec` (does it make a revision, its revision tag, the inputs it
takes), which the pipeline reads instead of a list of names.
"""

from __future__ import annotations

import hashlib
import inspect
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retest._validation import RandomStateLike, check_random_state
from retest.errors import ConfigError
from retest.names import validate_name
from retest.registry import Registry
from retest.sampling.columnar import ColumnarPool
from retest.sampling.eligibility import CandidateInfo

__all__ = [
    "SAMPLERS",
    "SAMPLER_INPUTS",
    "ClassShortfall",
    "SampleMember",
    "SampleResult",
    "Sampler",
    "SamplerSpec",
    "check_per_class",
    "class_generators",
    "describe_samplers",
    "draw",
    "finish",
    "register_sampler",
    "required_classes",
    "revision_strategies",
    "run_sampler",
    "sampler_spec",
    "seed_of",
    "strategy_tag",
    "strategy_tags",
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
    ``(("keyword tabby", 1),)``; a part named ``eligible`` instead says how many
    eligible images the class had (``(("eligible", 2),)``).
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

#: What the pipeline can hand a sampler besides the pool and the seed; a sampler
#: declares the ones it takes (each is a parameter of the same name).
SAMPLER_INPUTS: dict[str, str] = {
    "per_class": "images per class",
    "previous": "member ids of the revision to start from (carry-over)",
    "classes": "the project's class names (a class without candidates is short)",
    "threshold": "selection-frequency threshold tau",
    "class_thresholds": "per-class tau overrides {class: tau}",
    "min_annotations": "valid assignments a candidate needs (else the sampler's default)",
    "allow_upward": "fill a short selection-frequency bin from higher bins",
    "targets": "per-class histograms of the originals' selection frequencies",
    "keyword_counts": "the keyword plan {class: {keyword: n}}",
    "compat": "'exact' arithmetic (default) or the published code's ('authors')",
}


@dataclass(frozen=True, slots=True)
class SamplerSpec:
    """What the pipeline needs to know to run a registered sampler.

    Parameters
    ----------
    name : str
    summary : str
        One line for ``--help`` and error messages.
    revision : bool
        Makes a test-set revision (``retest sample --strategy`` offers it).
    tag : str, optional
        An earlier spelling of its revision names (``<project>-<tag>-<n>``):
        ImageNetV2's ``a``, ``b`` and ``c``, which retest used for these three
        samplers. New revisions are named by the sampler's name; revisions named
        with the tag are still counted (the numbers go on).
    inputs : tuple of str
        Keys of :data:`SAMPLER_INPUTS` the sampler takes.
    verified_only : bool
        Draw only from candidates verified in a yes/no pass (CIFAR stage 2).
    columnar : bool
        Takes a :class:`~retest.sampling.columnar.ColumnarPool` as its pool
        (the pipeline then never builds a record per candidate); otherwise it is
        given a list of :class:`CandidateInfo`.
    """

    name: str
    summary: str = ""
    revision: bool = False
    tag: str | None = None
    inputs: tuple[str, ...] = ()
    verified_only: bool = False
    columnar: bool = False

    @property
    def revision_tag(self) -> str:
        """The one spelling of new revision names: the sampler's name."""
        return self.name

    @property
    def revision_tags(self) -> tuple[str, ...]:
        """Every spelling its revisions may have (the name, then the earlier tag)."""
        return (self.name,) if self.tag in (None, self.name) else (self.name, self.tag)

    def required_inputs(self) -> tuple[str, ...]:
        """Inputs without a default in the sampler's signature."""
        params = inspect.signature(SAMPLERS.get(self.name)).parameters
        return tuple(
            i for i in self.inputs if params[i].default is inspect.Parameter.empty
        )


_SPECS: dict[str, SamplerSpec] = {}


def register_sampler(
    name: str,
    *,
    summary: str,
    revision: bool = False,
    tag: str | None = None,
    inputs: Sequence[str] = (),
    verified_only: bool = False,
    columnar: bool = False,
) -> Callable[[Sampler], Sampler]:
    """Register a sampler with what the pipeline needs to run it.

    A new sampler is one module with a function decorated like this (plus, for a
    plugin, a ``retest.samplers`` entry point naming it): ``retest sample``
    lists it, names its revisions, and passes it exactly the declared inputs.

    A sampler is called as ``fn(pool, random_state=..., **declared_inputs)``;
    each declared input must be a parameter of ``fn`` (checked here)::

        @register_sampler("first", summary="first images per class",
                          revision=True, tag="f", inputs=("per_class", "classes"))
        def sample_first(pool, *, random_state, per_class=10, classes=None): ...
    """
    unknown = [i for i in inputs if i not in SAMPLER_INPUTS]
    if unknown:
        raise ConfigError(
            f"sampler {name!r} declares unknown inputs {unknown}; known: "
            f"{', '.join(SAMPLER_INPUTS)}."
        )
    spec = SamplerSpec(
        name, summary, revision, tag, tuple(inputs), verified_only, columnar
    )
    if revision:  # the tags become part of revision (and export folder) names
        for t in spec.revision_tags:
            validate_name(t, "revision tag")
    taken = {t: s.name for s in _SPECS.values() if s.revision for t in s.revision_tags}
    clash = [t for t in spec.revision_tags if taken.get(t, name) != name]
    if revision and clash:
        raise ConfigError(
            f"sampler {name!r}: revision tag {clash[0]!r} is already used by "
            f"{taken[clash[0]]!r}; revision names would collide."
        )

    def deco(fn: Sampler) -> Sampler:
        params = inspect.signature(fn).parameters
        missing = [i for i in ("random_state", *inputs) if i not in params]
        if missing:
            raise ConfigError(
                f"sampler {name!r} declares inputs its function does not take: "
                f"{missing}."
            )
        SAMPLERS.add(name, fn)
        _SPECS[name] = spec
        return fn

    return deco


def sampler_spec(name: str) -> SamplerSpec:
    """The spec of sampler ``name`` (unknown names fail with suggestions).

    A sampler registered without :func:`register_sampler` (plain
    ``SAMPLERS.register`` or an entry point) gets a spec that makes no revision.
    """
    SAMPLERS.get(name)
    return _SPECS.get(name, SamplerSpec(name))


def revision_strategies() -> tuple[str, ...]:
    """Names of the samplers that make a test-set revision, sorted."""
    return tuple(n for n in SAMPLERS.names() if sampler_spec(n).revision)


def strategy_tag(name: str) -> str:
    """The tag of ``name``'s new revisions: its name (one spelling for every
    sampler; see :func:`strategy_tags` for the earlier ones)."""
    return sampler_spec(name).revision_tag


def strategy_tags(name: str) -> tuple[str, ...]:
    """Every tag ``name``'s revisions may carry: the name, then the earlier
    ImageNetV2 letter (``matched-frequency`` → ``('matched-frequency', 'b')``)."""
    return sampler_spec(name).revision_tags


def describe_samplers(*, revision_only: bool = True) -> str:
    """``name: summary`` of every (revision) sampler, for ``--help`` texts."""
    names = revision_strategies() if revision_only else tuple(SAMPLERS.names())
    return "; ".join(
        f"{n}: {s}" if (s := sampler_spec(n).summary) else n for n in names
    )


def run_sampler(
    name: str,
    pool: Sequence[CandidateInfo] | ColumnarPool,
    *,
    random_state: RandomStateLike,
    **inputs: Any,
) -> SampleResult:
    """Run sampler ``name`` with the declared ``inputs`` among those given.

    Inputs the sampler does not declare are ignored (a caller can offer them all),
    as are inputs given as None (the sampler's default applies); a required input
    that is missing is an error naming what it is.
    """
    spec = sampler_spec(name)
    unknown = sorted(set(inputs) - set(SAMPLER_INPUTS))
    if unknown:
        raise ConfigError(
            f"unknown sampler inputs {unknown}; known: {', '.join(SAMPLER_INPUTS)}."
        )
    kwargs = {k: inputs[k] for k in spec.inputs if inputs.get(k) is not None}
    for k in spec.required_inputs():
        if k not in kwargs:
            raise ConfigError(f"sampler {name!r} needs {k}: {SAMPLER_INPUTS[k]}.")
    return SAMPLERS.get(name)(pool, random_state=random_state, **kwargs)


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
    pool: Iterable[CandidateInfo] | ColumnarPool, classes: Iterable[str] | None
) -> list[str]:
    """Sorted classes to sample: the given ones, else those present in the pool."""
    if classes is not None:
        names = sorted({str(c) for c in classes})
        if names:
            return names
    if isinstance(pool, ColumnarPool):
        return pool.present_classes()
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
