"""``retest evaluate``: a testbed on a project's original test set and its revisions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from retest.cli._options import (
    JsonOpt,
    ProjectOpt,
    batch_size_option,
    bootstrap_option,
    cluster_option,
    output_option,
    seed_option,
)
from retest.errors import ConfigError

if TYPE_CHECKING:
    from retest.stages.evaluate import ProjectEvaluation

__all__ = ["register"]


def _folders(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        name, sep, folder = v.partition("=")
        if not sep or not name.strip() or not folder.strip():
            raise ConfigError(
                f"--predictions {v!r}: expected DATASET=FOLDER, DATASET being "
                "'original' or a revision name."
            )
        if name.strip() in out:
            raise ConfigError(f"--predictions names {name.strip()!r} twice.")
        out[name.strip()] = folder.strip()
    return out


def _formats(value: str) -> tuple[str, ...]:
    from retest.stages.report import FIGURE_FORMATS

    fmts = tuple(f.strip().lower() for f in value.split(",") if f.strip())
    bad = [f for f in fmts if f not in FIGURE_FORMATS]
    if bad:
        raise ConfigError(
            f"--figure {bad[0]!r}: figure formats are {', '.join(FIGURE_FORMATS)} "
            "(comma-separated; empty for none)."
        )
    return fmts


def evaluate(
    revision: Annotated[
        list[str] | None,
        typer.Option(
            "--revision", "-r", help="Revision to evaluate (repeat; default: all)."
        ),
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option("--preset", help="Built-in testbed preset: quick or full."),
    ] = None,
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model", help="Built-in testbed model (repeat; see `retest models list`)."
        ),
    ] = None,
    model_file: Annotated[
        list[str] | None,
        typer.Option(
            "--model-file",
            help="Trained model file [KIND:]PATH (repeat): .pt/.ts TorchScript, .onnx. "
            "It gets float32 in [0, 1], NCHW (N, C, H, W) with the originals' "
            "channels (1 grey, 3 RGB) and returns (N, n_classes) logits or "
            "probabilities; checked on two test images first.",
        ),
    ] = None,
    model_channels: Annotated[
        int | None,
        typer.Option(
            "--model-channels",
            help="Adapt the images for model files trained on another channel "
            "count: 3 stacks grey to RGB, 1 turns RGB to grey (luma).",
        ),
    ] = None,
    onnx_layout: Annotated[
        str | None,
        typer.Option("--onnx-layout", help="ONNX input: NCHW, NHWC or flat."),
    ] = None,
    predictions: Annotated[
        list[str] | None,
        typer.Option(
            "--predictions",
            help="DATASET=FOLDER of per-model prediction files (repeat; DATASET is "
            "'original' or a revision name; needed for every evaluated dataset).",
        ),
    ] = None,
    test_split: Annotated[
        str,
        typer.Option("--test-split", help="Reference split of the original test set."),
    ] = "test",
    train_split: Annotated[
        str,
        typer.Option(
            "--train-split", help="Reference split the testbed is trained on."
        ),
    ] = "train",
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", help="Run models on a local Dask cluster of N workers."
        ),
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            help="Dask scheduler address, e.g. tcp://10.0.0.5:8786, or a "
            "scheduler file.",
            callback=cluster_option,
        ),
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size", help="Images per batch.", callback=batch_size_option
        ),
    ] = None,
    out: Annotated[
        Path | None,
        output_option(
            "evaluate",
            "--out",
            help="Report folder (default reports/evaluate); one subfolder per revision.",
        ),
    ] = None,
    metric: Annotated[str, typer.Option("--metric", help="top1 or top5.")] = "top1",
    axes: Annotated[
        str, typer.Option("--axes", help="Fit axes: linear, probit or logit.")
    ] = "linear",
    confidence: Annotated[
        float, typer.Option("--confidence", min=0.5, max=0.9999, help="Interval level.")
    ] = 0.95,
    bootstrap: Annotated[
        int,
        typer.Option(
            "--bootstrap",
            help="Bootstrap resamples of the fit.",
            callback=bootstrap_option,
        ),
    ] = 100_000,
    seed: Annotated[
        int,
        typer.Option(
            "--seed",
            help="Seed of the testbed models and the bootstrap, ≥ 0.",
            callback=seed_option,
        ),
    ] = 0,
    label: Annotated[
        list[str] | None, typer.Option("--label", help="Model to label in the figure.")
    ] = None,
    figure: Annotated[
        str,
        typer.Option("--figure", help="Figure formats, comma-separated (png,svg,pdf)."),
    ] = "png,pdf",
    project_dir: ProjectOpt = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Also evaluate revisions that export would refuse (empty, invalid, "
            "members no longer eligible).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Evaluate models on the original test set and revisions; write table, fit and figure.

    Models: the built-in testbed (--preset/--model, trained on the original training
    split), trained model files (--model-file) and saved predictions (--predictions).
    Every prediction is cached (arrays/predictions/): a rerun computes nothing.
    """
    from retest._output import RULES, check_output
    from retest.cli._console import print_warning, progress_bar
    from retest.cli.compare import _show_retest_warnings
    from retest.cli.reference import REFERENCE_SPLITS
    from retest.evaluate.metrics import METRICS
    from retest.project import Project
    from retest.stages.evaluate import (
        ORIGINAL,
        evaluate_project,
        project_models,
        project_revisions,
        releasable_revisions,
    )

    if preset is not None and preset not in ("quick", "full"):
        raise ConfigError(f"--preset must be 'quick' or 'full'. Got {preset!r}.")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be at least 1. Got {workers}.")
    if workers and cluster:
        raise ConfigError("pass either --workers N or --cluster ADDRESS, not both.")
    if axes not in ("linear", "probit", "logit"):
        raise ConfigError(f"--axes must be linear, probit or logit. Got {axes!r}.")
    METRICS.get(metric)
    for flag, split in (("--test-split", test_split), ("--train-split", train_split)):
        if split not in REFERENCE_SPLITS:
            raise ConfigError(
                f"{flag} must be one of {', '.join(REFERENCE_SPLITS)} (the splits "
                f"`retest reference add` registers). Got {split!r}."
            )
    if out is not None:
        check_output(out, RULES["evaluate"])
    if model_channels is not None and (model_channels not in (1, 3) or not model_file):
        raise ConfigError(
            "--model-channels must be 1 or 3 and goes with --model-file. Got "
            f"{model_channels}{'' if model_file else ' without --model-file'}."
        )
    formats = _formats(figure)
    folders = _folders(predictions or [])
    onnx = {"layout": onnx_layout} if onnx_layout else {}
    with (
        Project.open(project_dir) as project,
        _show_retest_warnings(),
        progress_bar(disable=as_json) as cb,
    ):
        if force:
            revs = project_revisions(project, revision or None)
        else:  # score only what could be released, like export
            revs, skipped = releasable_revisions(project, revision or None)
            for why in skipped.values():
                print_warning(f"skipped: {why}")
        models = project_models(
            project,
            preset=preset,
            names=model or (),
            files=model_file or (),
            predictions=folders,
            datasets=[ORIGINAL, *revs],
            seed=seed,
            onnx_options=onnx,
            model_channels=model_channels,
            progress=cb,
        )
        res = evaluate_project(
            project,
            models,
            revisions=revs,
            test_split=test_split,
            train_split=train_split,
            out_dir=out,
            cluster=cluster,
            workers=workers,
            batch_size=batch_size,
            metric=metric,
            axes=axes,
            confidence=confidence,
            n_boot=bootstrap,
            seed=seed,
            figure_formats=formats,
            label_models=tuple(label or ()),
            progress=cb,
        )
    _render(res, as_json)


