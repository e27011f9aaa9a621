"""``retest sample``, ``retest revisions``, ``retest diff``: draw and compare revisions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from retest._validation import fmt_count
from retest.cli._options import (
    CompatOpt,
    JsonOpt,
    ProjectOpt,
    SharedClassOpt,
    live_help,
    name_option,
    seed_option,
    shared_classes,
)
from retest.errors import ConfigError, InputValidationError

__all__ = ["print_revision_statistics", "register", "revision_statistics_data"]


def _class_thresholds(values: list[str], classes: Any) -> dict[str, float]:
    from retest.errors import UnknownNameError

    out = {}
    for v in values:
        name, sep, num = v.rpartition("=")
        try:
            out[name] = float(num)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise ConfigError(
                f"--class-threshold must look like CLASS=0.6. Got {v!r} instead."
            )
        if name not in classes:
            import difflib

            close = difflib.get_close_matches(name, list(classes), n=3)
            raise UnknownNameError("class", name, close, list(classes))
        if not 0.0 <= out[name] <= 1.0:
            raise ConfigError(
                f"--class-threshold {name}: a selection frequency lies in [0, 1]. "
                f"Got {out[name]}."
            )
    return out


def _strategy_help() -> str:
    from retest.sampling.base import describe_samplers

    return describe_samplers() + "."


def _keyword_counts(
    path: Path | None, classes: Any
) -> dict[str, dict[str, int]] | None:
    """The keyword plan file, checked against the project before anything runs."""
    if path is None:
        return None
    expected = 'Expected JSON {"class": {"keyword": n}} with counts n ≥ 0'
    from retest._validation import decode_utf8

    try:
        text = decode_utf8(path.read_bytes(), str(path), f"{expected}, as UTF-8.")
        data = json.loads(text)
    except (OSError, json.JSONDecodeError) as err:
        raise InputValidationError(
            f"{path}: cannot read keyword counts ({err}). {expected}."
        ) from None
    if not isinstance(data, dict) or not all(
        isinstance(v, dict) for v in data.values()
    ):
        raise InputValidationError(f"{path}: not a keyword-count object. {expected}.")
    for cls, kws in data.items():
        if cls not in classes:
            from retest.registry import close_matches

            close = close_matches(cls, list(classes), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InputValidationError(
                f"{path}: class {cls!r} is not a class of the project{hint}. "
                f"{expected}, classes from retest.toml."
            )
        bad = {k: n for k, n in kws.items() if not isinstance(n, int) or n < 0}
        if bad:
            k, n = next(iter(bad.items()))
            raise InputValidationError(
                f"{path}: count {n!r} of keyword {k!r} ({cls}) is not a whole "
                f"number ≥ 0. {expected}."
            )
    return data


def sample(
    strategy: Annotated[
        str,
        typer.Option("--strategy"),  # help: _strategy_help, when shown
    ],
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            callback=seed_option,
            help="Seed of every random draw, ≥ 0 (default: `sample` under "
            "\\[seeds] in retest.toml).",
        ),
    ] = None,
    per_class: Annotated[
        int, typer.Option("--per-class", min=1, help="Images per class.")
    ] = 10,
    parent: Annotated[
        str | None,
        typer.Option("--from", help="Start from this revision (carry-over)."),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            help="Selection-frequency threshold τ (default: `selection_frequency` "
            "under \\[thresholds] in retest.toml, else 0.7).",
        ),
    ] = None,
    class_threshold: Annotated[
        list[str] | None,
        typer.Option("--class-threshold", help="Per-class τ override CLASS=0.6."),
    ] = None,
    min_annotations: Annotated[
        int | None,
        typer.Option("--min-annotations", help="Valid assignments a candidate needs."),
    ] = None,
    no_upward: Annotated[
        bool, typer.Option("--no-upward", help="Disable upward sampling.")
    ] = False,
    keyword_counts: Annotated[
        Path | None,
        typer.Option("--keyword-counts", help="JSON {class: {keyword: n}}."),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            callback=name_option("revision"),
            help="Explicit revision name (default PROJECT-STRATEGY-N, N one more "
            "than the strategy's latest).",
        ),
    ] = None,
    include_unreviewed: Annotated[
        bool,
        typer.Option(
            "--include-unreviewed",
            help="Let in candidates whose near-duplicate review is still pending.",
        ),
    ] = False,
    no_dedup: Annotated[
        bool,
        typer.Option(
            "--no-dedup",
            help="Sample although `retest dedup` never ran (a draft, not a release).",
        ),
    ] = False,
    compat: CompatOpt = "exact",
    shared_class: SharedClassOpt = None,
    keep_invalid: Annotated[
        bool,
        typer.Option(
            "--keep-invalid",
            help="Write the revision even when it is invalid or empty (a record "
            "of what was short).",
        ),
    ] = False,
    project: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Sample a new immutable revision of the test set.

    Only candidates the project's eligibility decision lets through are drawn
    (`retest status` shows it): no copies of originals, one member per near-duplicate
    group, nothing blacklisted, nothing with a pending near-duplicate review.
    An invalid or empty sample exits 1 and names what each short class lacks; it
    writes no revision unless --keep-invalid. `retest status` shows beforehand
    what each strategy needs per class.
    """
    from retest.cli._console import console, print_json, print_table, print_warning
    from retest.project import (
        Project,
        candidate_eligibility,
        check_fresh,
        eligibility_summary,
    )
    from retest.sampling.base import SAMPLERS
    from retest.stages.revisions import create_revision

    SAMPLERS.get(strategy)  # a bad --strategy first (exit 2, the valid ones listed)
    from retest.sampling.compat import check_compat

    compat = check_compat(compat)
    shared = shared_classes(shared_class)
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        raise ConfigError(
            f"--threshold is a selection frequency in [0, 1]. Got {threshold}."
        )
    if min_annotations is not None and min_annotations < 0:
        raise ConfigError(
            f"--min-annotations counts assignments, ≥ 0. Got {min_annotations}."
        )
    with Project.open(project) as proj:
        thresholds = _class_thresholds(class_threshold or [], proj.config.classes)
        seed = proj.config.seed("sample") if seed is None else seed
        if seed is None:
            raise ConfigError(
                "retest sample needs a seed: pass --seed N or set `sample = N` under "
                "[seeds] in retest.toml."
            )
        if threshold is None:
            threshold = proj.config.threshold("selection_frequency")
        kw_counts = _keyword_counts(keyword_counts, proj.config.classes)
        check_fresh(proj, require_dedup=not no_dedup)
        elig = candidate_eligibility(proj, include_unreviewed=include_unreviewed)
        out = create_revision(
            proj,
            strategy=strategy,
            seed=seed,
            per_class=per_class,
            parent=parent,
            name=name,
            threshold=threshold,
            class_thresholds=thresholds,
            min_annotations=min_annotations,
            allow_upward=not no_upward,
            keyword_counts=kw_counts,
            eligibility=elig,
            compat=compat,
            shared_class=shared or None,
            keep_invalid=keep_invalid,
        )
    rev, result = out.revision, out.result
    label = rev.name or name or "the sample"
    summary = eligibility_summary(elig)
    failed = not rev.valid or not result.members
    if as_json:
        print_json(
            {
                "name": rev.name or None,
                "written": out.written,
                "parent": rev.parent,
                "seed": rev.seed,
                "valid": rev.valid,
                "reviews_carried": list(out.reviews_carried),
                "eligibility": summary,
                **{k: v for k, v in result.as_dict().items() if k != "seed"},
            }
        )
        if failed:
            raise typer.Exit(1)
        return
    rows = []
    short = {s.class_name: s for s in result.shortfall}
    by_class = result.by_class()
    for c in short:
        by_class.setdefault(c, [])
    for cls, members in sorted(by_class.items()):
        hows = [m.how for m in members]
        s = short.get(cls)
        rows.append(
            [
                cls,
                len(members),
                hows.count("carried"),
                hows.count("sampled"),
                hows.count("upward"),
                "" if s is None else f"-{s.missing} ({s.reason})",
            ]
        )
    print_table(
        ["class", "images", "carried", "sampled", "upward", "short"],
        rows,
        title=f"revision {label}",
    )
    state = "valid" if rev.valid else "INVALID"
    if not out.written:
        state += ", not written (--keep-invalid writes it)"
    console.print(
        f"{label}: {fmt_count(len(result.members))} images, {state}"
        + (f", from {rev.parent}" if rev.parent else "")
        + (
            f"; review carried over for {len(out.reviews_carried)} classes"
            if out.reviews_carried
            else ""
        )
    )
    console.print(_exclusion_line(summary))
    for s in result.shortfall[:20]:
        print_warning(f"{s.class_name}: {_shortfall_text(s)}")
    if len(result.shortfall) > 20:
        print_warning(f"… and {len(result.shortfall) - 20} more short classes")
    if out.written and result.members and not rev.valid:
        print_warning(
            f"{len(short)} classes are short of eligible candidates: "
            f"{', '.join(sorted(short)[:10])}. Add candidates or annotations, then "
            f"sample again with --from {rev.name}."
        )
    elif failed:
        print_warning(
            f"{label} is {'empty' if not result.members else 'INVALID'}: "
            f"{len(short)} classes short. `retest status` shows per class what "
            "each strategy needs and what the project has."
        )
    if failed:
        raise typer.Exit(1)


