"""``retest crowd``: grid tasks, MTurk batch export and results import."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from retest._validation import fmt_count
from retest.cli._options import JsonOpt, ProjectOpt, output_option, seed_option
from retest.errors import ConfigError, InputValidationError

crowd_app = typer.Typer(
    help="Crowd labeling tasks (MTurk batch files).", no_args_is_help=True
)


@crowd_app.command("tasks")
def tasks_cmd(
    project: ProjectOpt = None,
    images_per_task: Annotated[int, typer.Option(help="Grid size.")] = 48,
    controls: Annotated[
        int, typer.Option(help="Positive and negative controls each.")
    ] = 3,
    nearest: Annotated[
        Path | None,
        typer.Option(
            help="JSON {class: nearest class} map (class names or ids), the class "
            "negative controls come from."
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            help="Seed for composition and shuffles (default: `tasks` under "
            "\\[seeds] in retest.toml, else 0).",
            callback=seed_option,
        ),
    ] = None,
    include_copies: Annotated[
        bool,
        typer.Option(
            "--include-copies",
            help="Also make tasks for candidates already excluded as copies of "
            "original images (exact copies, near-originals); they can never be "
            "sampled, so by default they are left out.",
        ),
    ] = False,
    strategy: Annotated[
        str | None,
        typer.Option(
            help="The sampling strategy the tasks are for; it sets --originals "
            "(default: the strategy of the project's newest revision, if any).",
        ),
    ] = None,
    originals: Annotated[
        int | None,
        typer.Option(
            help="Distinct originals each class's tasks show as positive controls; "
            "tasks showing originals not shown yet are added until each class "
            "shows this many (default: what --strategy needs, 20 for "
            "matched-frequency, else 0).",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Compose the tasks and say what they allow, but store nothing.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Make grid tasks for candidates that still need annotations.

    Each task shows --controls originals of its class (positive controls);
    matched-frequency sampling needs ≥ 20 distinct originals per class, each
    answered by ≥ 10 valid assignments, for the class's target histogram. With
    --strategy matched-frequency (or --originals N) tasks that show more
    originals are added where a class shows too few. Running the command again
    extends the project's tasks: new candidates get tasks, a larger --originals
    adds tasks, and stored tasks (exported or not) never change. The command
    says how many originals each class shows; try settings with --dry-run first.

    Candidates that the eligibility decision of `retest sample` already excludes
    as copies of original images (exact copies, near-originals by the automatic
    rule or a confirmed pair) get no task: no worker is paid to label them.
    Members of near-duplicate groups of pool images and candidates with pairs not
    yet reviewed do get tasks. Before `retest dedup` has run no copy can be told:
    every candidate gets a task, with a warning.
    """
    from retest.cli._console import console, print_json, print_warning
    from retest.project import Project
    from retest.sampling.base import SAMPLERS
    from retest.stages.crowd import create_task_batch, pending_task_candidates
    from retest.stages.sample import originals_needed, originals_shown

    if images_per_task < 1:
        raise ConfigError(f"--images-per-task must be >= 1. Got {images_per_task}.")
    if controls < 0:
        raise ConfigError(f"--controls must be 0 or more. Got {controls}.")
    if images_per_task <= 2 * controls:
        raise ConfigError(
            f"--images-per-task {images_per_task} leaves no room for candidates next "
            f"to 2 x --controls {controls}; raise it above {2 * controls}."
        )
    if originals is not None and originals < 0:
        raise ConfigError(f"--originals must be 0 or more. Got {originals}.")
    if strategy is not None and strategy not in SAMPLERS:
        raise ConfigError(
            f"--strategy {strategy!r} is not a sampling strategy; use one of "
            f"{', '.join(SAMPLERS.names())}."
        )
    raw = _read_nearest(nearest) if nearest is not None else None
    with Project.open(project) as proj:
        if strategy is None:
            strategy = _targeted_strategy(proj)
        if originals is None:
            originals = originals_needed(strategy)
        near = (
            _nearest_ids(raw, nearest, proj.class_names)
            if raw is not None and nearest is not None
            else None
        )
        if seed is None:
            seed = proj.config.seed("tasks")
            seed = 0 if seed is None else seed
        batch = create_task_batch(
            proj,
            nearest_class=near,
            images_per_task=images_per_task,
            pos_controls=controls,
            neg_controls=controls,
            seed=seed,
            include_copies=include_copies,
            min_originals=originals,
            dry_run=dry_run,
        )
        waiting = pending_task_candidates(proj)
        from retest.stages.sample import originals_shown

        shown = originals_shown(proj, batch.rows if dry_run else ())
        names = proj.class_names
    rows = batch.rows
    if not include_copies and not batch.copies_checked:
        print_warning(
            "copies of original images could not be left out: dedup has not run "
            "on this project, so every candidate got a task. Run `retest dedup` "
            "before `retest crowd tasks` to leave them out."
        )
    if batch.unchecked:
        print_warning(
            f"{batch.unchecked} candidates added after the last dedup run got "
            "tasks without being checked for near-copies of original images; run "
            "`retest dedup` before making tasks for new candidates."
        )
    if as_json:
        print_json(
            {
                "tasks": [r.id for r in rows],
                "left_out": batch.left_out,
                "copies_checked": batch.copies_checked,
                "unchecked": batch.unchecked,
                "dry_run": dry_run,
                "strategy": strategy,
                "originals": originals,
                "for_originals": batch.for_originals,
                "originals_shown": shown,
            }
        )
        return
    notes = ["dry run"] if dry_run else []
    if batch.for_originals:
        notes.append(f"{batch.for_originals} of them to show more originals")
    console.print(
        f"{fmt_count(len(rows))} tasks {'would be created' if dry_run else 'created'}"
        + (f" ({'; '.join(notes)})" if notes else ""),
        markup=False,
    )
    _print_originals_shown(shown, controls, originals)
    if batch.originals_short:
        short = ", ".join(
            f"{names[c]} {n}" for c, n in sorted(batch.originals_short.items())
        )
        print_warning(
            f"{len(batch.originals_short)} classes cannot show {originals} originals "
            f"({short}): their control split has no more originals, or the class "
            "has no candidate to show them with."
        )
    n_out = sum(batch.left_out.values())
    if n_out:
        why = ", ".join(
            f"{fmt_count(n)} {_COPY_KINDS[r]}" for r, n in batch.left_out.items()
        )
        console.print(
            f"left out {fmt_count(n_out)} candidates already excluded as copies of original "
            f"images ({why}; `retest status` counts them per class, "
            "--include-copies gives them tasks)",
            markup=False,
            soft_wrap=True,
        )
    old = set(waiting.values()) - {r.id for r in rows}
    if old:
        console.print(
            f"{fmt_count(len(old))} earlier tasks still await answers; their candidates got no "
            "new task (`retest crowd export` writes the tasks not exported yet).",
            markup=False,
            soft_wrap=True,
        )