def _render(res: ProjectEvaluation, as_json: bool) -> None:
    from retest.cli._console import console, print_json, print_table, print_warning
    from retest.stages.report import PAPER_COLUMNS, paper_rows, table_to_json

    if as_json:
        print_json(
            {
                "models": list(res.models),
                "predictions_computed": res.computed,
                "original": {"name": res.original.name, "n": res.original.n},
                "revisions": {
                    name: {
                        "table": table_to_json(rep.table),
                        "fit": rep.fit.summary() if rep.fit is not None else None,
                        "files": {k: str(p) for k, p in rep.paths.items()},
                    }
                    for name, rep in res.reports.items()
                },
            }
        )
        return
    width = console.width
    for name, rep in res.reports.items():
        t = rep.table
        rows = paper_rows(t)
        need = sum(
            max(len(c), *(len(r[i]) for r in rows)) + 3
            for i, c in enumerate(PAPER_COLUMNS)
        )
        if not console.is_terminal:  # never squeeze the table in a pipe or file
            console.width = max(width, need + 1)
        try:
            print_table(
                PAPER_COLUMNS,
                rows,
                title=f"{t.metric} accuracy (%), original: {t.dataset_orig} "
                f"(n={res.original.n}), new: {name} (n={t.rows[0].new.n}), "
                f"{len(t.rows)} models",
            )
        finally:
            console.width = width
        fit = rep.fit
        if fit is not None:
            console.print(
                f"{fit.equation()}, slope [{fit.slope_ci[0]:.2f}, {fit.slope_ci[1]:.2f}] "
                f"({100 * fit.confidence:g}% pairs bootstrap, {fit.n_boot:,} resamples; "
                f"R² = {fit.r2:.3f})",
                soft_wrap=True,
            )
            if fit.caveat() is not None:
                print_warning(str(fit.caveat()))
        else:
            console.print("no fit: it needs at least 3 models.", soft_wrap=True)
        folder = next(iter(rep.paths.values())).parent
        files = ", ".join(p.name for p in rep.paths.values())
        console.print(f"wrote {files} to {folder}", soft_wrap=True)
    console.print(
        f"predictions computed: {res.computed} (the others came from the cache)",
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    app.command("evaluate")(evaluate)