def _shortfall_text(s: Any) -> str:
    """What a short class lacks, in words (a :class:`ClassShortfall`)."""
    from retest.project import TARGET_MIN_ANNOTATIONS, TARGET_MIN_ORIGINALS

    if s.reason == "invalid_target_histogram":
        n = dict(s.detail).get("originals", 0)
        return (
            f"{n} originals with ≥ {TARGET_MIN_ANNOTATIONS} valid assignments, "
            f"{TARGET_MIN_ORIGINALS} needed for its target histogram (crowd-label "
            "more originals of the class: `retest crowd tasks`)"
        )
    # ("eligible", n) says how many the class had; other parts how many are missing
    had = dict(s.detail).get("eligible")
    parts = ", ".join(f"{k} {n}" for k, n in s.detail if k != "eligible")
    return (
        f"{fmt_count(s.got)} of {fmt_count(s.needed)} images ({s.reason.replace('_', ' ')}"
        + (f": {fmt_count(had)} eligible" if had is not None else "")
        + (f"; missing {parts}" if parts else "")
        + ")"
    )


def _exclusion_line(summary: dict[str, Any]) -> str:
    counts = summary["counts"]
    parts = [
        f"{fmt_count(v)} {k.replace('_', ' ')}"
        for k, v in counts.items()
        if v and k != "eligible"
    ]
    line = f"eligible candidates: {fmt_count(counts['eligible'])}"
    if parts:
        line += "; excluded: " + ", ".join(parts)
    if summary["unreviewed_included"]:
        n_in = fmt_count(summary["unreviewed_included"])
        line += f" ({n_in} unreviewed let in by --include-unreviewed)"
    elif counts.get("unreviewed"):
        line += " (review them with `retest dedup-queue`, or --include-unreviewed)"
    return line


