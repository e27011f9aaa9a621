"""``retest compare``: original vs new accuracy table, linear fit and figure."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from retest.cli._options import bootstrap_option, output_option, seed_option
from retest.errors import ConfigError, RetestWarning

__all__ = ["register"]


@contextmanager
def _show_retest_warnings() -> Iterator[None]:
    """Print retest warnings (e.g. dropped models) as one-line ``warning:`` messages."""
    from retest.cli._console import print_warning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RetestWarning)
        yield
    for w in caught:
        if issubclass(w.category, RetestWarning):
            print_warning(str(w.message))
        else:  # pragma: no cover - re-emit anything else unchanged
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _render(result: Any, out: Path, as_json: bool) -> None:
    from retest.cli._console import console, print_json, print_table
    from retest.stages.report import PAPER_COLUMNS, paper_rows, table_to_json

    table, fit = result.table, result.fit
    if as_json:
        print_json(
            {
                "table": table_to_json(table),
                "fit": fit.summary(),
                "files": {k: str(p) for k, p in result.paths.items()},
            }
        )
        return
    title = (
        f"{table.metric} accuracy (%), original: {table.dataset_orig}, "
        f"new: {table.dataset_new}, {len(table.rows)} models"
    )
    rows = paper_rows(table)
    # Off a terminal (pipes, files) nothing wraps lines, so never squeeze the table.
    need = sum(
        max(len(c), *(len(r[i]) for r in rows)) + 3 for i, c in enumerate(PAPER_COLUMNS)
    )
    width = console.width
    if not console.is_terminal:
        console.width = max(width, need + 1)
    try:
        print_table(PAPER_COLUMNS, rows, title=title)
    finally:
        console.width = width
    digits = 1 if fit.axes == "linear" else 3
    conf = f"{100 * fit.confidence:g}%"
    console.print(
        f"{fit.equation()}, slope [{fit.slope_ci[0]:.2f}, {fit.slope_ci[1]:.2f}], "
        f"intercept [{fit.intercept_ci[0]:.{digits}f}, {fit.intercept_ci[1]:.{digits}f}] "
        f"({conf} pairs bootstrap, {fit.n_boot:,} resamples; R² = {fit.r2:.3f})",
        soft_wrap=True,
    )
    names = ", ".join(p.name for p in result.paths.values())
    console.print(f"wrote {names} to {out}", soft_wrap=True)


def _run(example: bool, out: Path, kwargs: dict[str, Any], progress: Any) -> Any:
    from retest._output import RULES, check_output, claim_output_dir
    from retest.stages.compare import check_compare_options

    check_compare_options(
        **{
            k: kwargs[k]
            for k in (
                "metric",
                "axes",
                "confidence",
                "num_classes",
                "name_orig",
                "name_new",
            )
        }
    )
    check_output(out, RULES["compare"])
    if example:
        from retest.demo.example import run_example

        claim_output_dir(out, RULES["compare"])
        keep = ("metric", "axes", "confidence", "n_boot", "label_models")
        _, result = run_example(
            out, seed=kwargs["seed"], progress=progress, **{k: kwargs[k] for k in keep}
        )
        return result
    missing = [
        f"--{k.replace('_', '-')}"
        for k in ("labels_orig", "labels_new", "predictions_orig", "predictions_new")
        if kwargs[k] is None
    ]
    if missing:
        raise ConfigError(
            f"missing {', '.join(missing)}; pass them, or use --example to run on a "
            "generated example testbed."
        )
    from retest.stages.compare import run_compare

    return run_compare(out=out, progress=progress, **kwargs)


def register(app: typer.Typer) -> None:
    """Add ``retest compare``."""

    @app.command("compare")
    def compare_cmd(
        out: Annotated[
            Path, output_option("compare", "--out", help="Folder for all outputs.")
        ],
        labels_orig: Annotated[
            Path | None,
            typer.Option(help="Original test-set labels (.npy/.json/.csv)."),
        ] = None,
        labels_new: Annotated[
            Path | None, typer.Option(help="New test-set labels (.npy/.json/.csv).")
        ] = None,
        predictions_orig: Annotated[
            Path | None,
            typer.Option(help="Folder of per-model predictions, original set."),
        ] = None,
        predictions_new: Annotated[
            Path | None, typer.Option(help="Folder of per-model predictions, new set.")
        ] = None,
        model_names: Annotated[
            Path | None,
            typer.Option(help="CSV prediction_file_model,paper_name to rename models."),
        ] = None,
        metric: Annotated[str, typer.Option(help="top1 or top5.")] = "top1",
        axes: Annotated[
            str, typer.Option(help="Fit axes: linear, probit or logit.")
        ] = "linear",
        confidence: Annotated[float, typer.Option(help="Interval level.")] = 0.95,
        bootstrap: Annotated[
            int,
            typer.Option(help="Bootstrap resamples.", callback=bootstrap_option),
        ] = 100_000,
        seed: Annotated[
            int, typer.Option(help="Seed of the bootstrap.", callback=seed_option)
        ] = 0,
        num_classes: Annotated[
            int | None,
            typer.Option(min=1, help="Number of classes (default: inferred)."),
        ] = None,
        name_orig: Annotated[
            str | None, typer.Option(help="Name of the original test set.")
        ] = None,
        name_new: Annotated[
            str | None, typer.Option(help="Name of the new test set.")
        ] = None,
        label: Annotated[
            list[str] | None,
            typer.Option("--label", help="Model to label in the figure."),
        ] = None,
        example: Annotated[
            bool,
            typer.Option("--example", help="Generate and compare the example testbed."),
        ] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """Table, fit and figure of original vs new accuracy for a testbed of models."""
        from retest.cli._console import progress_bar

        kwargs: dict[str, Any] = {
            "labels_orig": labels_orig,
            "labels_new": labels_new,
            "predictions_orig": predictions_orig,
            "predictions_new": predictions_new,
            "model_names": model_names,
            "metric": metric,
            "axes": axes,
            "confidence": confidence,
            "n_boot": bootstrap,
            "seed": seed,
            "num_classes": num_classes,
            "name_orig": name_orig,
            "name_new": name_new,
            "label_models": tuple(label or ()),
        }
        run: Callable[[Any], Any] = lambda cb: _run(example, out, kwargs, cb)  # noqa: E731
        with _show_retest_warnings(), progress_bar(disable=as_json) as cb:
            result = run(cb)
        _render(result, out, as_json)
