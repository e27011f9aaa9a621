"""Candidate sources (issue 3): where new images come from.

See docs/algorithms.md#candidate-sources.

Every source is registered in :data:`CANDIDATE_SOURCES` under its kind and offers
the same small surface (*describe → iterate*):

* :meth:`CandidateSource.describe` — kind, path, number of items, options;
* :meth:`CandidateSource.iter_batches` — :class:`SourceBatch` objects covering the
  source's items in one deterministic order, starting at any position, so an
  interrupted ingest resumes where it stopped.

Array-like sources (arrays, IDX, CIFAR pickles, TinyImages, small folder images)
deliver pixels; file sources (large folder images, Flickr downloads) deliver the
file bytes. Items that cannot be read are returned as :class:`SkippedItem` so the
ingest reports them instead of stopping. Persistence is the pipeline's job
(:mod:`retest.stages.ingest`).

The concrete sources are imported here so that :data:`~retest.sources.base.CANDIDATE_SOURCES`
always holds them, whichever module is imported first.
"""

from retest.sources import arrays, files  # noqa: F401  (registers the sources)
