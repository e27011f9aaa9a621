"""``retest label-errors``: confident learning on labels + probabilities or a testbed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from retest.cli._options import ProjectOpt, output_option
from retest.errors import ConfigError

__all__ = ["register"]


def _class_names(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    from retest._validation import check_class_names

    names = tuple(n.strip() for n in value.split(","))
    if len(names) < 2 or any(not n for n in names):
        raise ConfigError(
            f"--class-names must be a comma-separated list of at least 2 names. Got {value!r}."
        )
    return check_class_names(names, "--class-names")


def label_errors(
    out: Annotated[
        Path | None,
        output_option(
            "label-errors",
            "--out",
            help="Output folder (with --revision default "
            "reports/label-errors/REV in the project).",
        ),
    ] = None,
    labels: Annotated[
        Path | None,
        typer.Option("--labels", help="Given labels (.npy, .json or .csv)."),
    ] = None,
    revision: Annotated[
        str | None,
        typer.Option(
            "--revision",
            help="Audit a revision of the project (or 'original', its test set) "
            "with the model predictions `retest evaluate` cached for it; instead "
            "of --labels, --pred-probs, --predictions-dir, --images, --class-names.",
        ),
    ] = None,
    project: ProjectOpt = None,
    pred_probs: Annotated[
        Path | None,
        typer.Option("--pred-probs", help="(N, K) out-of-sample probabilities (.npy)."),
    ] = None,
    predictions_dir: Annotated[
        Path | None,
        typer.Option(
            "--predictions-dir",
            help="Testbed folder, one prediction file per model (ensemble: mean "
            "probabilities, else top-1 vote shares).",
        ),
    ] = None,
    method: Annotated[
        str,
        typer.Option(
            "--method",
            help="The paper's argmax, confident-joint, prune-by-class, "
            "prune-by-noise-rate, both; cleanlab 2.9's predicted-neq-given, "
            "confident-learning, low-self-confidence, low-normalized-margin; or a "
            "cleanlab filter_by spelling (prune_by_noise_rate, …), which gives "
            "cleanlab's answer.",
        ),
    ] = "prune-by-noise-rate",
    min_examples_per_class: Annotated[
        int | None,
        typer.Option(
            "--min-examples-per-class",
            min=0,
            help="Classes with at most this many given labels are not pruned. "
            "Default 5 for the paper's method names (v0.1.0's value, which the "
            "paper's benchmark used), 1 (cleanlab's) for cleanlab's spellings.",
        ),
    ] = None,
    rank_by: Annotated[
        str,
        typer.Option(
            "--rank-by",
            help="self-confidence or normalized-margin (cleanlab's self_confidence, "
            "normalized_margin work too).",
        ),
    ] = "self-confidence",
    true_labels: Annotated[
        Path | None,
        typer.Option(
            "--true-labels", help="Known true labels: adds precision/recall/F1."
        ),
    ] = None,
    images: Annotated[
        Path | None,
        typer.Option(
            "--images", help="uint8 images (N, H, W[, C]) .npy for the contact sheet."
        ),
    ] = None,
    class_names: Annotated[
        str | None, typer.Option("--class-names", help="Comma-separated class names.")
    ] = None,
    top: Annotated[
        int, typer.Option("--top", min=1, help="Rows to print / show.")
    ] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Find, rank and report suspected label errors (confident learning)."""
    from retest._output import RULES, check_output
    from retest.cli._console import console, print_json, print_table
    from retest.label_errors.finders import resolve_method
    from retest.label_errors.ranking import resolve_rank_by
    from retest.project import Project
    from retest.stages.label_errors import (
        load_label_error_inputs,
        revision_label_error_inputs,
        suspect_row,
    )

    resolve_method(method)  # fail fast, with suggestions, before reading files
    try:
        rank_by = resolve_rank_by(rank_by)
    except ConfigError:
        raise ConfigError(
            "--rank-by must be self-confidence or normalized-margin (or cleanlab's "
            f"self_confidence, normalized_margin). Got {rank_by!r}."
        ) from None
    files = {
        "--labels": labels,
        "--pred-probs": pred_probs,
        "--predictions-dir": predictions_dir,
        "--images": images,
        "--class-names": class_names,
    }
    if revision is not None:
        given = [flag for flag, value in files.items() if value is not None]
        if given:
            raise ConfigError(
                f"{given[0]} does not go with --revision: the revision's labels, "
                "images, class names and cached predictions come from the project."
            )
        with Project.open(project) as proj:
            inputs = revision_label_error_inputs(
                proj, revision, true_labels=true_labels
            )
            if out is None:
                out = proj.reports_dir / "label-errors" / revision
            run = _run(inputs, out, method, rank_by, top, min_examples_per_class)
    else:
        if labels is None or out is None:
            raise ConfigError(
                "give --labels FILE and --out DIR (with --pred-probs or "
                "--predictions-dir), or --revision REV to audit a project's revision."
            )
        check_output(out, RULES["label-errors"])
        inputs = load_label_error_inputs(
            labels=labels,
            pred_probs=pred_probs,
            predictions_dir=predictions_dir,
            true_labels=true_labels,
            images=images,
            class_names=_class_names(class_names),
        )
        run = _run(inputs, out, method, rank_by, top, min_examples_per_class)
    shown = [suspect_row(e, run.class_names, inputs.item_ids) for e in run.ranked[:top]]
    if as_json:
        print_json(
            {
                "report": run.report,
                "top": shown,
                "files": {k: str(p) for k, p in run.paths.items()},
            }
        )
        return
    ids = inputs.item_ids is not None
    # item ids first: print_table never cuts its first column
    cols = ["item", "rank"] if ids else ["rank", "index"]
    named = run.class_names is not None
    print_table(
        [*cols, "given", "suggested", "score"],
        [
            [
                *((d["item_id"], d["rank"]) if ids else (d["rank"], d["index"])),
                d["given_name"] if named else d["given"],
                d["suggested_name"] if named else d["suggested"],
                f"{d['score']:.4f}",
            ]
            for d in shown
        ],
        title=f"{run.report['n_flagged']:,} of {run.n_examples:,} labels flagged "
        f"({method}); top {len(shown)}",
    )
    if run.detection is not None:
        d = run.detection
        console.print(
            f"precision {d.precision:.3f}, recall {d.recall:.3f}, F1 {d.f1:.3f} "
            f"against {d.tp + d.fn:,} known errors"
        )
    console.print(
        "wrote " + ", ".join(str(p) for p in run.paths.values()), soft_wrap=True
    )
    if revision is not None and shown:
        queue = f" -p {project}" if project is not None else ""
        console.print(
            "review them in the web app: retest review queue-label-errors "
            f"{run.paths['json']}{queue}",
            soft_wrap=True,
        )


def _run(
    inputs: Any,
    out: Path,
    method: str,
    rank_by: str,
    top: int,
    min_examples_per_class: int | None,
) -> Any:
    from retest.stages.label_errors import run_label_errors

    return run_label_errors(
        inputs,
        out,
        method=method,
        rank_by=rank_by,  # type: ignore[arg-type]
        top=top,
        min_examples_per_class=min_examples_per_class,
    )


def register(app: typer.Typer) -> None:
    app.command("label-errors")(label_errors)
