"""Checkpoints of resumable stages, kept in the project store.

Every resumable stage (ingest, dedup, the demo's steps, the crowd export) records
its progress the same way, through :class:`Checkpoint`:

* a **run** is one piece of work of a stage, named by a key that fingerprints
  its inputs (ingest: the source's description; dedup: the candidate and
  reference ids and the parameters; the demo: the step). Changed inputs make a
  new run, so a stale run is never resumed. The run's row
  ``stages(<stage>, <run>)`` holds its done flag (and the path of its report,
  if it writes one);
* a run's finished **chunks** are rows ``stages(<stage>:<run>, <chunk>)``; a
  restart skips them;
* what a run needs to resume or to be listed (counts so far, its description, a
  step's result) is its **state**: JSON objects in the store's artifact
  manifest, named ``<stage>:<run>/<name>``. State is read back only from the
  store; files under ``reports/`` are outputs for people, never read back.

State that outlives a run (dedup's per-metric settings, which later runs and
other stages read) is kept under a stage-wide name with :func:`save_state` and
read with :func:`load_state`.

Run and chunk rows (and dedup's ``dedup/metric/<name>`` states) are the rows the
stages wrote before this module existed, so projects created by earlier versions
keep their checkpoints. What those versions kept only in files is not read: a
demo step they finished runs once more, an ingest job they left interrupted
resumes at its checkpoint but its report counts only the batches stored since,
and its jobs are listed once they run again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retest._version import __version__
from retest.errors import NotFoundError
from retest.project._project import Project
from retest.store.rows import ArtifactRecord, StageCheckpoint, utc_now

__all__ = ["Checkpoint", "list_states", "load_state", "save_state", "stage_runs"]


def save_state(
    project: Project,
    name: str,
    state: Mapping[str, Any],
    *,
    stage: str,
    path: str = "",
    sha256: str = "",
) -> None:
    """Store (or replace) the JSON object ``state`` under ``name``.

    Parameters
    ----------
    project : Project
    name : str
        Record name, unique in the project.
    state : mapping
        JSON-serialisable values.
    stage : str
        Stage (or ``<stage>:<run>``) the record belongs to; lists filter on it.
    path, sha256 : str
        The file the state describes (relative to the project root) and its
        hash, when there is one.
    """

    project.store.artifacts.put(
        ArtifactRecord(name, path, sha256, stage, dict(state), __version__, utc_now())
    )


def load_state(project: Project, name: str) -> dict[str, Any] | None:
    """The state stored under ``name`` (plus ``created``), or None.

    Parameters
    ----------
    project : Project
    name : str

    Returns
    -------
    dict or None
    """
    try:
        rec = project.store.artifacts.get(name)
    except NotFoundError:
        return None
    return {**dict(rec.params), "created": rec.created}


def list_states(
    project: Project, stage: str, prefix: str = ""
) -> dict[str, dict[str, Any]]:
    """Every state of ``stage`` whose name starts with ``prefix`` (plus
    ``created``), by name.

    Parameters
    ----------
    project : Project
    stage : str
        As given to :func:`save_state`.
    prefix : str

    Returns
    -------
    dict of str to dict
    """
    return {
        r.name: {**dict(r.params), "created": r.created}
        for r in project.store.artifacts.list(stage=stage)
        if r.name.startswith(prefix)
    }


def stage_runs(project: Project, stage: str) -> list[StageCheckpoint]:
    """The run rows of ``stage`` (key = run, ``done`` flag), ordered by key.

    Parameters
    ----------
    project : Project
    stage : str

    Returns
    -------
    list of StageCheckpoint
    """
    return project.store.stages.list(stage)


class Checkpoint:
    """One run of a resumable stage: done flag, finished chunks and state.

    Parameters
    ----------
    project : Project
    stage : str
        Stage name (``"ingest"``, ``"dedup"``, ``"demo"``, ...).
    run : str
        Key of the run: a fingerprint of its inputs, or a step name.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with Project.init(d, name="demo", classes=["cat"]) as p:
    ...         cp = Checkpoint(p, "count", "inputs-1")
    ...         cp.begin()
    ...         cp.save("chunk/0", {"n": 3})
    ...         cp.mark("0")
    ...         again = Checkpoint(p, "count", "inputs-1")
    ...         again.done, again.done_chunks(), again.load("chunk/0")["n"]
    (False, {'0'}, 3)
    """

    def __init__(self, project: Project, stage: str, run: str) -> None:
        self.project = project
        self.stage = stage
        self.run = run

    @property
    def chunk_stage(self) -> str:
        """``<stage>:<run>``: the stage string of this run's chunk rows."""
        return f"{self.stage}:{self.run}"

    def __repr__(self) -> str:
        return f"Checkpoint({self.stage!r}, {self.run!r})"

    # -- the run
    def row(self) -> StageCheckpoint | None:
        """The run's row, or None before :meth:`begin` / :meth:`finish`."""
        return self.project.store.stages.get(self.stage, key=self.run)

    @property
    def done(self) -> bool:
        """Whether the run finished (:meth:`finish`)."""
        row = self.row()
        return row is not None and row.done

    def begin(self, *, artifact: str | None = None) -> None:
        """Record the run as started and not finished (``artifact``: its report)."""
        self._mark_run(False, artifact)

    def finish(self, *, artifact: str | None = None) -> None:
        """Record the run as finished (``artifact``: its report)."""
        self._mark_run(True, artifact)

    def forget(self) -> None:
        """Drop the run's row (a run that stored nothing leaves no trace)."""
        self.project.store.stages.forget(self.stage, self.run)

    def _mark_run(self, done: bool, artifact: str | None) -> None:
        self.project.store.stages.mark(
            StageCheckpoint(self.stage, self.run, done=done, artifact=artifact)
        )

    # -- chunks
    def done_chunks(self) -> set[str]:
        """Keys of the chunks marked finished."""
        return self.project.store.stages.done_keys(self.chunk_stage)

    def mark(self, chunk: str) -> None:
        """Record chunk ``chunk`` as finished (after its results are stored)."""
        self.project.store.stages.mark(StageCheckpoint(self.chunk_stage, chunk))

    def reset(self) -> int:
        """Forget every finished chunk (the next run recomputes them); returns how
        many there were."""
        return self.project.store.stages.reset(self.chunk_stage)

    # -- state
    def save(
        self, name: str, state: Mapping[str, Any], *, path: str = "", sha256: str = ""
    ) -> None:
        """Store the run's state ``name`` (see :func:`save_state`)."""
        save_state(
            self.project,
            f"{self.chunk_stage}/{name}",
            state,
            stage=self.chunk_stage,
            path=path,
            sha256=sha256,
        )

    def load(self, name: str) -> dict[str, Any] | None:
        """The run's state ``name``, or None."""
        return load_state(self.project, f"{self.chunk_stage}/{name}")

    def states(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        """Every state of the run whose name starts with ``prefix``, by name."""
        head = f"{self.chunk_stage}/"
        found = list_states(self.project, self.chunk_stage, head + prefix)
        return {name[len(head) :]: state for name, state in found.items()}
