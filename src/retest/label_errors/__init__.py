"""Label errors with confident learning: finders, ranking, noise, ensembles.

See docs/algorithms.md#label-errors.

Pure core: arrays and records in, arrays and records out; no files, no printing.
"""
