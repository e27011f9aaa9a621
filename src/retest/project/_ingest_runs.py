"""The ingest jobs of a project as checkpoints record them: which did not finish,
and the command that resumes one.

Read by every stage that must refuse an incomplete candidate pool (dedup,
check, the eligibility decision) and written by :mod:`retest.stages.ingest`:
it lives below the stages so that none of them imports the ingest stage for it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from retest.project._checkpoint import Checkpoint, stage_runs
from retest.project._project import Project
from retest.store.artifacts import writers_lock

__all__ = [
    "INGEST_STAGE",
    "interrupted_ingests",
    "missing_index_problem",
    "resume_command",
    "unfinished_ingest_problem",
]

INGEST_STAGE = "ingest"


def resume_command(
    project: Project,
    desc: Mapping[str, Any],
    name: str | None,
    *,
    options: Sequence[str] = (),
) -> str:
    """The ``retest source add`` command line of a job, from its source description.

    Parameters
    ----------
    project : Project
        Named by ``--project``.
    desc : mapping
        The source's description (:meth:`CandidateSource.describe`).
    name : str, optional
        The source name (``--name`` when it differs from the kind).
    options : sequence of str
        Replaces the options rebuilt from ``desc`` (``add_source`` passes the
        ones it was given, which a description cannot always restore, e.g. a
        keywords file).

    Returns
    -------
    str
        A shell-quoted command line.
    """
    kind = str(desc.get("kind", ""))
    args = ["retest", "source", "add", kind, str(desc.get("path", ""))]
    if options:
        args += options
    else:
        for key, flag in (
            ("class_name", "--class"),
            ("labels_path", "--labels"),
            ("images_dir", "--images"),
        ):
            if desc.get(key):
                args += [flag, str(desc[key])]
        if desc.get("from_colour"):
            args += ["--mode", str(desc.get("mode"))]
        kws = desc.get("keywords")
        if kws:
            args += ["--keywords", ",".join(kws)]
    if name and name != kind:
        args += ["--name", name]
    args += ["--project", str(project.root.resolve())]
    return shlex.join(args)


def interrupted_ingests(project: Project) -> list[str]:
    """The command that resumes each ingest job that started but did not complete.

    A job is listed from the moment it stored its first batch until it finishes:
    killed runs, runs that failed part-way, and runs still going in another
    process. Stages that read the candidates should refuse to run while this is
    not empty (their input is incomplete).

    Parameters
    ----------
    project : Project

    Returns
    -------
    list of str
        One command line per interrupted job, ordered by job key.
    """
    out = []
    for run in stage_runs(project, INGEST_STAGE):
        if run.done:
            continue
        rep = Checkpoint(project, INGEST_STAGE, run.key).load("report") or {}
        cmd = rep.get("command") or (
            resume_command(project, rep["source"], rep.get("name"))
            if rep.get("source")
            else f"retest source list --project {shlex.quote(str(project.root))}"
        )
        out.append(cmd)
    return out


def _ingest_running(project: Project) -> bool | None:
    """Whether an ingest (or reference registration) runs now in some process:
    they hold the pixel writers' lock shared while they run. None when the lock
    cannot be tried (a read-only project folder)."""
    if not project.arrays_dir.is_dir():
        return False
    try:
        with writers_lock(project.arrays_dir, exclusive=True, wait=False) as took:
            return not took
    except OSError:
        return None


def unfinished_ingest_problem(project: Project) -> str | None:
    """Why the candidate pool is incomplete, as the start of a one-line error
    (every stage that refuses an incomplete pool says it this way), or None.

    An unfinished job is either running now in another process (wait for it)
    or was interrupted (its resume command finishes it).
    """
    pending = interrupted_ingests(project)
    if not pending:
        return None
    n = len(pending)
    running = _ingest_running(project)
    if running:
        return (
            f"an ingest is still running in another process ({n} unfinished); "
            f"wait for it to end (if it was stopped, finish it: `{pending[0]}`)"
        )
    state = "was interrupted" if running is False else "was interrupted or still runs"
    return f"an ingest {state} ({n} unfinished); finish it first: `{pending[0]}`"


def missing_index_problem(project: Project, *, alone: bool = False) -> str | None:
    """One line when a killed ingest left indexes of the candidates dropped
    (:meth:`~retest.store.base.CandidateRepo.defer_indexes`) and no ingest runs
    now to rebuild them, with the command that does; else None. ``alone``: the
    caller holds the writers' lock exclusively (no ingest can run).

    Answers stay right without them, only keyword queries are slower, so this is
    a notice, not a refusal. ``retest check --repair`` rebuilds them, and so does
    the end of every ingest.
    """
    missing = project.store.candidates.missing_indexes()
    if not missing or (not alone and _ingest_running(project)):
        return None
    return (
        f"the candidates' index {', '.join(missing)} is missing (an ingest was "
        "stopped before it rebuilt it): answers are right, keyword queries "
        "slower; rebuild it with `retest check --repair --project "
        f"{shlex.quote(str(project.root))}`"
    )
