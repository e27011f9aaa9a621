"""Run one ingest in a subprocess (used by the crash-safety tests)."""

from __future__ import annotations

import sys

from retest.project import Project
from retest.sources.base import make_source
from retest.stages.ingest import ingest_source
from retest.store import open_store

if __name__ == "__main__":
    project, kind, path, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with open_store(f"{project}/retest.db") as store:
        ingest_source(
            Project.from_store(project, store),
            make_source(kind, path),
            batch_size=batch,
        )
