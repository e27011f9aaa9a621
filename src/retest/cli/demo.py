"""``retest demo``: the whole job on Fashion-MNIST (an i.i.d. control), one command."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from retest.cli._options import JsonOpt, output_option, seed_option

if TYPE_CHECKING:
    from retest.demo.run import DemoResult

__all__ = ["register"]


def demo(
    directory: Annotated[
        Path,
        output_option("demo", "--dir", help="Project folder of the demo (created)."),
    ] = Path("retest-demo"),
    quick: Annotated[
        bool, typer.Option("--quick", help="Quick testbed preset (under 2 minutes).")
    ] = False,
    seed: Annotated[
        int,
        typer.Option(
            "--seed", help="Seed of every random step, ≥ 0.", callback=seed_option
        ),
    ] = 0,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            help="Train models on a local Dask cluster of N worker processes "
            "(0: one after the other in this process).",
        ),
    ] = 2,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            help="Folder of the Fashion-MNIST .gz files (default: Debian's copy, "
            "else downloaded).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Rebuild a Fashion-MNIST test set end to end and evaluate a model testbed on it.

    A new test set is sampled from held-out training images; the testbed is trained
    and evaluated on both test sets, original vs new accuracy is plotted and
    suspected label errors are listed. The pool is drawn from the same distribution as the test set: a correct
    pipeline shows no real drop (slope ≈ 1, mean gap within sampling error).
    Rerunning reuses finished steps and cached predictions.
    """
    from retest._output import RULES, check_output
    from retest._validation import check_input_path
    from retest.cli._console import print_json, progress_bar
    from retest.demo.run import DemoSettings, run_demo
    from retest.errors import ConfigError

    if workers < 0:
        raise ConfigError(f"--workers must be 0 or more. Got {workers}.")
    if data is not None:  # an explicit folder is never replaced by a download
        check_input_path(data, "--data", kind="dir")
    check_output(directory, RULES["demo"], option="--dir")
    settings = DemoSettings.for_run(quick=quick, seed=seed)
    with progress_bar(disable=as_json) as cb:
        res = run_demo(
            directory,
            settings=settings,
            workers=workers or None,
            data_root=data,
            progress=cb,
        )
    if as_json:
        print_json(res.as_dict())
        return
    _render(res)


def _render(res: DemoResult) -> None:
    from retest.cli._console import print_table

    t = res.table
    rows = [
        [
            r.model,
            f"{100 * r.orig.value:.1f}",
            f"{100 * r.new.value:.1f}",
            f"{100 * r.gap:+.1f} [{100 * r.gap_lo:+.1f}, {100 * r.gap_hi:+.1f}]",
        ]
        for r in t.rows
    ]
    print_table(
        ["model", "orig %", "new %", "gap (points) [95% CI]"],
        rows,
        title=f"{t.dataset_orig} (n={t.rows[0].orig.n}) vs {t.dataset_new} "
        f"(n={t.rows[0].new.n})",
    )
    nd = res.near_duplicates
    echo = typer.echo
    for line in _left_out_lines(res.settings.preset):
        echo(line)
    echo(
        f"near-duplicates (the project's eligibility rule, squared L2 ≤ "
        f"{nd['threshold_sq_l2']:,.0f}): {nd['test']} of the test set, {nd['train']} of "
        f"the remaining training set, {nd['pool_pairs']} pairs within the pool, "
        f"{nd['pool_exact_duplicates']} exact copies merged at ingest; "
        f"{nd['n_excluded']} pool images excluded "
        f"({nd.get('unreviewed_included', 0)} awaiting a near-duplicate review let "
        "through: the demo has no reviewer)."
    )
    if res.fit is not None:
        echo(f"fit: {res.fit.equation()}  R²={res.fit.r2:.3f}")
    names = res.class_names
    echo("most likely label errors of the Fashion-MNIST test set:")
    for e in res.label_errors[:10]:
        echo(
            f"  #{e.rank:<2} test[{e.index}]  given {names[e.given]!r} → "
            f"{names[e.suggested]!r} (p={e.suggested_prob:.2f})"
        )
    steps = f"steps run: {', '.join(res.steps_run) or '-'}"
    if res.steps_reused:
        steps += f"; reused: {', '.join(res.steps_reused)}"
    echo(f"{steps}; predictions computed: {res.predictions_computed}")
    echo("files:")
    for key in (
        "project",
        "revision",
        "report_markdown",
        "report_png",
        "report_fit",
        "label_errors_csv",
        "label_errors_contact_sheet",
        "dedup_sheet",
    ):
        if key in res.paths:
            echo(f"  {key:<28}{res.paths[key]}")
    echo(
        "i.i.d. control: the pool comes from the same distribution as the test set, "
        "so expect slope ≈ 1 and |mean gap| < 2·SE."
    )
    echo(f"summary: {res.summary}")


def _left_out_lines(preset: str) -> list[str]:
    """One line per model of ``preset`` this installation cannot run, and why."""
    from retest.models.testbed import unavailable_models

    return [
        f"{name} left out: {why} (scripts/install.sh installs its CPU build where "
        "this machine has the file)"
        for name, why in unavailable_models(preset).items()
    ]


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
