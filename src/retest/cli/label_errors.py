"""``retest label-errors``: confident learning on labels + probabilities or a testbed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retest.cli._options import output_option
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
    out: Annotated[Path, output_option("label-errors", "--out", help="Output folder.")],
    labels: Annotated[
        Path, typer.Option("--labels", help="Given labels (.npy, .json or .csv).")
    ],
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
        str, typer.Option("--rank-by", help="self_confidence or normalized_margin.")
    ] = "self_confidence",
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
    from retest.stages.label_errors import load_label_error_inputs, run_label_errors

    resolve_method(method)  # fail fast, with suggestions, before reading files
    check_output(out, RULES["label-errors"])
    if rank_by not in ("self_confidence", "normalized_margin"):
        raise ConfigError(
            f"--rank-by must be self_confidence or normalized_margin. Got {rank_by!r}."
        )
    inputs = load_label_error_inputs(
        labels=labels,
        pred_probs=pred_probs,
        predictions_dir=predictions_dir,
        true_labels=true_labels,
        images=images,
        class_names=_class_names(class_names),
    )
    run = run_label_errors(
        inputs,
        out,
        method=method,
        rank_by=rank_by,  # type: ignore[arg-type]
        top=top,
        min_examples_per_class=min_examples_per_class,
    )
    shown = [e.as_dict(run.class_names) for e in run.ranked[:top]]
    if as_json:
        print_json(
            {
                "report": run.report,
                "top": shown,
                "files": {k: str(p) for k, p in run.paths.items()},
            }
        )
        return
    cols = ["rank", "index", "given", "suggested", "score"]
    named = run.class_names is not None
    print_table(
        cols,
        [
            [
                d["rank"],
                d["index"],
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


def register(app: typer.Typer) -> None:
    app.command("label-errors")(label_errors)
