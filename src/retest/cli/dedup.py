"""``retest dedup``: near-duplicate neighbours, review queue and verdicts."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer

from retest._validation import fmt_count
from retest.cli._options import (
    JsonOpt,
    ProjectOpt,
    cluster_option,
    live_help,
    output_option,
    person_option,
)
from retest.errors import ConfigError, StageError
from retest.models.embedders import EMBEDDERS, parse_embedder_spec
from retest.stages.dedup import (
    DEDUP_METRICS,
    DEFAULT_EMBEDDER,
    check_metric_names,
    metric_names,
)

__all__ = ["register"]


def _split(value: str, what: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise ConfigError(f"{what} needs a comma-separated list. Got {value!r}.")
    return items


def _metrics_help() -> str:
    parts = [f"{m} ({DEDUP_METRICS.get(m).summary})" for m in metric_names()]
    return "Comma-separated metrics: " + "; ".join(parts) + "."


def _embedder_help() -> str:
    return (
        f"Embedder of the features metric: {', '.join(EMBEDDERS.names())}, or a "
        f"MODEL.pt/MODEL.onnx path. Default {DEFAULT_EMBEDDER}[:SEED]: a small MLP "
        "trained on the project's original training images (needs `retest "
        "reference add --split train`); random-projection[:DIM[:SEED]], "
        "fourier[:K], torchscript:PATH, onnx:PATH."
    )


def _positive(value: float | None, option: str, what: str) -> None:
    if value is not None and not 0 < value <= 2**40:  # also refuses nan and inf
        raise ConfigError(
            f"{option} must be a positive {what} (at most 2**40). Got {value}."
        )


def dedup(
    project: ProjectOpt = None,
    against: Annotated[
        str, typer.Option(help="Reference sets: original-train,original-test,pool.")
    ] = "original-train,original-test,pool",
    metrics: Annotated[str, typer.Option()] = ",".join(metric_names()),
    k: Annotated[int, typer.Option("--k", help="Neighbours per metric.")] = 30,
    resize: Annotated[
        int | None, typer.Option(help="Compare images at N×N (needed if sizes differ).")
    ] = None,
    embedder: Annotated[str, typer.Option(help=_embedder_help())] = DEFAULT_EMBEDDER,
    win_size: Annotated[int | None, typer.Option(help="SSIM window size.")] = None,
    gaussian: Annotated[bool, typer.Option(help="Gaussian SSIM window.")] = False,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            help="Dask scheduler tcp://host:port or a scheduler file.",
            callback=cluster_option,
        ),
    ] = None,
    workers: Annotated[
        int | None, typer.Option(help="Start a local Dask cluster with N workers.")
    ] = None,
    shards: Annotated[
        str,
        typer.Option(
            "--shards",
            help="How reference shards reach the cluster's workers: path (read "
            "the project's array file on a shared file system), send (the client "
            "sends them), auto (path, falling back to send per shard when a worker "
            "cannot read the file).",
        ),
    ] = "auto",
    chunk_size: Annotated[int, typer.Option(help="Candidates per checkpoint.")] = 1000,
    memory_gib: Annotated[float, typer.Option(help="kNN memory budget (GiB).")] = 4.0,
    report: Annotated[
        bool, typer.Option("--report", help="Closest pairs + contact sheets.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Find each candidate's nearest images per metric (resumable), optionally report."""
    from retest.cli._console import (
        console,
        escape,
        print_json,
        print_table,
        progress_bar,
    )
    from retest.cluster import cluster_client
    from retest.dedup.ssim import SSIMParams
    from retest.project import Project, review_targets
    from retest.stages.dedup import check_resize, dedup_report, run_dedup

    check_resize(resize)
    if cluster and workers:
        raise ConfigError("pass either --cluster or --workers, not both.")
    _positive(k, "--k", "number of neighbours")
    _positive(chunk_size, "--chunk-size", "number of candidates")
    _positive(memory_gib, "--memory-gib", "number of GiB")
    _positive(workers, "--workers", "number of workers")
    _positive(win_size, "--win-size", "odd window size")
    if win_size is not None and (win_size < 3 or win_size % 2 == 0):
        raise ConfigError(f"--win-size must be an odd integer >= 3. Got {win_size}.")
    if cluster is not None and not cluster.strip():
        raise ConfigError("--cluster needs a scheduler address, e.g. tcp://host:8786.")
    against_list = _split(against, "--against")
    metric_list = _split(metrics, "--metrics")
    check_metric_names(metric_list)
    parse_embedder_spec(embedder)
    params = SSIMParams(win_size=win_size, gaussian_weights=gaussian)
    ctx: Any = (
        cluster_client(cluster, workers) if (cluster or workers) else nullcontext(None)
    )
    with Project.open(project) as proj:
        if proj.store.candidates.count() == 0:  # before any cluster starts
            raise StageError(
                f"the project {proj.root} has no candidates to check for "
                "near-duplicates; add them first with `retest source add KIND PATH` "
                "(e.g. `retest source add folder photos/`)."
            )
        with ctx as client, progress_bar(disable=json_out) as prog:
            res = run_dedup(
                proj,
                against=against_list,
                metrics=metric_list,
                k=k,
                resize=resize,
                embedder=embedder,
                ssim=params,
                chunk_size=chunk_size,
                client=client,
                memory_budget=int(memory_gib * 2**30),
                progress=prog,
                shard_transfer=shards,
            )
        rep = dedup_report(proj, metrics=res.metrics) if report else None
        overridden = set(proj.config.thresholds)
        effective = review_targets(proj)  # [thresholds] in retest.toml applied
    targets = {m: effective.get(m, t) for m, t in res.targets.items()}
    how = {m: _how(m, res.states.get(m), overridden=m in overridden) for m in targets}
    data = {
        "fingerprint": res.fingerprint,
        "candidates": res.n_candidates,
        "references": res.n_references,
        "image_shape": list(res.image_shape),
        "metrics": list(res.metrics),
        "chunks_computed": res.chunks_computed,
        "chunks_skipped": res.chunks_skipped,
        "review_targets": targets,
        "review_target_sources": how,
        "features": _features_summary(res.states.get("features")),
        "report": rep,
    }
    if json_out:
        print_json(data)
        return
    # rich reads [..] as markup: every text shown goes through escape
    print_table(
        ["item", "value"],
        [
            (k_, fmt_count(v) if type(v) is int else escape(str(v)))
            for k_, v in data.items()
            if k_
            not in ("report", "review_targets", "review_target_sources", "features")
        ],
        title="dedup",
    )
    print_table(
        ["metric", "review target", "how"],
        [(m, f"{t:.6g}", escape(how[m])) for m, t in targets.items()],
        title=escape("review targets (retest.toml [thresholds] overrides)"),
    )
    shown = 10  # per metric; the contact sheet and --json have them all
    for m, r in (rep or {}).items():
        # whole ids, one a line (as `dedup-queue` and `review` print them): a
        # prefix could match several candidates later and would not paste back
        print_table(
            ["candidate / reference", "distance"],
            [
                (
                    escape(f"{p['candidate']}\n{p['reference']}"),
                    f"{max(p['distance'], 0.0):.6g}",
                )
                for p in r["pairs"][:shown]
            ],
            title=escape(f"closest pairs: {m} ({r['contact_sheet']})"),
        )
        if len(r["pairs"]) > shown:
            console.print(
                f"… {fmt_count(len(r['pairs']) - shown)} more {m} pairs on the "
                "contact sheet and in --json",
                markup=False,
                highlight=False,
            )
    thumb = next(
        (p["candidate_thumb"] for r in (rep or {}).values() for p in r["pairs"]), ""
    )
    if thumb:
        console.print(
            f"thumbnails: {Path(thumb).parent / 'ID.png'} (an original's: "
            "SPLIT_INDEX.png)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    with Project.open(project) as proj:
        from retest.cli.sample import _exclusion_line
        from retest.project import candidate_eligibility, eligibility_summary

        line = _exclusion_line(eligibility_summary(candidate_eligibility(proj)))
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def _features_summary(state: dict[str, Any] | None) -> dict[str, Any] | None:
    if not state:
        return None
    return {
        "embedder": state.get("embedder"),
        "target": state.get("target"),
        "target_source": state.get("target_source"),
        "calibration": state.get("calibration"),
    }


def _how(metric: str, state: dict[str, Any] | None, *, overridden: bool) -> str:
    """Where a metric's review target comes from: retest.toml, a calibration on
    the originals (features, dssim) or the default for the image size."""
    if overridden:
        return f"`{metric}` under [thresholds] in retest.toml"
    state = state or {}
    who = f"{state['embedder']}: " if state.get("embedder") else ""
    cal = state.get("calibration")
    if not cal:
        return who + str(state.get("target_source") or "default for the image size")
    return (
        f"{who}{cal['percentile']:g}th percentile of nearest-other-image distances "
        f"of {cal['n_queries']} training originals (median {cal['median']:.4g})"
    )


def _thresholds(values: list[str], defaults: dict[str, float]) -> dict[str, float]:
    out = dict(defaults)
    for v in values:
        name, sep, num = v.partition("=")
        try:
            value = float(num) if sep else float("nan")
        except ValueError:
            value = float("nan")
        if name.strip() not in defaults or not value >= 0:
            raise ConfigError(
                f"--threshold must look like METRIC=DISTANCE with METRIC one of "
                f"{', '.join(defaults)} (the metrics run on this project). Got {v!r}."
            )
        out[name.strip()] = value
    return out


def dedup_queue(
    project: ProjectOpt = None,
    threshold: Annotated[
        list[str] | None,
        typer.Option(
            "--threshold",
            help="Review target override METRIC=DISTANCE, e.g. warp=2e5 (repeatable).",
        ),
    ] = None,
    csv_out: Annotated[
        Path | None,
        output_option(
            "dedup-queue",
            "--csv",
            help="Write the queue as CSV, one pair a row with an empty `duplicate` "
            "column to fill with yes/no; read back by `dedup-verdict --from`.",
        ),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Replace the --csv file if it is a review CSV (its verdicts are lost).",
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """List the near-duplicate review queue (pairs under threshold, not reviewed).

    Pairs the automatic near-original rule already excludes are not listed: the
    same queue as the web app's review page.
    """
    from retest.cli._console import print_json, print_table
    from retest.project import Project, pending_reviews, review_targets

    if csv_out is not None:  # refused before any work, as every writer is
        from retest.stages.dedup import check_review_out

        check_review_out(csv_out, overwrite=overwrite)
    with Project.open(project) as proj:
        th = _thresholds(threshold or [], review_targets(proj))
        items = pending_reviews(proj, thresholds=th)
        if csv_out is not None:
            from retest.cli._console import console
            from retest.stages.dedup import write_review_file

            names = proj.class_names
            class_of = {}
            for i in items:
                cid = proj.store.candidates.get(i.candidate_id).class_id
                class_of[i.candidate_id] = "" if cid is None else names[cid]
            n = write_review_file(csv_out, items, class_of, overwrite=overwrite)
            console.print(
                f"wrote {fmt_count(n)} pairs of {fmt_count(len(items))} candidate reviews "
                f"to {csv_out}; "
                "fill the duplicate column with yes/no, then `retest dedup-verdict "
                f"--from {csv_out} --who NAME`",
                markup=False,
                soft_wrap=True,
                highlight=False,
            )
            return
    rows = [
        {
            "candidate": i.candidate_id,
            "metric": i.metric,
            "references": list(i.references),
            "distances": list(i.distances),
        }
        for i in items
    ]
    if json_out:
        print_json(rows)
        return
    print_table(
        ["candidate", "metric", "pending", "closest"],
        [
            (
                r["candidate"],
                r["metric"],
                len(r["references"]),
                f"{r['distances'][0]:.6g}",
            )
            for r in rows
        ],
        title="review queue",
    )


def dedup_verdict(
    candidate: Annotated[
        str | None, typer.Argument(help="Candidate id (not with --from).")
    ] = None,
    metric: Annotated[
        str | None, typer.Argument(help="Metric the pairs were shown under.")
    ] = None,
    shown: Annotated[
        str | None, typer.Option(help="Comma-separated references shown.")
    ] = None,
    who: Annotated[
        str | None, typer.Option(help="Reviewer name.", callback=person_option)
    ] = None,
    duplicates: Annotated[str, typer.Option(help="Those that are duplicates.")] = "",
    from_file: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="A filled-in `dedup-queue --csv` file: one review per candidate "
            "and metric whose rows all say yes or no. Pairs --who already decided "
            "the same way are not recorded again (importing twice is harmless).",
        ),
    ] = None,
    rest_not_duplicate: Annotated[
        bool,
        typer.Option(
            "--rest-not-duplicate",
            help="With --from: empty duplicate cells mean no (you looked at them), "
            "limited by --class and --max-distance.",
        ),
    ] = False,
    only_class: Annotated[
        str | None,
        typer.Option("--class", help="With --rest-not-duplicate: only this class."),
    ] = None,
    max_distance: Annotated[
        float | None,
        typer.Option(
            "--max-distance",
            help="With --rest-not-duplicate: only pairs up to this distance.",
        ),
    ] = None,
    project: ProjectOpt = None,
) -> None:
    """Record a review: a verdict per shown reference and a reviewed mark.

    One candidate (CANDIDATE METRIC --shown … --duplicates …), or every decided
    group of a review file (--from FILE.csv, as `dedup-queue --csv` writes it).
    """
    from retest.cli._console import console
    from retest.project import (
        Project,
        record_review,
        resolve_candidate,
        resolve_item,
    )

    if who is None or not who.strip():
        raise ConfigError("--who needs the reviewer's name.")
    if from_file is not None:
        if candidate is not None or shown is not None or duplicates:
            raise ConfigError(
                "--from FILE records the file's reviews; pass no CANDIDATE, "
                "--shown or --duplicates with it."
            )
        _verdicts_from_file(
            project, from_file, who, rest_not_duplicate, only_class, max_distance
        )
        return
    if rest_not_duplicate or only_class is not None or max_distance is not None:
        raise ConfigError(
            "--rest-not-duplicate, --class and --max-distance go with --from FILE."
        )
    if candidate is None or metric is None or shown is None:
        raise ConfigError(
            "pass CANDIDATE METRIC --shown REFS [--duplicates REFS], or --from "
            "FILE.csv (`retest dedup-queue --csv FILE` writes one)."
        )
    shown_ids = _split(shown, "--shown")
    dups = [d.strip() for d in duplicates.split(",") if d.strip()]

    def refuse_strays(shown_ids: list[str], dups: list[str], exact: bool) -> None:
        stray = [
            d
            for d in dups
            if not any(
                d == s if exact else (s.startswith(d) or d.startswith(s))
                for s in shown_ids
            )
        ]
        if stray:
            raise ConfigError(
                f"--duplicates {', '.join(stray[:3])}: not among --shown; a "
                "duplicate must be one of the references shown."
            )

    refuse_strays(shown_ids, dups, exact=False)  # before the project is opened
    check_metric_names([metric], "METRIC")
    with Project.open(project) as proj:
        # ids as `dedup-queue` prints them (unique prefixes), like `status --candidate`
        candidate = resolve_candidate(proj, candidate)
        shown_ids = [resolve_item(proj, r) for r in shown_ids]
        dups = [resolve_item(proj, d) for d in dups]
        refuse_strays(shown_ids, dups, exact=True)
        _known_items(proj, candidate, shown_ids)
        record_review(
            proj, candidate, metric, reviewer=who, shown=shown_ids, duplicates=dups
        )
    console.print(
        f"recorded review of {candidate} ({metric}) by {who}: {len(shown_ids)} "
        f"shown, {len(dups)} duplicate{'s' * (len(dups) != 1)}",
        markup=False,
        soft_wrap=True,
        highlight=False,
    )


def _verdicts_from_file(
    project: Any,
    path: Path,
    who: str,
    rest_not_duplicate: bool,
    only_class: str | None,
    max_distance: float | None,
) -> None:
    from retest._validation import check_input_path
    from retest.cli._console import console
    from retest.project import Project
    from retest.stages.dedup import read_review_file, record_review_file

    check_input_path(path, "--from", kind="file")
    res = read_review_file(
        path,
        rest_not_duplicate=rest_not_duplicate,
        only_class=only_class,
        max_distance=max_distance,
    )
    with Project.open(project) as proj:
        if only_class is not None and only_class not in proj.class_names:
            raise ConfigError(
                f"--class {only_class!r} is not a class of the project "
                f"({', '.join(proj.class_names)})."
            )
        for cand, metric, shown, _ in res.reviews:  # all known before any is written
            check_metric_names([metric], f"{path}: metric column")
            _known_items(proj, cand, list(shown))
        done = record_review_file(proj, res, reviewer=who)
    again = (
        f"; {fmt_count(done.already_recorded)} of the pairs were already recorded "
        f"by {who} with the same verdict (not recorded twice)"
        if done.already_recorded
        else ""
    )
    console.print(
        f"recorded {fmt_count(done.reviews)} reviews by {who} from {path}: "
        f"{fmt_count(res.pairs)} pairs, {fmt_count(res.duplicates)} duplicates; "
        f"{fmt_count(len(res.undecided))} candidate reviews left undecided (empty "
        f"duplicate cells){again}",
        markup=False,
        soft_wrap=True,
        highlight=False,
    )


def _known_items(proj: Any, candidate: str, shown: list[str]) -> None:
    """The candidate and every shown reference exist: no verdict about nothing."""
    from retest.errors import NotFoundError
    from retest.store.rows import split_reference_id

    try:
        proj.store.candidates.get(candidate)
    except NotFoundError:
        raise NotFoundError(
            f"candidate {candidate!r} is not in the project; `retest dedup-queue` "
            "lists the candidates awaiting review."
        ) from None
    for ref in shown:
        table = (
            proj.store.references
            if split_reference_id(ref) is not None
            else proj.store.candidates
        )
        try:
            table.get(ref)
        except NotFoundError:
            raise NotFoundError(
                f"--shown {ref}: no such image in the project (an original "
                "SPLIT:INDEX or a candidate id); pass the ids the queue showed."
            ) from None


def register(app: typer.Typer) -> None:
    app.command("dedup", cls=live_help(metrics=_metrics_help))(dedup)
    app.command("dedup-queue")(dedup_queue)
    app.command("dedup-verdict")(dedup_verdict)