def _targeted_strategy(proj: Any) -> str | None:
    """The strategy of the project's newest revision (what it samples), if any."""
    revisions = proj.store.revisions.list()
    return revisions[-1].strategy if revisions else None


def _print_originals_shown(shown: dict[str, int], controls: int, target: int) -> None:
    """What the tasks allow for matched-frequency (its target histograms)."""
    from retest.cli._console import console
    from retest.project import TARGET_MIN_ANNOTATIONS, TARGET_MIN_ORIGINALS

    if not shown:
        return
    fewest = min(shown, key=lambda c: shown[c])
    console.print(
        f"originals shown as positive controls per class: {min(shown.values())}"
        f"–{max(shown.values())} (fewest: {fewest}); matched-frequency needs "
        f"{TARGET_MIN_ORIGINALS} per class, each answered by ≥ "
        f"{TARGET_MIN_ANNOTATIONS} valid assignments (publish every task with ≥ "
        f"{TARGET_MIN_ANNOTATIONS} assignments)",
        markup=False,
        soft_wrap=True,
    )
    short = sorted(c for c, n in shown.items() if n < TARGET_MIN_ORIGINALS)
    if short and target < TARGET_MIN_ORIGINALS:  # a note: others need no originals
        console.print(
            f"note: {len(short)} classes show fewer than {TARGET_MIN_ORIGINALS} originals "
            f"({', '.join(short[:5])}{', …' if len(short) > 5 else ''}): "
            "matched-frequency cannot sample them; class-balanced and threshold "
            f"can. --strategy matched-frequency adds tasks that show more "
            f"originals (with --controls {controls} each); try with --dry-run.",
            markup=False,
            soft_wrap=True,
        )


_COPY_KINDS = {
    "exact_copy": "exact copies",
    "near_original": "near-originals by the automatic rule",
    "near_duplicate": "in a near-duplicate group with an original",
}
"""How the count line names each reason of ``retest.stages.crowd.COPY_REASONS``."""


