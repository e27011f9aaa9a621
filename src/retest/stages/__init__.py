"""The stages: one package per pipeline stage (ingest, dedup, crowd, sample, export,
evaluate, check, ...), each owning its checkpoint and its report.

A stage reads and writes a project (:mod:`retest.project`) and is called by
the CLI and the web app; it imports the core, the adapters and the project layer,
never an edge. A package's implementation modules are private (``_name.py``); what
callers use is exported from the package itself.
"""