def revisions(project: ProjectOpt = None, as_json: JsonOpt = False) -> None:
    """List the project's revisions."""
    from retest.cli._console import print_json, print_table
    from retest.project import Project
    from retest.stages.revisions import revision_summaries

    with Project.open(project) as proj:
        rows = revision_summaries(proj)
    if as_json:
        print_json(rows)
        return
    print_table(
        ["revision", "strategy", "parent", "seed", "valid", "images", "created"],
        [
            [
                r["name"],
                r["strategy"],
                r["parent"] or "-",
                r["seed"],
                "yes" if r["valid"] else "no",
                r["n_images"],
                r["created"],
            ]
            for r in rows
        ],
    )


def diff(
    a: Annotated[str, typer.Argument(help="Older revision.")],
    b: Annotated[str, typer.Argument(help="Newer revision.")],
    ids: Annotated[
        bool, typer.Option("--ids", help="List the added/removed ids.")
    ] = False,
    project: ProjectOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Added and removed members per class from revision A to B."""
    from retest.cli._console import console, print_json, print_table
    from retest.project import Project
    from retest.stages.revisions import diff_revisions

    with Project.open(project) as proj:
        rows = diff_revisions(proj, a, b)
    if as_json:
        print_json(
            [
                {
                    "class": d.class_name,
                    "kept": d.kept,
                    "added": list(d.added),
                    "removed": list(d.removed),
                }
                for d in rows
            ]
        )
        return
    table: list[list[Any]] = [
        [d.class_name, d.kept, len(d.added), len(d.removed)] for d in rows
    ]
    print_table(["class", "kept", "added", "removed"], table, title=f"{a} → {b}")
    if ids:
        for d in rows:
            for i in d.removed:
                console.print(f"- {d.class_name} {i}")
            for i in d.added:
                console.print(f"+ {d.class_name} {i}")


def revision_statistics_data(project: Any, name: str) -> dict[str, Any]:
    """JSON-ready statistics of revision ``name`` (for ``retest status REV``)."""
    from retest.stages.revisions import revision_statistics

    return revision_statistics(project, name).as_dict()


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def print_revision_statistics(data: dict[str, Any]) -> None:
    """Render :func:`revision_statistics_data` as a table and a summary line."""
    from retest.cli._console import console, print_table

    rows = [
        [
            c["class_name"],
            c["n_images"],
            _fmt(c["mean_frequency"]),
            _fmt(c["min_frequency"]),
            "/".join(str(b) for b in c["by_bin"]),
            c["upward"],
            c["near_duplicates"],
            c["blacklisted"],
            "problematic" if c["problematic"] else ("yes" if c["reviewed"] else "no"),
        ]
        for c in data["classes"]
    ]
    print_table(
        ["class", "n", "mean f", "min f", "bins", "up", "ndup", "black", "reviewed"],
        rows,
        title=f"revision {data['name']} ({data['strategy']}, seed {data['seed']})",
    )
    console.print(
        f"{data['n_images']} images, {'valid' if data['valid'] else 'INVALID'}; "
        f"{data['upward']} upward-sampled; {data['near_duplicates']} near-duplicates "
        f"and {data['blacklisted']} blacklisted members; "
        f"{data['review_coverage']:.0%} of classes reviewed"
    )


def register(app: typer.Typer) -> None:
    app.command("sample", cls=live_help(strategy=_strategy_help))(sample)
    app.command("revisions")(revisions)
    app.command("diff")(diff)