def _read_nearest(path: Path) -> dict[str, object]:
    """The ``--nearest`` JSON object, or one line saying why it cannot be read."""
    from retest._validation import decode_utf8

    try:
        raw = json.loads(
            decode_utf8(path.read_bytes(), f"--nearest {path}", "save it as UTF-8.")
        )
    except (OSError, ValueError) as err:
        if isinstance(err, InputValidationError):
            raise
        why = err.strerror if isinstance(err, OSError) else type(err).__name__
        raise InputValidationError(
            f"--nearest {path}: not a readable UTF-8 JSON file ({why}). Expected an "
            'object {"cat": "dog", ...} of class names or ids; fix or omit it.'
        ) from None
    if not isinstance(raw, dict):
        raise InputValidationError(
            f"--nearest {path}: expected a JSON object {{class: nearest class}}, got "
            f"a {type(raw).__name__}."
        )
    return raw


def _nearest_ids(
    raw: dict[str, object], path: Path, classes: tuple[str, ...]
) -> dict[int, int]:
    """Class names or ids of the map as ids, each checked against the project."""

    def cid(value: object) -> int:
        if isinstance(value, str) and value in classes:
            return classes.index(value)
        text = str(value).strip()
        if not isinstance(value, bool) and text.isdigit() and int(text) < len(classes):
            return int(text)
        raise InputValidationError(
            f"--nearest {path}: {value!r} is not a class of the project (names "
            f"{', '.join(classes)} or ids 0..{len(classes) - 1})."
        )

    return {cid(k): cid(v) for k, v in raw.items()}


@crowd_app.command("export")
def export_cmd(
    out: Annotated[Path, output_option("crowd export", help="Output folder.")],
    base_url: Annotated[
        str, typer.Option(help="Where the images/ folder will be hosted.")
    ],
    project: ProjectOpt = None,
    all_tasks: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Write every task, also those exported before (default: only new "
            "ones, so a batch never re-publishes work already paid for).",
        ),
    ] = False,
) -> None:
    """Write question.html, batch_input.csv and token-named images for MTurk.

    What workers are told comes from \\[instructions] in retest.toml (the class's
    entry, else `default`), the same text the web pages show.

    Only tasks not exported before go in the batch unless --all is given.
    """
    import io

    from PIL import Image

    from retest._output import RULES, check_output
    from retest.cli._console import console
    from retest.project import Project
    from retest.stages.crowd import (
        export_mturk,
        exported_task_ids,
        project_secret,
    )

    if not base_url.startswith(("https://", "http://")):
        raise ConfigError(
            f"--base-url must be the http(s):// address the images/ folder will be "
            f"served from, e.g. https://example.org/batch1/images. Got {base_url!r}."
        )
    check_output(out, RULES["crowd export"])
    with Project.open(project) as proj:

        def jpeg(item: str) -> bytes:
            buf = io.BytesIO()
            Image.fromarray(proj.pixels([item])[0]).convert("RGB").save(
                buf, "JPEG", quality=90
            )
            return buf.getvalue()

        tasks = proj.store.tasks.list()
        if not tasks:
            raise InputValidationError(
                "no tasks to export; run `retest crowd tasks` first."
            )
        if not all_tasks:
            done = exported_task_ids(proj)
            tasks = [t for t in tasks if t.id not in done]
            if not tasks:
                raise InputValidationError(
                    f"every task of the project was exported before ({len(done)}); "
                    "nothing new to publish. Run `retest crowd tasks` for new "
                    "candidates, or pass --all to write every task again."
                )
        files = export_mturk(
            proj,
            tasks,
            out,
            secret=project_secret(proj),
            base_url=base_url,
            image_bytes=jpeg,
        )
    console.print(f"{fmt_count(len(tasks))} tasks", markup=False)
    for k, v in files.items():
        console.print(f"{k}: {v}", markup=False, soft_wrap=True)


