"""``retest models``: list the model testbed, run a model file on images."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retest.cli._options import JsonOpt, batch_size_option, output_option

models_app = typer.Typer(
    help="Model runners and the built-in testbed.", no_args_is_help=True
)


@models_app.command("list")
def list_cmd(
    preset: Annotated[
        str | None, typer.Option(help="Only models of this preset (quick, full).")
    ] = None,
    pattern: Annotated[str, typer.Option(help="Shell-style name filter.")] = "*",
    as_json: JsonOpt = False,
) -> None:
    """Registered models: name, kind, presets, description."""
    from retest.cli._console import print_json, print_table
    from retest.errors import ConfigError
    from retest.models.base import RUNNER_KINDS, list_models

    if preset is not None and preset not in ("quick", "full"):
        raise ConfigError(f"--preset must be 'quick' or 'full'. Got {preset!r}.")
    specs = list_models(pattern, preset=preset)
    rows = [
        {
            "name": s.name,
            "kind": s.kind,
            "presets": list(s.presets),
            "description": s.description,
        }
        for s in specs
    ]
    if as_json:
        print_json({"models": rows, "runner_kinds": RUNNER_KINDS.names()})
        return
    print_table(
        ["name", "kind", "presets", "description"],
        [
            [r["name"], r["kind"], ",".join(r["presets"]), r["description"]]
            for r in rows
        ],
        title=f"{len(rows)} models (runner kinds for files: {', '.join(RUNNER_KINDS.names())})",
    )


@models_app.command("predict")
def predict_cmd(
    kind: Annotated[
        str, typer.Argument(help="Runner kind: sklearn, torchscript, onnx.")
    ],
    model_file: Annotated[Path, typer.Argument(help="The model file.")],
    images: Annotated[
        Path, typer.Option(help="uint8 images (N, H, W[, C]) or features, .npy.")
    ],
    out: Annotated[
        Path,
        output_option(
            "models predict",
            "--out",
            help="Predictions file to write (.npy, .json or .csv).",
        ),
    ],
    num_classes: Annotated[int, typer.Option(min=1, help="Number of classes.")],
    name: Annotated[
        str | None, typer.Option(help="Model name (default: file stem).")
    ] = None,
    dataset: Annotated[str, typer.Option(help="Dataset name recorded.")] = "data",
    layout: Annotated[
        str | None, typer.Option(help="ONNX input layout: NCHW, NHWC or flat.")
    ] = None,
    batch_size: Annotated[
        int | None, typer.Option(help="Images per batch.", callback=batch_size_option)
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite", help="Replace the --out file if it is a predictions file."
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a model file on an image array and write its predictions.

    An existing --out file is replaced only with --overwrite and only when it
    holds predictions; a project's own files are never written.
    """
    import numpy as np

    from retest._output import RULES, check_output
    from retest._validation import check_input_path
    from retest.cli._console import print_json, progress_bar
    from retest.datasets.predictions import PREDICTION_SUFFIXES, write_predictions
    from retest.errors import ConfigError, DataIntegrityError
    from retest.models.base import RUNNER_KINDS, _ensure_builtins, load_model

    _ensure_builtins()
    RUNNER_KINDS.get(kind)  # an unknown kind first, with suggestions (exit 2)
    if out.suffix.lower() not in PREDICTION_SUFFIXES:
        raise ConfigError(
            f"--out {out}: unknown predictions format {out.suffix!r}; name the file "
            f"with one of {', '.join(PREDICTION_SUFFIXES)}."
        )
    check_output(
        out,
        RULES["models predict"],
        overwrite=overwrite,
        owned=_predictions_file,
    )
    check_input_path(model_file, "MODEL_FILE", kind="file")
    check_input_path(images, "--images", kind="file")
    opts = {}
    if layout is not None:
        from retest._validation import check_applies, check_choice
        from retest.models.onnx_runner import ONNX_LAYOUTS

        check_choice(layout, ONNX_LAYOUTS, "--layout")
        check_applies("--layout", "an ONNX model (KIND onnx)", kind == "onnx")
        opts = {"layout": layout}
    runner = load_model(
        kind,
        str(model_file),
        name=name or model_file.stem,
        n_classes=num_classes,
        **opts,
    )
    try:
        x = np.load(images, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as err:
        raise DataIntegrityError(f"cannot read images {images}: {err}") from err
    with progress_bar(disable=as_json) as progress:
        pred = runner.predict(
            x, dataset=dataset, batch_size=batch_size, progress=progress
        )
    path = write_predictions(pred, out)
    summary = {
        "model": pred.model,
        "dataset": pred.dataset,
        "n": pred.n,
        "k": pred.k,
        "out": str(path),
    }
    if as_json:
        print_json(summary)
    else:
        typer.echo(f"wrote {pred.n} predictions of {pred.model} to {path}")


def _predictions_file(path: Path) -> str | None:
    """None when ``path`` holds predictions (what ``--overwrite`` may replace)."""
    from retest.datasets.predictions import read_predictions
    from retest.errors import RetestError

    try:
        read_predictions(path)
    except (RetestError, OSError, ValueError) as err:
        return f"it does not hold predictions: {err}"
    return None


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
