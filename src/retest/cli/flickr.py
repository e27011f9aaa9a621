"""``retest flickr search|download``: collect candidates from Flickr for a keyword plan.

The API key comes from ``--api-key`` or the environment (``RETEST_FLICKR_KEY``)
and is never written to any file. Both commands are resumable and rate-limited.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from retest._output import RULES, check_output
from retest._validation import check_input_path
from retest.cli._options import JsonOpt, output_option
from retest.errors import ConfigError

__all__ = ["register"]

flickr_app = typer.Typer(
    help="Search Flickr for a keyword plan and download the images (resumable).",
    no_args_is_help=True,
)

RateOpt = Annotated[
    float,
    typer.Option("--rate", help="At most this many requests per second (all threads)."),
]
RetriesOpt = Annotated[
    int, typer.Option("--retries", help="Retries of a failed request (doubling waits).")
]
BackoffOpt = Annotated[
    float, typer.Option("--backoff", help="Seconds before the first retry.")
]


def _check_date(flag: str, value: str) -> None:
    """Flickr takes dates as YYYY-MM-DD; anything else would be sent as is."""
    import datetime as dt

    try:
        dt.date.fromisoformat(value)
    except ValueError:
        raise ConfigError(
            f"{flag} must be a date YYYY-MM-DD, e.g. 2012-07-11. Got {value!r}."
        ) from None


def _check(rate: float, retries: int, backoff: float) -> None:
    if not rate > 0:
        raise ConfigError(
            f"--rate must be a positive number of requests/s. Got {rate}."
        )
    if retries < 0:
        raise ConfigError(f"--retries must be 0 or more. Got {retries}.")
    if backoff < 0:
        raise ConfigError(f"--backoff must be 0 or more seconds. Got {backoff}.")


@flickr_app.command("search")
def search(
    plan: Annotated[
        Path, typer.Option("--plan", help="Keyword plan written by `retest plan`.")
    ],
    out: Annotated[
        Path,
        output_option(
            "flickr search", "--out", help="Folder of the search-result JSON files."
        ),
    ],
    factor: Annotated[
        float,
        typer.Option(
            "--factor", help="Photos to collect per planned image of a keyword."
        ),
    ] = 4.0,
    max_per_keyword: Annotated[
        int | None, typer.Option("--max-per-keyword", help="Cap per keyword.")
    ] = None,
    min_taken_date: Annotated[str, typer.Option("--min-taken-date")] = "2012-07-11",
    max_taken_date: Annotated[str, typer.Option("--max-taken-date")] = "2013-07-11",
    min_upload_date: Annotated[str, typer.Option("--min-upload-date")] = "2012-07-11",
    max_upload_date: Annotated[str, typer.Option("--max-upload-date")] = "2013-07-11",
    per_page: Annotated[
        int, typer.Option("--per-page", help="Photos per result page (≤ 500).")
    ] = 500,
    uploader: Annotated[
        str | None,
        typer.Option("--uploader", help="Recorded as who searched (default: user)."),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="RETEST_FLICKR_KEY",
            show_envvar=True,
            help="Flickr API key (never stored).",
        ),
    ] = None,
    endpoint: Annotated[
        str, typer.Option("--endpoint", help="Flickr REST endpoint.")
    ] = "https://api.flickr.com/services/rest/",
    rate: RateOpt = 1.0,
    retries: RetriesOpt = 5,
    backoff: BackoffOpt = 1.0,
    as_json: JsonOpt = False,
) -> None:
    """Search every keyword of the plan; finished keywords and pages are not fetched again.

    Each keyword of class C needing n images gets ceil(factor·n) photos (or all
    there are), written as ``<out>/<NNNN>_<class>_<keyword>.json`` in the published
    search-result format (class name as ``wnid``), ready for
    `retest flickr download` and `retest source add flickr`.
    """
    from retest.cli._console import print_json, print_table, progress_bar
    from retest.sources.flickr import (
        KEY_ENV,
        FlickrClient,
        FlickrSearchParams,
        RateLimiter,
        load_plan,
        search_plan,
    )

    _check(rate, retries, backoff)
    if factor <= 0:
        raise ConfigError(f"--factor must be positive. Got {factor}.")
    if max_per_keyword is not None and max_per_keyword < 1:
        raise ConfigError(
            f"--max-per-keyword must be at least 1. Got {max_per_keyword}."
        )
    if not 1 <= per_page <= 500:
        raise ConfigError(
            f"--per-page must lie in [1, 500] (Flickr's cap). Got {per_page}."
        )
    for flag, value in (
        ("--min-taken-date", min_taken_date),
        ("--max-taken-date", max_taken_date),
        ("--min-upload-date", min_upload_date),
        ("--max-upload-date", max_upload_date),
    ):
        _check_date(flag, value)
    check_output(out, RULES["flickr search"])
    key = (api_key or "").strip()
    if not key:
        raise ConfigError(
            f"Flickr API key missing: pass --api-key or set {KEY_ENV}; get a key at "
            "https://www.flickr.com/services/apps/create/."
        )
    rows = load_plan(plan)
    params = FlickrSearchParams(
        min_taken_date=min_taken_date,
        max_taken_date=max_taken_date,
        min_uploaded_date=min_upload_date,
        max_uploaded_date=max_upload_date,
        per_page=per_page,
    )
    client = FlickrClient(
        key,
        base_url=endpoint,
        retries=retries,
        backoff=backoff,
        limiter=RateLimiter(rate),
    )
    with progress_bar(disable=as_json) as cb:
        rep = search_plan(
            client,
            rows,
            params,
            out,
            factor=factor,
            max_per_keyword=max_per_keyword,
            uploader=uploader,
            progress=cb,
        )
    summary = {
        "keywords": len(rows),
        "searched": len(rep.searched),
        "already_done": len(rep.skipped),
        "pages_fetched": rep.pages_fetched,
        "pages_reused": rep.pages_reused,
        "records": rep.records,
        "out": str(out),
        "files": [str(f) for f in rep.files],
    }
    if as_json:
        print_json(summary)
        return
    print_table(
        ["search", "value"],
        [[k, v] for k, v in summary.items() if k != "files"],
        title=f"flickr search of {plan}",
    )


@flickr_app.command("download")
def download(
    results: Annotated[
        Path,
        typer.Option("--results", help="Search-result JSON file or folder of them."),
    ],
    out: Annotated[
        Path,
        output_option(
            "flickr download", "--out", help="Folder of the downloaded images."
        ),
    ],
    blacklist: Annotated[
        Path | None, typer.Option("--blacklist", help="JSON of candidate ids to skip.")
    ] = None,
    workers: Annotated[int, typer.Option("--workers", help="Parallel downloads.")] = 8,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds per request.")
    ] = 30.0,
    rate: RateOpt = 5.0,
    retries: RetriesOpt = 3,
    backoff: BackoffOpt = 1.0,
    as_json: JsonOpt = False,
) -> None:
    """Download the images of search results (original, 256 and 500 px JPEGs).

    Finished images are skipped on a rerun; failures are listed in
    ``<out>/download_report.json`` and never stop the run.
    """
    from retest.cli._console import print_json, print_table, print_warning, progress_bar
    from retest.sources.flickr import download_candidates, load_search_results
    from retest.store.artifacts import write_json

    _check(rate, retries, backoff)
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1. Got {workers}.")
    if timeout <= 0:
        raise ConfigError(f"--timeout must be positive. Got {timeout}.")
    if not results.exists():
        from retest.errors import NotFoundError

        raise NotFoundError(f"search results {results} do not exist.")
    if results.is_dir() and not any(results.glob("*.json")):
        from retest.errors import InputValidationError

        raise InputValidationError(
            f"--results {results} holds no search-result .json files; pass the "
            "--out folder of `retest flickr search` or one of its files."
        )
    if blacklist is not None:
        check_input_path(blacklist, "--blacklist", kind="file")
    check_output(out, RULES["flickr download"])
    pool = load_search_results(results, blacklist=blacklist)
    records = list(pool.candidates.values())
    with progress_bar(disable=as_json) as cb:
        rep = download_candidates(
            records,
            out,
            workers=workers,
            retries=retries,
            backoff=backoff,
            timeout=timeout,
            blacklist=blacklist,
            rate=rate,
            progress=cb,
        )
    summary = {
        "candidates": len(records),
        "downloaded": len(rep.downloaded),
        "already_done": len(rep.skipped),
        "failed": len(rep.failures),
        "blacklisted": len(rep.blacklisted) + len(pool.blacklisted),
        "out": str(out),
        "failures": rep.failures,
    }
    write_json(out / "download_report.json", summary)
    if as_json:
        print_json(summary)
        return
    print_table(
        ["download", "value"],
        [[k, v] for k, v in summary.items() if k != "failures"],
        title=f"flickr download to {out}",
    )
    for cid, why in list(rep.failures.items())[:10]:
        print_warning(f"{cid}: {why}")
    if len(rep.failures) > 10:
        print_warning(
            f"… {len(rep.failures) - 10} more in {out / 'download_report.json'}"
        )


def register(app: typer.Typer) -> None:
    app.add_typer(flickr_app, name="flickr")