@crowd_app.command("import")
def import_cmd(
    results: Annotated[Path, typer.Argument(help="MTurk batch results CSV.")],
    project: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import an MTurk batch results CSV; re-importing it applies review changes.

    Every data row is reported as new, a status change (Approve / Reject marks or
    a newer AssignmentStatus), unchanged, or rejected with its line number.
    The columns, statuses, time format and encodings read are in docs/mturk.md.
    """
    from retest.cli._console import console, print_json
    from retest.project import Project
    from retest.stages.crowd import (
        import_mturk,
        project_secret,
        worker_ids_from_results,
        worker_report,
    )

    with Project.open(project) as proj:
        secret = project_secret(proj)
        res = import_mturk(proj, results, secret=secret)
        ids = worker_ids_from_results(results, secret=secret)
        workers = worker_report(proj, worker_ids=ids)
    if as_json:
        print_json(
            {
                "file": str(results),
                "rows": res.rows,
                "new": res.assignments,
                "status_changes": [
                    {
                        "line": c.line,
                        "assignment_id": c.assignment_id,
                        "old": c.old,
                        "new": c.new,
                    }
                    for c in res.status_changes
                ],
                "unchanged": res.unchanged,
                "rejected": [
                    {"line": line, "reason": reason}
                    for line, reason in res.rejected_rows
                ],
                "events": res.events,
                "workers": workers,
            }
        )
        _fail_if_all_rejected(results, res)
        return
    out = console.print
    out(
        f"{results}: {fmt_count(res.rows)} data rows: {fmt_count(res.assignments)} "
        f"new assignments ({fmt_count(res.events)} events), "
        f"{fmt_count(len(res.status_changes))} status changes, "
        f"{fmt_count(res.unchanged)} unchanged, "
        f"{fmt_count(len(res.rejected_rows))} rejected",
        markup=False,
        soft_wrap=True,
    )
    for c in res.status_changes:
        out(
            f"  line {c.line}: {c.assignment_id} {c.old} → {c.new}",
            markup=False,
            soft_wrap=True,
        )
    for line, reason in res.rejected_rows:
        out(f"  rejected line {line}: {reason}", markup=False, soft_wrap=True)
    _fail_if_all_rejected(results, res)
    _workers_table(workers)


def _fail_if_all_rejected(results: Path, res: Any) -> None:
    """A file whose every data row was rejected imported nothing: exit 1 with
    why (the rows are listed above it), not a success a script would trust."""
    rejected = res.rejected_rows
    if not res.rows or len(rejected) < res.rows:
        return
    line, reason = rejected[0]
    same = all(r == reason for _, r in rejected)
    if len(rejected) == 1:
        why = f"line {line}: {reason}"
    else:
        why = f"every row: {reason}" if same else f"e.g. line {line}: {reason}"

    rows = (
        "its only data row was" if res.rows == 1 else f"all {res.rows} data rows were"
    )
    raise InputValidationError(
        f"{results}: nothing imported; {rows} rejected ({why}). Fix the rows "
        "listed and import the file again."
    )


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _workers_table(workers: list[dict[str, Any]]) -> None:
    """Plain aligned columns, never wrapped: the requester copies WorkerIds into MTurk."""
    from retest.cli._console import console

    head = ("worker", "WorkerId", "n", "statuses", "pos", "neg", "decision")
    rows = [head] + [
        (
            w["worker"][:8],
            w["worker_id"] or "?",
            str(w["assignments"]),
            ", ".join(f"{n} {k}" for k, n in w["statuses"].items()),
            _fmt(w["pos_accuracy"]),
            _fmt(w["neg_accuracy"]),
            w["decision"] + (f": {w['reason']}" if w["reason"] else ""),
        )
        for w in workers
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    console.print(f"Workers ({len(workers)})", markup=False)
    for r in rows:
        line = "  ".join(c.ljust(widths[i]) for i, c in enumerate(r[:-1]))
        console.print(f"{line}  {r[-1]}", markup=False, soft_wrap=True)
    console.print(
        "pos / neg: share of positive controls selected / negative controls left "
        "unselected.",
        markup=False,
        soft_wrap=True,
    )


@crowd_app.command("workers")
def workers_cmd(
    results: Annotated[
        list[Path] | None,
        typer.Option(
            "--results",
            help="MTurk batch results CSV(s) to read the raw WorkerIds from (the "
            "project keeps only their hashes); repeatable. Nothing is stored.",
        ),
    ] = None,
    min_accuracy: Annotated[
        float,
        typer.Option(
            help="Suggest rejecting a worker whose positive- or negative-control "
            "accuracy is below this (chance is 0.5)."
        ),
    ] = 0.6,
    project: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Per-worker control accuracy, assignment statuses and a suggested decision.

    A worker who checks every box selects all positive controls but also all
    negative ones, so both accuracies are judged. With --results the table shows
    each hashed worker's MTurk WorkerId, to approve or reject them on MTurk.
    """
    from retest.cli._console import print_json
    from retest.project import Project
    from retest.stages.crowd import (
        project_secret,
        worker_ids_from_results,
        worker_report,
    )

    if not 0.0 <= min_accuracy <= 1.0:
        raise ConfigError(f"--min-accuracy must be in [0, 1]. Got {min_accuracy}.")
    with Project.open(project) as proj:
        secret = project_secret(proj)
        ids: dict[str, str] = {}
        for path in results or []:
            ids.update(worker_ids_from_results(path, secret=secret))
        workers = worker_report(proj, min_accuracy=min_accuracy, worker_ids=ids)
    if as_json:
        print_json({"min_accuracy": min_accuracy, "workers": workers})
        return
    _workers_table(workers)


def register(app: typer.Typer) -> None:
    app.add_typer(crowd_app, name="crowd")
