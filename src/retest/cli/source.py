"""``retest source add KIND PATH | NAME`` / ``retest source list``: candidate ingest."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from retest._validation import check_input_path, fmt_count
from retest.cli._options import JsonOpt, ProjectOpt, batch_size_option, name_option
from retest.errors import ConfigError, UnknownNameError
from retest.registry import close_matches

if TYPE_CHECKING:
    from retest.config import ProjectConfig

__all__ = ["register"]

source_app = typer.Typer(
    help="Ingest candidate images (arrays, idx, cifar, folder, tinyimages, flickr).",
    no_args_is_help=True,
)


#: Options that only one source kind takes (CLI flag → kind).
_KIND_OPTIONS = {
    "--keywords": "tinyimages",
    "--keywords-file": "tinyimages",
    "--labels": "idx",
    "--images": "flickr",
    "--mode": "folder",
}
#: ``[sources.NAME]`` keys holding paths (relative ones are read from the project).
_PATH_KEYS = ("path", "keywords_file", "labels", "images")


def _split(value: str | None, flag: str) -> list[str] | None:
    if value is None:
        return None
    out = [v.strip() for v in value.split(",") if v.strip()]
    if not out:
        raise ConfigError(f"{flag} needs at least one value, e.g. a,b. Got {value!r}.")
    return out


def _check_kind(kind: str) -> None:
    from retest.sources.base import CANDIDATE_SOURCES

    CANDIDATE_SOURCES.get(kind)  # unknown kinds get suggestions (exit 2)


def _check_kind_options(kind: str, given: dict[str, Any]) -> None:
    for flag, value in given.items():
        owner = _KIND_OPTIONS.get(flag)
        if value is not None and owner is not None and owner != kind:
            raise ConfigError(
                f"{flag} applies to source kind {owner!r} only; this source is {kind!r}."
            )


def _configured(config: ProjectConfig, name: str, root: Path) -> dict[str, Any]:
    """``[sources.NAME]`` with its paths made absolute (relative to the project)."""
    if name not in config.sources:
        from retest.sources.base import CANDIDATE_SOURCES

        if name in CANDIDATE_SOURCES:
            raise ConfigError(
                f"source kind {name!r} needs a PATH: `retest source add {name} PATH`, "
                f"or configure [sources.NAME] in retest.toml."
            )
        known = list(config.sources)
        close = close_matches(name, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        listed = f" Configured: {', '.join(known)}." if known else ""
        raise ConfigError(
            f"{name!r} is neither a [sources.{name}] table in retest.toml nor given "
            f"with a PATH.{hint}{listed} Pass KIND PATH or add [sources.{name}]."
        )
    opts = config.source(name)
    for key in _PATH_KEYS:
        if key in opts:
            opts[key] = root / Path(opts[key]).expanduser()
    return opts


def _class_name(config: ProjectConfig, value: str | None) -> str | None:
    if value is not None and value not in config.classes:
        close = close_matches(value, config.classes, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"--class: class {value!r} is not a class of the project.{hint} "
            f"Classes: {', '.join(config.classes)}."
        )
    return value


#: Path entries of a source's settings: (key, what to call it, file or dir).
_PATH_CHECKS = (
    ("path", "PATH", None),
    ("labels", "--labels", "file"),
    ("keywords_file", "--keywords-file", "file"),
    ("images", "--images", "dir"),
)


def _check_paths(conf: dict[str, Any], configured: str | None) -> None:
    """Every path the source will read exists (and is a file / folder as needed)."""
    for key, flag, kind in _PATH_CHECKS:
        if conf.get(key) is None:
            continue
        what = f"[sources.{configured}] {key}" if configured else flag
        if key == "path":
            what = f"{conf['kind']} source {what}"
        check_input_path(conf[key], what, kind=kind)


@source_app.command("add")
def add(
    kind: Annotated[
        str,
        typer.Argument(
            help="Source kind (see `retest source kinds`) followed by PATH; or alone, "
            "the NAME of a \\[sources.NAME] table in retest.toml."
        ),
    ],
    path: Annotated[
        Path | None,
        typer.Argument(help="File or folder of the source (omit for a NAME)."),
    ] = None,
    keywords: Annotated[
        str | None, typer.Option("--keywords", help="TinyImages keywords: a,b,c.")
    ] = None,
    keywords_file: Annotated[
        Path | None,
        typer.Option(
            "--keywords-file",
            help="Keywords, one per line, or JSON {class: \\[keyword, ...]}.",
        ),
    ] = None,
    class_name: Annotated[
        str | None, typer.Option("--class", help="Class of every item.")
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            callback=name_option("source"),
            help="Source name (default: the NAME, else the kind). A name of row "
            "numbers or relative paths (arrays, idx, cifar, folder) holds one file "
            "or folder (same resolved path; a moved copy whose images are all "
            "stored too): give another file a name of its own.",
        ),
    ] = None,
    labels: Annotated[
        Path | None, typer.Option("--labels", help="IDX labels file.")
    ] = None,
    images: Annotated[
        Path | None, typer.Option("--images", help="Flickr download folder.")
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            help="Folder: L or RGB. Images are stored as the originals are (grey "
            "stacked to RGB, or RGB-grey to L, automatically); --mode L also "
            "converts colour images to grey, which are otherwise skipped.",
        ),
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size", help="Items per batch (>= 1).", callback=batch_size_option
        ),
    ] = None,
    project_dir: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ingest a source's images as candidates (resumable; exact copies de-duplicated).

    `retest source add NAME` ingests the \\[sources.NAME] table of retest.toml
    (kind, path and options); options given here override the table's. A
    TinyImages source without keywords takes every keyword of \\[keywords].
    Candidates with the same source name and reference are linked as one image,
    so a second file under a name of row numbers or relative paths is refused:
    pass --name.
    """
    from retest.cli._console import print_json, print_table, print_warning, progress_bar
    from retest.project import Project
    from retest.stages.ingest import add_source

    kws = _split(keywords, "--keywords")
    if path is not None:
        _check_kind(kind)
    with Project.open(project_dir) as project:
        conf: dict[str, Any] = (
            {"kind": kind, "path": path}
            if path is not None
            else {"name": kind, **_configured(project.config, kind, project.root)}
        )
        given = {
            "keywords": kws,
            "keywords_file": keywords_file,
            "class": class_name,
            "labels": labels,
            "images": images,
            "batch_size": batch_size,
            "name": name,
            "mode": mode,
        }
        conf.update({k: v for k, v in given.items() if v is not None})
        src_kind = conf["kind"]
        if path is None:
            try:
                _check_kind(src_kind)
            except UnknownNameError as err:
                raise ConfigError(
                    f"{project.config_path}: [sources.{kind}] kind: {err}"
                ) from None
        _check_kind_options(
            src_kind,
            {
                "--keywords": conf.get("keywords"),
                "--keywords-file": conf.get("keywords_file"),
                "--labels": conf.get("labels"),
                "--images": conf.get("images"),
                "--mode": conf.get("mode"),
            },
        )
        kw_arg: Any = conf.get("keywords")
        if kw_arg is not None and conf.get("keywords_file") is not None:
            raise ConfigError("pass either --keywords or --keywords-file, not both.")
        if src_kind == "tinyimages" and kw_arg is None and "keywords_file" not in conf:
            kw_arg = {
                kw: cls
                for cls, kw_list in project.config.keywords.items()
                for kw in kw_list
            } or None
        cls = _class_name(project.config, conf.get("class"))
        _check_paths(conf, configured=kind if path is None else None)
        with progress_bar(disable=as_json) as bar:
            rep = add_source(
                project,
                src_kind,
                conf["path"],
                keywords=kw_arg,
                keywords_file=conf.get("keywords_file"),
                class_name=cls,
                name=conf.get("name"),
                labels_path=conf.get("labels"),
                images_dir=conf.get("images"),
                batch_size=conf.get("batch_size"),
                progress=bar,
                mode=conf.get("mode"),
            )
    if as_json:
        print_json(
            {
                **rep.to_json(),
                "already_ingested": rep.already_ingested,
                "removed_temporaries": list(rep.removed_temporaries),
            }
        )
        return
    from retest.cli._console import console

    if rep.removed_temporaries:
        n = len(rep.removed_temporaries)
        console.print(
            f"removed {n} temporary file{'s' * (n > 1)} a killed ingest left "
            f"(e.g. {rep.removed_temporaries[0]})",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )
    if rep.already_ingested:
        console.print(
            f"already ingested: job {rep.job} (source {rep.name!r}, {rep.kind} "
            f"{rep.path}); 0 new this run. Earlier: {fmt_count(rep.total)} items, "
            f"{fmt_count(rep.new)} new candidates, {fmt_count(rep.duplicates)} exact "
            f"duplicates, {fmt_count(len(rep.skipped))} "
            "unreadable.",
            soft_wrap=True,
        )
        return
    rows: list[list[Any]] = [
        ["source", rep.name],
        ["kind", rep.kind],
        ["path", rep.path],
        ["items", fmt_count(rep.total)],
        ["new candidates", fmt_count(rep.new)],
        ["exact duplicates", fmt_count(rep.duplicates)],
        ["unreadable (skipped)", fmt_count(len(rep.skipped))],
    ]
    print_table(["ingest", "value"], rows, title=f"ingest {rep.job}")
    for s in rep.skipped[:20]:
        print_warning(f"skipped {s['ref']}: {s['reason']}")
    missing = rep.source.get("missing_keywords")
    if missing:
        print_warning(f"keywords not in TinyImages: {', '.join(missing)}")


@source_app.command("list")
def list_(project_dir: ProjectOpt = None, as_json: JsonOpt = False) -> None:
    """Ingest jobs of the project with their counts."""
    from retest.cli._console import print_json, print_table
    from retest.project import Project
    from retest.stages.ingest import list_ingests

    with Project.open(project_dir) as project:
        jobs = list_ingests(project)
    if as_json:
        print_json(jobs)
        return
    cols = ["name", "kind", "path", "items", "new", "duplicates", "skipped", "complete"]
    rows = [
        [
            j["name"],
            j["kind"],
            j["path"],
            j["total"],
            j["new"],
            j["duplicates"],
            j["skipped"],
            "yes" if j["complete"] else f"no ({j['processed']} done)",
        ]
        for j in jobs
    ]
    print_table(cols, rows, title="sources")


@source_app.command("kinds")
def kinds() -> None:
    """Registered source kinds."""
    from retest.cli._console import console
    from retest.sources.base import CANDIDATE_SOURCES

    for k in CANDIDATE_SOURCES.names():
        console.print(k)


def register(app: typer.Typer) -> None:
    app.add_typer(source_app, name="source")
