"""The ingest stage: candidate sources → the project store (resumable, idempotent).

For each batch a source yields, in this order:

1. content ids (sha256 of the canonical pixel array, or of the file bytes); exact
   copies (already stored, or repeated within the batch) are counted as duplicates;
2. pixels of new items are appended to ``arrays/candidates_<shape>`` (durable
   before any row points at them), files are written to ``images/<sha256>``;
3. candidate rows are inserted (insert-or-ignore by id, one transaction);
4. the batch's counts and unreadable items are stored as its state, and appended
   to ``reports/ingest/<job>.log.jsonl`` for people (fsynced);
5. the batch's end position is checkpointed in the store.

Progress lives in the store (:class:`retest.project._checkpoint.Checkpoint`,
stage ``ingest``, run = the job key): the job's description and report, each
batch's counts, the finished batches. The files under ``reports/ingest/`` are
outputs only. A process killed anywhere resumes after the last checkpoint. The batch being
processed when it died is redone: its rows are already stored, and since those rows
carry this source's name and reference they are recognised as this job's own and
counted as new again, not as duplicates (and their pixels are not appended again).
Nothing is lost and nothing is stored twice. The final report
(``reports/ingest/<job>.json``) is recorded as an artifact. A rerun of a complete
job (same kind, path and options) does nothing and returns the earlier report
marked ``already_ingested``; a job keeps the source name it started with.

Leftovers: every check that can fail (class names, labels) runs before a batch's
pixels are appended. Pixels a killed run appended without their rows are given
back by the next ingest (at its start, when no other writer runs) or by
``retest check --repair``, and so are the pixel-array header temporaries a
killed writer left in ``arrays/`` (listed in the report's
``removed_temporaries``); pixels whose rows another process stored first
(concurrent ingests of overlapping sources) are given back right after the
insert, and "new" counts what the insert actually added. A run that fails before
storing anything leaves no job behind. :func:`interrupted_ingests` lists the jobs
that started but did not complete, with the command that resumes each.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shlex
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from retest._output import PROJECT_ENTRIES
from retest._progress import ProgressCallback, report
from retest._validation import check_batch_size, check_labels
from retest.errors import (
    ConfigError,
    InputValidationError,
    RetestWarning,
    StageError,
)
from retest.project import (
    INGEST_STAGE,
    Checkpoint,
    Project,
    interrupted_ingests,
    resume_command,
    stage_runs,
)
from retest.sources.base import (
    CandidateSource,
    SourceBatch,
    make_source,
    read_keywords_file,
)
from retest.stages.ingest._log import (
    MAX_LISTED_DUPLICATES,
    REPORT_DIR,
    IngestReport,
    Tally,
    append_log_line,
)
from retest.stages.ingest._names import check_source_name
from retest.stages.ingest._writer import (
    ARRAY_DIR,
    BatchWriter,
    PreparedBatch,
    remove_stale_temporaries,
)
from retest.stages.reference import load_tinyimages_index
from retest.store.artifacts import (
    dumps_json,
    record_artifact,
    write_bytes,
    writers_lock,
)
from retest.store.rows import ClassRow, utc_now

__all__ = [
    "INGEST_STAGE",
    "FaultHook",
    "Ingest",
    "add_source",
    "ingest_job_key",
    "ingest_source",
    "interrupted_ingests",
    "list_ingests",
    "load_tinyimages_index",
    "reference_mode",
    "resume_command",
]

# Called with (moment, batch number): see Ingest.fault_hook.
FaultHook = Callable[[str, int], None]


def ingest_job_key(source: CandidateSource) -> str:
    """16-hex key of the source's description (kind, resolved path, options): the
    ingest run's inputs fingerprint."""
    text = json.dumps(source.describe(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# Batches whose rows may be waiting for their commit while the next is prepared.
_IN_FLIGHT = 2


def _resume_position(cp: Checkpoint) -> int:
    return max((int(k) for k in cp.done_chunks()), default=0)


def _batch_state_name(line: Mapping[str, Any]) -> str:
    return f"batch/{line['start']:012d}-{line['stop']:012d}-{line['part']}"


def _tally(lines: Iterable[Mapping[str, Any]], resume: int) -> Tally:
    """Counts of the batches before ``resume``, from their stored states.

    States at or after ``resume`` belong to work that is redone (a batch whose
    state was stored but whose checkpoint was not); a redone batch replaces its
    own state.
    """
    tally = Tally(processed=resume)
    lines = [
        line
        for line in lines
        if int(line["stop"]) <= resume and int(line["start"]) < resume
    ]
    for line in sorted(lines, key=lambda x: (x["start"], x["stop"], x["part"])):
        tally.add(line)
    return tally


def ingest_source(
    project: Project,
    source: CandidateSource,
    *,
    name: str | None = None,
    batch_size: int | None = None,
    progress: ProgressCallback | None = None,
    add_classes: bool | None = None,
    command: str | None = None,
) -> IngestReport:
    """Ingest every item of ``source`` into the project.

    Resumable and idempotent: a rerun after completion or after a crash continues
    from the last checkpoint and never stores a candidate twice.

    Parameters
    ----------
    project : Project
        Pixels go to its ``arrays/`` or ``images/``, rows and progress to its store.
    source : CandidateSource
    name : str, optional
        Name stored as each candidate's ``source``; defaults to the source kind,
        or for a job already started to the name it was started with.
    batch_size : int, optional
        Items per batch (one transaction, one checkpoint); default the source's
        ``default_batch_size`` (65,536 for TinyImages), else 16,384 for array
        sources and 256 for file sources.
    progress : ProgressCallback, optional
    add_classes : bool, optional
        Add class names the project does not know (default: only when the
        project has no classes at all). A project created by ``retest init`` with
        classes fixes them, so unknown names are an error.
    command : str, optional
        The command line that resumes this job, kept in its report for
        :func:`interrupted_ingests`; default one rebuilt from the source.

    Returns
    -------
    IngestReport

    Raises
    ------
    StageError
        An item's class is not a project class.
    ConfigError
        ``name`` differs from the name the job was started with.
    InputValidationError
        ``name`` already holds another file and refs of either are row numbers
        or relative paths (:func:`check_source_name`).
    """
    from retest.project import reclaim_tail_orphans

    root = project.root
    _check_classes_first(project, source, add_classes)
    _check_form_first(project, source)
    removed: list[Path] = []
    with writers_lock(root / ARRAY_DIR, exclusive=True, wait=False) as alone:
        if alone:  # no other writer between an append and its insert
            reclaim_tail_orphans(project)
            removed = remove_stale_temporaries(root)
    with writers_lock(root / ARRAY_DIR):
        rep = Ingest(
            project,
            source,
            name=name,
            batch_size=batch_size,
            progress=progress,
            add_classes=add_classes,
            command=command,
        ).run()
    gone = tuple(p.relative_to(root).as_posix() for p in removed)
    return dataclasses.replace(rep, removed_temporaries=gone)


def _check_classes_first(
    project: Project, source: CandidateSource, add_classes: bool | None
) -> None:
    """Refuse labels and class folders the project does not have before anything
    is written: array sources know all their labels, folder sources their class
    folders, up front (otherwise the valid batches before the first bad item
    would be stored and the ingest left half done)."""
    rows = project.store.classes.list()
    if not rows or getattr(source, "class_name", None) is not None:
        return
    desc = source.describe()
    labels = getattr(source, "labels", None)
    if labels is not None:
        ids = {c.id for c in rows}
        where = desc.get("labels_path") or desc["path"]
        found = np.unique(np.asarray(labels))
        if ids == set(range(len(ids))) and found.size:
            # the same diagnosis as reference labels: a 1-based set says so
            check_labels(found, n_classes=len(ids), name=f"labels of {where}")
        bad = sorted({int(x) for x in found} - ids)
        if bad:
            raise StageError(
                f"{where}: labels {bad[:5]} are not class ids of the project "
                f"(0..{max(ids)}). Check the labels file."
            )
    names = source.class_names()
    if names and not add_classes:
        known = {c.name for c in rows}
        unknown = sorted(names - known)
        if unknown:
            nested = [
                f"{u}/{rest}"
                for u in unknown
                for c in known
                if c.startswith(u + "/") and (rest := c[len(u) + 1 :])
            ]
            hint = (
                f" A class name with '/' cannot be a folder name: '{nested[0]}' was "
                f"read as class {nested[0].split('/')[0]!r} with keyword folder "
                f"{nested[0].split('/', 1)[1]!r}; name the folder "
                f"{nested[0].replace('/', '_')!r} or by the class id."
                if nested
                else ""
            )
            raise StageError(
                f"{desc['path']}: class folders {unknown[:5]} are not classes of the "
                f"project (classes: {', '.join(c.name for c in rows)}); nothing was "
                "ingested. A class folder is the class name, its id (0, 1, ...), the "
                'name with / \\ : * ? " < > | as _, or mapped in class_index.json; '
                f"or pass --class with a project class.{hint}"
            )


def _check_form_first(project: Project, source: CandidateSource) -> None:
    """Refuse an array source whose images are not in the originals' form
    (channels): its exact copies would not hash alike and revisions would not
    evaluate against the original test set."""
    from retest.stages.reference import describe_shape, reference_image_shape

    images = getattr(source, "images", None)
    shape = getattr(images, "shape", None)
    if shape is None or len(shape) < 3:
        return
    ref = reference_image_shape(project)
    if ref is None:
        return
    mine = tuple(int(x) for x in shape[1:])
    if _channels(mine) != _channels(ref):
        raise StageError(
            f"{source.describe()['path']}: images are {describe_shape(mine)} but the "
            f"project's original images are {describe_shape(ref)}; nothing was "
            "ingested. Store the array in the originals' form (e.g. numpy "
            "x[..., 0] for grey stored as RGB), or add image files as a folder "
            "source, which converts them."
        )


def _channels(shape: Sequence[int]) -> int:
    return int(shape[2]) if len(shape) >= 3 else 1


def reference_mode(project: Project) -> str | None:
    """``L`` or ``RGB``: the form candidates from image files are stored in (that
    of the originals); None before any original is registered."""
    from retest.stages.reference import reference_image_shape

    ref = reference_image_shape(project)
    if ref is None:
        return None
    return "L" if _channels(ref) == 1 else "RGB"


#: The project's own entries that hold its data; ``demo/`` (also a project entry,
#: for outputs) holds the inputs `retest demo` ingests, so it may be a source.
_OWN_DATA = PROJECT_ENTRIES - {"demo"}


def _check_not_project_data(project: Project, kind: str, path: Any) -> None:
    """Refuse a source that is the project folder or one of its own entries
    (``arrays/``, ``images/``, ``revisions/``, the database, hidden folders):
    those hold the project's own pixels and releases, never new candidates.
    A folder of the user's own inside the project (``my-images/``) is fine."""
    target = Path(path).resolve()
    root = project.root.resolve()
    if not target.is_relative_to(root):
        return
    rel = target.relative_to(root)
    top = rel.parts[0] if rel.parts else ""
    if rel.parts and top not in _OWN_DATA and not top.startswith("."):
        return
    own = f"{top}/" if (root / top).is_dir() else top
    what = (
        "is the project folder itself"
        if not rel.parts
        else f"is the project's own {own}"
        if len(rel.parts) == 1
        else f"lies inside the project's own {own}"
    )
    raise InputValidationError(
        f"{kind} source {path} {what} ({root}); the project's data (retest.toml, "
        "retest.db, arrays/, images/, revisions/) is never a source of new "
        "candidates. Pass the folder or file holding the images to add, outside "
        "those."
    )


def _folder_options(project: Project, mode: str | None) -> dict[str, Any]:
    """The folder source's pixel form and class mapping from the project.

    Images are stored in the originals' form; converting grey to RGB or RGB-grey
    to grey loses nothing and is automatic, colour to grey only with ``--mode L``.
    """
    from retest.datasets.images import IMAGE_MODES
    from retest.stages.reference import describe_shape, reference_image_shape

    if mode is not None and mode not in IMAGE_MODES:
        raise ConfigError(
            f"--mode must be one of {', '.join(IMAGE_MODES)}. Got {mode!r}."
        )
    ref = reference_image_shape(project)
    ref_mode = None if ref is None else ("L" if _channels(ref) == 1 else "RGB")
    if mode is not None and ref is not None and mode != ref_mode:
        raise ConfigError(
            f"--mode {mode}: the project's original images are {describe_shape(ref)} "
            "and candidates are stored in the same form; pass --mode "
            f"{ref_mode} or leave --mode out."
        )
    opts: dict[str, Any] = {
        "mode": mode or ref_mode or "RGB",
        "from_colour": mode == "L",
    }
    classes = [c.name for c in project.store.classes.list()]
    if classes:
        opts["classes"] = classes
    return opts


class Ingest:
    """One run of an ingest job, its stages explicit.

    :meth:`run` resumes the job from its checkpoint and passes each batch through

    1. :meth:`read` — the source reads and decodes batches from the resume position;
    2. :meth:`dedup` — content ids, exact copies and every check that can fail
       (:meth:`BatchWriter.prepare`), and the batch's log line;
    3. :meth:`append` then :meth:`commit` — pixels made durable, then rows
       inserted, the batch's state stored, logged and checkpointed.

    Steps 1-2 run in the calling thread; :meth:`append` runs in one writer
    thread and :meth:`commit` in another (sqlite, hashlib, numpy and file writes
    release the GIL), so while batch k+1 is read and de-duplicated, batch k+1's
    pixels are appended and batches k-1 and k are committed. Each thread takes
    batches in source order, so rows, checkpoints and pixel rows all follow it.
    At most ``IN_FLIGHT`` batches wait for their commit; their ids count as
    stored for the dedup of the next batch (``BatchWriter.inflight``).
    """

    #: Batches whose rows may be waiting for their commit while the next is prepared.
    IN_FLIGHT = 2

    #: Fault injection for the crash-safety tests, never set in production: called
    #: as ``fault_hook(moment, n)`` at the two worst moments to die, ``"appended"``
    #: (batch ``n``'s pixels durable, its rows not inserted: orphan pixel rows)
    #: and ``"inserted"`` (its rows inserted, the batch neither logged nor
    #: checkpointed). ``n`` counts this run's batches from 1.
    fault_hook: ClassVar[FaultHook | None] = None

    def __init__(
        self,
        project: Project,
        source: CandidateSource,
        *,
        name: str | None = None,
        batch_size: int | None = None,
        progress: ProgressCallback | None = None,
        add_classes: bool | None = None,
        command: str | None = None,
    ) -> None:
        self.project, self.source = project, source
        self.name = name
        self.batch_size = batch_size
        self.progress = progress
        self.add_classes = add_classes
        self.command = command
        self.job = ingest_job_key(source)
        self.cp = Checkpoint(project, INGEST_STAGE, self.job)
        self.desc = source.describe()
        self.total = len(source)
        self.report_rel = f"{REPORT_DIR}/{self.job}.json"
        self.log_path = project.root / REPORT_DIR / f"{self.job}.log.jsonl"
        # set by run(): where this run starts, what the earlier runs counted
        self.resume = 0
        self.redo = False
        self.tally = Tally()
        self.started = ""
        self.writer: BatchWriter | None = None
        # the write threads' outcome: a failure stops every later checkpoint
        self.failed: list[BaseException] = []
        self.inserted = 0  # batches of this run whose rows went into the store

    def run(self) -> IngestReport:
        """Ingest what the job has not stored yet; the job's cumulative report.

        Raises
        ------
        ConfigError
            ``name`` differs from the name the job was started with.
        StageError
            An item's class is not a project class.
        """
        done = self._resume()
        if done is not None:
            return done
        self._begin()
        try:
            self._write_all()
        except BaseException as err:
            if isinstance(err, Exception):  # not on Ctrl-C: the build takes a while
                with contextlib.suppress(Exception):  # never hides the failure
                    self._restore_indexes()
            if not self.redo and not self.inserted:
                # nothing of this job is stored: leave no interrupted job behind
                self.cp.forget()
                (self.project.root / self.report_rel).unlink(missing_ok=True)
            raise
        self.tally.processed = max(self.tally.processed, self.total)
        result = self._report(True)
        root = self.project.root
        record_artifact(
            self.project.store,
            root,
            root / self.report_rel,
            name=f"ingest:{self.job}",
            stage=INGEST_STAGE,
            params={"name": self.name, "kind": self.source.kind},
        )
        self._restore_indexes()  # before the job is marked done: a kill redoes it
        self.cp.finish(artifact=self.report_rel)
        self._update_id_orders()
        return result

    def _restore_indexes(self) -> None:
        """Build the indexes deferred by this job, or by an earlier job that was
        killed (queries were right without them, only slower)."""
        task = "indexes"
        report(self.progress, task, 0, 1)
        self.project.store.candidates.restore_indexes()
        report(self.progress, task, 1, 1)

    def _update_id_orders(self) -> None:
        """Extend the store's derived id-order cache by the rows just added, so
        the first ``sample`` after the ingest finds it ready instead of building
        it (about a minute at 10 M candidates). The job is complete already: a
        failure costs only a warning, and the next reader rebuilds the cache."""
        task = "id order"
        report(self.progress, task, 0, 1)
        try:
            self.project.store.candidates.update_id_orders()
        except Exception as err:  # a derived cache never fails the ingest
            warnings.warn(
                f"the candidates' id-order cache was not updated ({err}); the next "
                "`retest sample` rebuilds it.",
                RetestWarning,
                stacklevel=2,
            )
            return
        report(self.progress, task, 1, 1)

    def _resume(self) -> IngestReport | None:
        """Restore the job's name, resume position and counts from its checkpoint;
        the earlier report when the job is already complete."""
        previous = self.cp.load("report")
        if previous is not None:
            # the job's candidates carry the name it was started with: keep it
            recorded = str(previous.get("name") or self.source.kind)
            if self.name is not None and self.name != recorded:
                raise ConfigError(
                    f"{self.desc['path']} was already ingested as source "
                    f"{recorded!r} (job {self.job}); rerun with --name {recorded} or "
                    "without --name."
                )
            self.name = recorded
            if self.cp.done and previous.get("total") == self.total:
                rep = IngestReport.from_json(previous)
                return dataclasses.replace(rep, already_ingested=True)
        self.name = self.name or self.source.kind
        if previous is None:  # a new job: its name must not mix files' refs
            check_source_name(self.project, self.source, self.name, self.desc)
        self.resume = _resume_position(self.cp)
        stored = self.cp.states("batch/").values()
        self.tally = _tally(stored, self.resume)
        # an earlier run stored batches: those at the resume position may be its own
        self.redo = self.resume > 0 or bool(stored)
        return None

    def _begin(self) -> None:
        """Mark the job started, add the source's classes to a project without
        any, and set up the writer."""
        store = self.project.store
        self.started = utc_now()
        self.cp.begin(artifact=self.report_rel)
        fresh = not store.classes.list()
        if self.source.label_names and fresh:
            store.classes.put(
                ClassRow(i, n) for i, n in enumerate(self.source.label_names)
            )
        add = fresh if self.add_classes is None else self.add_classes
        self.writer = BatchWriter(self.project, self._name, add)
        self.writer.where = str(self.desc.get("labels_path") or self.desc["path"])
        self._report(False)
        # a large job builds the secondary indexes once at its end (run())
        store.candidates.defer_indexes(max(0, self.total - self.resume))

    @property
    def _name(self) -> str:
        assert self.name is not None, "run() sets the name first"
        return self.name

    def _report(self, complete: bool) -> IngestReport:
        """The job's report so far, stored in the checkpoint (what
        :func:`list_ingests` and :func:`interrupted_ingests` read) and written
        to ``reports/ingest/<job>.json``."""
        t = self.tally
        rep = IngestReport(
            self.job,
            self._name,
            self.source.kind,
            self.desc["path"],
            self.total,
            t.processed,
            t.new,
            t.duplicates,
            tuple(t.skipped),
            tuple(t.dup_refs),
            self.resume,
            complete,
            self.desc,
            self.started,
            utc_now() if complete else "",
            self.command or resume_command(self.project, self.desc, self.name),
        )
        data = _json_safe(rep.to_json())
        self.cp.save("report", data)
        write_bytes(self.project.root / self.report_rel, dumps_json(data).encode())
        return rep

    # -- stage 1: read ----------------------------------------------------------

    def read(self) -> Iterator[tuple[SourceBatch, int]]:
        """The source's batches from the resume position, each with its part
        number (a source may split one position range into several batches).

        Batch k is committed (so its pixels are written) before batch
        k + IN_FLIGHT + 1 is requested: the source may decode into its array.
        """
        bs = check_batch_size(self.batch_size) or self.source.default_batch_size
        bs = bs or (16_384 if self.source.storage == "array" else 256)
        batches = self.source.iter_batches_recycled(
            start=self.resume, batch_size=bs, depth=self.IN_FLIGHT + 1
        )
        part, last_start = 0, -1
        for batch in batches:
            part = part + 1 if batch.start == last_start else 0
            last_start = batch.start
            yield batch, part

    # -- stage 2: dedup by content id -----------------------------------------

    def dedup(
        self, batch: SourceBatch, part: int
    ) -> tuple[PreparedBatch, dict[str, Any]]:
        """The batch checked and de-duplicated, and its log line (counts as
        prepared; :meth:`commit` corrects them to what the insert added)."""
        writer = self.writer
        assert writer is not None, "run() sets the writer first"
        # Only the batches at the resume position can hold this job's own rows.
        writer.check_own = self.redo and batch.start == self.resume
        prep = writer.prepare(batch)
        skipped = [
            {"position": batch.start, "ref": s.ref, "reason": s.reason}
            for s in batch.skipped
        ]
        line = {
            "start": batch.start,
            "stop": batch.stop,
            "part": part,
            "new": prep.kept + prep.own,
            "duplicates": len(prep.dups),
            "duplicate_refs": prep.dups[:MAX_LISTED_DUPLICATES],
            "skipped": skipped,
        }
        return prep, line

    # -- stage 3: write ---------------------------------------------------------

    @staticmethod
    def append(prep: PreparedBatch) -> Sequence[int]:
        """Store the batch's pixels durably (pixel-writer thread); their array rows."""
        return prep.append()

    def commit(
        self,
        prep: PreparedBatch,
        appended: Future[Sequence[int]],
        n: int,
        line: dict[str, Any],
    ) -> None:
        """Insert the batch's rows once its pixels are durable, then store its
        state, log line and checkpoint (row-writer thread)."""
        try:
            rows = appended.result()
        except BaseException as err:
            self.failed.append(err)
            raise
        if self.failed:  # never checkpoint past a batch that was not stored
            _release(prep, rows)
            return
        self._fault("appended", n)
        try:
            added = prep.insert(rows)  # rows only once their pixels are durable
        except BaseException as err:
            self.failed.append(err)
            _release(prep, rows)  # the insert was rolled back
            raise
        self.inserted += 1
        if added < prep.kept:  # another process stored some of them first
            _release(prep, prep.unreferenced(self.project.store, rows))
        line["new"] = added + prep.own
        line["duplicates"] += prep.kept - added
        self._fault("inserted", n)
        self.cp.save(_batch_state_name(line), line)  # counted once its checkpoint is
        append_log_line(self.log_path, line)
        self.cp.mark(f"{line['stop']:012d}")

    def _fault(self, moment: str, n: int) -> None:
        hook = type(self).fault_hook
        if hook is not None:
            hook(moment, n)

    def _write_all(self) -> None:
        """Run the three stages over every batch (see the class docstring)."""
        writer = self.writer
        assert writer is not None, "run() sets the writer first"
        task = f"ingest {self.name}"
        report(self.progress, task, self.resume, self.total)

        def finish(done: Future[None], line: dict[str, Any]) -> None:
            done.result()
            self.tally.add(line)
            report(self.progress, task, int(line["stop"]), self.total)
            writer.inflight.popleft()

        pending: deque[tuple[Future[None], dict[str, Any]]] = deque()
        with (
            ThreadPoolExecutor(1, thread_name_prefix="retest-pixels") as pixels,
            ThreadPoolExecutor(1, thread_name_prefix="retest-rows") as rows,
        ):
            for n, (batch, part) in enumerate(self.read(), 1):
                prep, line = self.dedup(batch, part)
                appended = pixels.submit(self.append, prep)
                pending.append(
                    (rows.submit(self.commit, prep, appended, n, line), line)
                )
                while len(pending) > self.IN_FLIGHT:
                    finish(*pending.popleft())
            while pending:
                finish(*pending.popleft())


def _release(prep: PreparedBatch, rows: Sequence[int]) -> None:
    if prep.array is not None and len(rows):
        prep.array.release(rows)  # rows only this run knows: safe to give back


def _json_safe(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=str))


def list_ingests(project: Project) -> list[dict[str, Any]]:
    """One summary per ingest job.

    Parameters
    ----------
    project : Project

    Returns
    -------
    list of dict
        The job's report (name, kind, path, counts, complete, ...) without the
        source description and duplicate list; ``skipped`` is a count. An
        interrupted job shows the position it resumes from as ``processed``.
    """
    out = []
    for run in stage_runs(project, INGEST_STAGE):
        cp = Checkpoint(project, INGEST_STAGE, run.key)
        state = cp.load("report")
        if state is None:  # the run stored nothing yet
            continue
        state.pop("created", None)
        rep = IngestReport.from_json(state)
        row = {
            k: v
            for k, v in rep.to_json().items()
            if k not in ("source", "duplicate_refs")
        }
        row["skipped"] = len(rep.skipped)
        if not run.done:  # interrupted: the report is from the run's start
            row["processed"] = _resume_position(cp)
            row["complete"] = False
        out.append(row)
    return out


def add_source(
    project: Project,
    kind: str,
    path: str | os.PathLike[str],
    *,
    keywords: Sequence[str] | Mapping[str, str | None] | None = None,
    keywords_file: str | os.PathLike[str] | None = None,
    class_name: str | None = None,
    name: str | None = None,
    labels_path: str | os.PathLike[str] | None = None,
    images_dir: str | os.PathLike[str] | None = None,
    batch_size: int | None = None,
    progress: ProgressCallback | None = None,
    mode: str | None = None,
) -> IngestReport:
    """Build the source ``kind`` at ``path`` and ingest it (``retest source add``).

    Parameters
    ----------
    project : Project
    kind : str
        A registered candidate source kind.
    path : path
        What the source reads (folder, array file, TinyImages folder, ...).
    keywords, keywords_file : optional
        Select TinyImages records (the file may map classes to keywords, see
        :func:`retest.sources.base.read_keywords_file`); the TinyImages keyword
        index is built once and kept in the project.
    class_name : str, optional
        Class of every item (sources without labels).
    name : str, optional
        Source name stored on the candidates (default: the kind).
    labels_path : path, optional
        The IDX labels file.
    images_dir : path, optional
        The Flickr download folder.
    batch_size : int, optional
    progress : ProgressCallback, optional
    mode : {"L", "RGB"}, optional
        Folder sources: the pixel form, which must be that of the originals
        (default). ``L`` also converts colour images to grayscale, which is
        otherwise refused per image.

    Returns
    -------
    IngestReport

    Raises
    ------
    ConfigError
        An option that does not apply to ``kind``, or a missing required one.
    StageError
        Labels outside the project's classes.
    """
    _check_not_project_data(project, kind, path)
    opts: dict[str, Any] = {}
    if class_name is not None:
        opts["class_name"] = class_name
    kw = _keywords(keywords, keywords_file)
    extra = {"keywords": kw, "labels_path": labels_path, "images_dir": images_dir}
    allowed = {"tinyimages": "keywords", "idx": "labels_path", "flickr": "images_dir"}
    for opt, value in extra.items():
        if value is not None and allowed.get(kind) != opt:
            raise ConfigError(f"option {opt} does not apply to source kind {kind!r}.")
        if value is not None:
            opts[opt] = value
    if kind == "tinyimages":
        if kw is None:
            raise ConfigError("tinyimages needs --keywords a,b or --keywords-file F.")
        src_path = Path(path)
        folder = src_path if src_path.is_dir() else src_path.parent
        opts["index"] = load_tinyimages_index(
            project, folder / "tiny_metadata.bin", progress=progress
        )
    if kind == "flickr" and images_dir is None:
        raise ConfigError("flickr needs --images DIR, the downloader's output folder.")
    if kind == "folder":
        opts.update(_folder_options(project, mode))
    elif mode is not None:
        raise ConfigError(
            f"--mode applies to source kind 'folder' only; this source is {kind!r}."
        )
    source = make_source(kind, path, **opts)
    given: list[str] = []
    for flag, value in (
        ("--keywords-file", keywords_file),
        ("--class", class_name),
        ("--labels", labels_path),
        ("--images", images_dir),
    ):
        if value is not None:
            given += [flag, str(value if flag == "--class" else Path(value).resolve())]
    if keywords is not None:
        given += ["--keywords", ",".join(kw or {})]
    if batch_size is not None:
        given += ["--batch-size", str(batch_size)]
    if mode is not None:
        given += ["--mode", mode]
    command = _configured_command(project, name, kind, path) or resume_command(
        project, {"kind": kind, "path": Path(path).resolve()}, name, options=given
    )
    return ingest_source(
        project,
        source,
        name=name,
        batch_size=batch_size,
        progress=progress,
        command=command,
    )


def _configured_command(
    project: Project, name: str | None, kind: str, path: Any
) -> str | None:
    """``retest source add NAME`` when ``name`` is the ``[sources.NAME]`` table of
    the project's retest.toml with this kind and path (its options, e.g. keywords
    mapped to classes, may not be expressible as command-line flags)."""
    if name is None:
        return None
    table = project.config.sources.get(name)
    if not table or table.get("kind") != kind or "path" not in table:
        return None
    root = project.root
    configured = (root / Path(str(table["path"])).expanduser()).resolve()
    if configured != Path(path).resolve():
        return None
    return shlex.join(
        ["retest", "source", "add", name, "--project", str(root.resolve())]
    )


def _keywords(
    keywords: Sequence[str] | Mapping[str, str | None] | None,
    keywords_file: str | os.PathLike[str] | None,
) -> Mapping[str, str | None] | None:
    if keywords is not None and keywords_file is not None:
        raise ConfigError("pass either --keywords or --keywords-file, not both.")
    if keywords_file is not None:
        return read_keywords_file(keywords_file)
    if keywords is None:
        return None
    return dict(keywords) if isinstance(keywords, Mapping) else dict.fromkeys(keywords)
