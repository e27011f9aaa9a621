"""Label errors with confident learning (SPEC §9): finders, ranking, noise, ensembles.

Pure core: arrays and records in, arrays and records out; no files, no printing.
"""
