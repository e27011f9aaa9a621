"""What a plug-in needs: the base classes, registries and helpers of samplers, dedup
metrics, candidate sources and web pages, in one documented place.

A plug-in imports from here (and ``retest`` itself) only; the modules behind these
names are implementation and may move. Each name is loaded on first use, so a
sampler plug-in does not import the web app. The README's "Extending retest"
shows one plug-in of each kind; a package names its module under the entry-point
group of its kind (``retest.samplers``, ``retest.dedup_metrics``,
``retest.sources``, ``retest.web_pages``) to be loaded by the ``retest`` command.

Samplers
    :func:`register_sampler` registers a function of the candidate pool
    (:class:`CandidateInfo` records) that returns a :class:`SampleResult`, built
    with :func:`finish` from :class:`SampleMember` and :class:`ClassShortfall`;
    :func:`class_generators` gives one seeded generator per class,
    :func:`required_classes` the classes to draw. :data:`SAMPLERS` holds them.
Dedup metrics
    A :class:`DedupMetric` (``kind`` ``exact``: a :class:`Space` of vectors for
    exact kNN; ``shortlist``: pair distances on the shortlist), added to
    :data:`DEDUP_METRICS`; it reads the pixels from a :class:`MetricContext`.
Candidate sources
    A :class:`CandidateSource` yielding :class:`SourceBatch` es of
    :class:`SourceItem` s, registered with ``CANDIDATE_SOURCES.register(kind)``.
Web pages
    A FastAPI router mounted by :func:`register_page` (its nav-bar link too);
    routes take :data:`StateDep` (the app's state: ``state.live.read_project()``
    is this thread's read-only project), :data:`ReviewerDep` or
    :data:`AnnotatorDep` (who may see them), and answer with :func:`render`.
    :func:`list_ingests` is the ingest jobs' summary a page may show.
Errors
    Raise :class:`ConfigError` for a bad option value and
    :class:`InputValidationError` for bad input data: the CLI prints them as one
    ``error:`` line.

Examples
--------
>>> from retest.extend import SAMPLERS, register_sampler
>>> "class-balanced" in SAMPLERS.names()
True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Name → the module that defines it (the one import path inside retest).
_EXPORTS: dict[str, str] = {
    # samplers
    "SAMPLERS": "retest.sampling.base",
    "CandidateInfo": "retest.sampling.eligibility",
    "ClassShortfall": "retest.sampling.base",
    "SampleMember": "retest.sampling.base",
    "SampleResult": "retest.sampling.base",
    "class_generators": "retest.sampling.base",
    "finish": "retest.sampling.base",
    "register_sampler": "retest.sampling.base",
    "required_classes": "retest.sampling.base",
    # dedup metrics
    "DEDUP_METRICS": "retest.stages.dedup._metrics",
    "DedupMetric": "retest.stages.dedup._metrics",
    "MetricContext": "retest.stages.dedup._metrics",
    "Space": "retest.stages.dedup._metrics",
    # candidate sources
    "CANDIDATE_SOURCES": "retest.sources.base",
    "CandidateSource": "retest.sources.base",
    "SourceBatch": "retest.sources.base",
    "SourceItem": "retest.sources.base",
    # web pages
    "PAGES": "retest.web.pages",
    "register_page": "retest.web.pages",
    "AnnotatorDep": "retest.web.deps",
    "ReviewerDep": "retest.web.deps",
    "StateDep": "retest.web.deps",
    "render": "retest.web.views",
    "list_ingests": "retest.stages.ingest",
    # errors a plug-in raises
    "ConfigError": "retest.errors",
    "InputValidationError": "retest.errors",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # static checkers see the real objects
    pass


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'retest.extend' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
