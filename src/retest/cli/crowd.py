"""``retest crowd``: grid tasks, MTurk batch export and results import."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from retest.cli._options import JsonOpt, ProjectOpt
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
            help="Seed for composition and shuffles (default: [seeds] tasks, else 0)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Make grid tasks for candidates that still need annotations."""
    from retest.cli._console import console, print_json
    from retest.pipeline.crowd import create_tasks
    from retest.pipeline.project import Project

    if images_per_task < 1:
        raise ConfigError(f"--images-per-task must be >= 1. Got {images_per_task}.")
    if controls < 0:
        raise ConfigError(f"--controls must be 0 or more. Got {controls}.")
    if images_per_task <= 2 * controls:
        raise ConfigError(
            f"--images-per-task {images_per_task} leaves no room for candidates next "
            f"to 2 x --controls {controls}; raise it above {2 * controls}."
        )
    raw = _read_nearest(nearest) if nearest is not None else None
    with Project.open(project) as proj:
        near = (
            _nearest_ids(raw, nearest, proj.class_names)
            if raw is not None and nearest is not None
            else None
        )
        if seed is None:
            seed = proj.config.seed("tasks")
            seed = 0 if seed is None else seed
        rows = create_tasks(
            proj.store,
            nearest_class=near,
            images_per_task=images_per_task,
            pos_controls=controls,
            neg_controls=controls,
            seed=seed,
        )
    if as_json:
        print_json({"tasks": [r.id for r in rows]})
    else:
        console.print(f"{len(rows)} tasks created")


def _read_nearest(path: Path) -> dict[str, object]:
    """The ``--nearest`` JSON object, or one line saying why it cannot be read."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
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
    out: Annotated[Path, typer.Option(help="Output folder.")],
    base_url: Annotated[
        str, typer.Option(help="Where the images/ folder will be hosted.")
    ],
    project: ProjectOpt = None,
) -> None:
    """Write question.html, batch_input.csv and token-named images for MTurk."""
    import io

    from PIL import Image

    from retest._validation import check_output_dir
    from retest.cli._console import console
    from retest.pipeline.crowd import export_mturk, project_secret
    from retest.pipeline.project import Project

    if not base_url.startswith(("https://", "http://")):
        raise ConfigError(
            f"--base-url must be the http(s):// address the images/ folder will be "
            f"served from, e.g. https://example.org/batch1/images. Got {base_url!r}."
        )
    check_output_dir(out)
    with Project.open(project) as proj:

        def jpeg(item: str) -> bytes:
            buf = io.BytesIO()
            Image.fromarray(proj.pixels([item])[0]).convert("RGB").save(
                buf, "JPEG", quality=90
            )
            return buf.getvalue()

        files = export_mturk(
            proj.store,
            proj.store.tasks.list(),
            out,
            secret=project_secret(proj.root),
            base_url=base_url,
            image_bytes=jpeg,
        )
    for k, v in files.items():
        console.print(f"{k}: {v}")


@crowd_app.command("import")
def import_cmd(
    results: Annotated[Path, typer.Argument(help="MTurk batch results CSV.")],
    project: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import an MTurk batch results CSV; re-importing it applies review changes.

    Every data row is reported as new, a status change (Approve / Reject marks or
    a newer AssignmentStatus), unchanged, or rejected with its line number.
    """
    from retest.cli._console import console, print_json, print_table
    from retest.pipeline.crowd import import_mturk, project_secret, worker_report
    from retest.pipeline.project import Project

    with Project.open(project) as proj:
        res = import_mturk(proj.store, results, secret=project_secret(proj.root))
        workers = worker_report(proj.store)
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
        return
    out = console.print
    out(
        f"{results}: {res.rows} data rows: {res.assignments} new assignments "
        f"({res.events} events), {len(res.status_changes)} status changes, "
        f"{res.unchanged} unchanged, {len(res.rejected_rows)} rejected",
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
    print_table(
        ["worker", "assignments", "control accuracy", "decision"],
        [
            (
                w["worker"][:12],
                w["assignments"],
                f"{w['control_accuracy']:.2f}",
                w["decision"],
            )
            for w in workers
        ],
        title="Workers",
    )


def register(app: typer.Typer) -> None:
    app.add_typer(crowd_app, name="crowd")
