"""Flickr candidates: the search client, the image downloader and pool loading.

Search (docs/algorithms.md#flickr-search): for every class (wnid) and every synonym of
its synset, page through ``flickr.photos.search`` (text, taken/upload date window, sort
by upload date, the published ``extras``) and keep at most
``int(max_images / len(synset))`` photos per synonym. Each kept photo becomes one
candidate record in the published ``search_results/*.json`` format, with the search
parameters recorded in every record. Differences from ``flickr_search.py``, on purpose:

* retries are per HTTP request (5 retries sleeping 1, 2, 4, 8, 16 s), not per
  class, so a failure on page 7 does not append pages 1–6 twice; after the last
  retry the error is raised instead of silently returning a partial class;
* the upload window is sent as ``min_upload_date``/``max_upload_date``, the
  names the Flickr API documents. (The original passed ``min_uploaded_date``,
  which the API does not know; the record keeps the original field names.)
* ``date_upload_search_engine`` is formatted in UTC (the original used the
  searching machine's local time zone); ``width``/``height`` become ints.
* Flickr caps ``per_page`` at 500, so the default is 500 (the original asked for
  1000 and got 500).

As in the original, photos without any usable URL are skipped but still count
towards the per-synonym limit (the limit slices the raw result stream).

Download (docs/algorithms.md#image-decoding): :func:`download_candidates` fetches each
record's URL with bounded parallelism and retries, applies the EXIF orientation,
converts to RGB and writes ``original/<id>.jpg``, ``scaled_256/<id>.jpg``,
``scaled_500/<id>.jpg`` (JPEG quality 90). Finished candidates are skipped on a re-run
(resume).
"""

from __future__ import annotations

import getpass
import hashlib
import http.client
import json
import math
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError

from retest._atomic import atomic_write_bytes
from retest._output import RULES, check_output, claim_output_dir
from retest._progress import ProgressCallback, report
from retest.datasets.download import is_retryable
from retest.datasets.images import ImageDecodeError, decode_image, derive_sizes
from retest.errors import ConfigError, DataIntegrityError, RetestError

__all__ = [
    "EXTRAS",
    "FLICKR_REST_URL",
    "SIZE_DIRS",
    "URL_PREFERENCE",
    "CandidatePool",
    "DownloadReport",
    "FlickrClient",
    "FlickrError",
    "FlickrSearchParams",
    "PlanSearchReport",
    "RateLimiter",
    "candidate_id",
    "download_candidates",
    "load_plan",
    "load_search_results",
    "photo_to_record",
    "search_class",
    "search_classes",
    "search_plan",
    "write_search_results",
]

FLICKR_REST_URL = "https://api.flickr.com/services/rest/"
EXTRAS = (
    "date_upload,date_taken,o_dims,url_s,url_q,url_t,url_m,url_n,url_-,url_z,url_c,"
    "url_b,url_h,url_k,url_o"
)
URL_PREFERENCE = ("url_o", "url_k", "url_h", "url_b", "url_c", "url_z", "url_-")
SIZE_DIRS = ("original", "scaled_256", "scaled_500")
KEY_ENV, SECRET_ENV = "RETEST_FLICKR_KEY", "RETEST_FLICKR_SECRET"
_NO_RETRY_CODES = {100, 112}  # invalid API key, unknown method


class FlickrError(RetestError):
    """The Flickr API answered ``stat: fail`` or could not be reached."""

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


def candidate_id(photo_id: str, search_engine: str = "flickr") -> str:
    """``sha1(photo_id + "flickr")`` hex: the candidate primary key ``id_ours``."""
    return hashlib.sha1((str(photo_id) + search_engine).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class FlickrSearchParams:
    """One search window; recorded in every candidate record.

    Defaults are the published CLI defaults (docs/algorithms.md#flickr-search).
    ``max_images`` is per class (split evenly over the synonyms); ``None`` means no
    limit.
    """

    min_taken_date: str = "2012-07-11"
    max_taken_date: str = "2013-07-11"
    min_uploaded_date: str = "2012-07-11"
    max_uploaded_date: str = "2013-07-11"
    sort: str = "date-posted-asc"
    max_images: int | None = None
    per_page: int = 500

    def api_arguments(self) -> dict[str, str]:
        return {
            "min_taken_date": self.min_taken_date,
            "max_taken_date": self.max_taken_date,
            "min_upload_date": self.min_uploaded_date,
            "max_upload_date": self.max_uploaded_date,
            "sort": self.sort,
            "extras": EXTRAS,
            "per_page": str(self.per_page),
        }

    def record_fields(self) -> dict[str, Any]:
        return {
            "max_taken_date": self.max_taken_date,
            "max_uploaded_date": self.max_uploaded_date,
            "min_taken_date": self.min_taken_date,
            "min_uploaded_date": self.min_uploaded_date,
            "search_sort": self.sort,
            "max_images": self.max_images,
        }


class RateLimiter:
    """At most ``rate`` request starts per second, across threads.

    ``wait()`` blocks until the next slot: slots are ``1 / rate`` seconds apart,
    so a burst is spread out instead of hitting the server at once (Flickr's
    published limit is 3,600 calls per hour and key). ``rate=None`` never waits.
    """

    def __init__(
        self,
        rate: float | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate is not None and not rate > 0:
            raise ConfigError(
                f"rate must be a positive number of requests/s. Got {rate}."
            )
        self.interval = 0.0 if rate is None else 1.0 / rate
        self.clock, self.sleep = clock, sleep
        self._next = -math.inf
        self._lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = self.clock()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            self.sleep(start - now)


class FlickrClient:
    """Minimal Flickr REST client (JSON, unsigned public calls).

    Parameters
    ----------
    api_key : str
        Flickr API key. Public searches need no signature, so ``api_secret`` is
        only kept for completeness.
    base_url : str
        REST endpoint; tests point it at a server on 127.0.0.1.
    retries : int, default=5
        Extra attempts after a transient failure; sleeps ``backoff * 2**i``.
    sleep : callable
        Injected so tests do not wait.
    limiter : RateLimiter, optional
        Spaces the requests (every attempt counts).
    """

    def __init__(
        self,
        api_key: str,
        *,
        api_secret: str | None = None,
        base_url: str = FLICKR_REST_URL,
        timeout: float = 30.0,
        retries: int = 5,
        backoff: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        limiter: RateLimiter | None = None,
    ) -> None:
        if not api_key:
            raise ConfigError("Flickr API key is empty.")
        self.limiter = limiter
        self.api_key = api_key
        self.api_secret = api_secret
        self.base_url = base_url
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.sleep = sleep

    @classmethod
    def from_env(cls, **kwargs: Any) -> FlickrClient:
        """Client with the key (and secret) from RETEST_FLICKR_KEY / _SECRET."""
        key = os.environ.get(KEY_ENV, "").strip()
        if not key:
            raise ConfigError(
                f"Flickr API key missing: set the environment variable {KEY_ENV} "
                f"(and {SECRET_ENV}); get a key at "
                "https://www.flickr.com/services/apps/create/."
            )
        return cls(key, api_secret=os.environ.get(SECRET_ENV) or None, **kwargs)

    def _request(self, method: str, params: Mapping[str, str]) -> dict[str, Any]:
        query = {"method": method, "api_key": self.api_key, **params}
        query |= {"format": "json", "nojsoncallback": "1"}
        url = f"{self.base_url}?{urllib.parse.urlencode(query)}"
        if self.limiter is not None:
            self.limiter.wait()
        with urllib.request.urlopen(url, timeout=self.timeout) as resp:
            body = resp.read()
        try:
            data = json.loads(body)
        except ValueError as err:
            raise FlickrError(f"Flickr answered with invalid JSON ({err}).") from err
        if not isinstance(data, dict) or data.get("stat") != "ok":
            code = data.get("code") if isinstance(data, dict) else None
            msg = data.get("message") if isinstance(data, dict) else body[:80]
            raise FlickrError(f"Flickr error {code}: {msg}", code=code)
        return data

    def call(self, method: str, **params: str) -> dict[str, Any]:
        """One API call with retries on transient failures; returns the JSON."""
        wait = self.backoff
        for attempt in range(self.retries + 1):
            try:
                return self._request(method, params)
            except FlickrError as err:
                if err.code in _NO_RETRY_CODES or attempt == self.retries:
                    raise
            except OSError as err:
                if not is_retryable(err) or attempt == self.retries:
                    raise FlickrError(
                        f"Flickr request {method} failed after {attempt + 1} "
                        f"attempt(s): {err}."
                    ) from err
            self.sleep(wait)
            wait *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def page(
        self, text: str, params: FlickrSearchParams, page: int
    ) -> tuple[list[dict[str, Any]], int]:
        """One result page of a search: ``(photos, number of pages)``."""
        data = self.call(
            "flickr.photos.search", text=text, page=str(page), **params.api_arguments()
        )
        block = data.get("photos") or {}
        photos = block.get("photo") or []
        if not isinstance(photos, list):
            raise FlickrError(
                f"Flickr answered page {page} of {text!r} without a photo list."
            )
        return photos, int(block.get("pages") or 0)

    def walk(self, text: str, params: FlickrSearchParams) -> Iterator[dict[str, Any]]:
        """Every photo of a search, page after page (lazy: stops when consumed)."""
        page, pages = 1, 1
        while page <= pages:
            photos, pages = self.page(text, params, page)
            yield from photos
            if not photos:
                return
            page += 1


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def photo_to_record(
    photo: Mapping[str, Any],
    *,
    wnid: str,
    search_key: str,
    params: FlickrSearchParams,
    uploader: str,
    now: datetime,
) -> dict[str, Any] | None:
    """The candidate record of one photo, or None without a usable URL.

    See docs/algorithms.md#flickr-search.
    """
    url_type = next((k for k in URL_PREFERENCE if photo.get(k)), None)
    if url_type is None:
        return None
    photo_id = str(photo["id"])
    uploaded = _int_or_none(photo.get("dateupload"))
    return {
        "id_ours": candidate_id(photo_id),
        "id_search_engine": photo_id,
        "url": photo[url_type],
        "url_type": url_type,
        "wnid": wnid,
        "search_key": search_key,
        "search_engine": "flickr",
        "uploader": uploader,
        "date_upload_our_db": now.strftime("%Y-%m-%d %H:%M:%S"),
        "date_taken": photo.get("datetaken"),
        "date_upload_search_engine": (
            None
            if uploaded is None
            else datetime.fromtimestamp(uploaded, UTC).strftime("%Y-%m-%d %H:%M:%S")
        ),
        "width": _int_or_none(photo.get("o_width")),
        "height": _int_or_none(photo.get("o_height")),
        **params.record_fields(),
    }


def search_class(
    client: FlickrClient,
    wnid: str,
    synset: Sequence[str],
    params: FlickrSearchParams,
    *,
    uploader: str | None = None,
    clock: Callable[[], datetime] = datetime.now,
) -> list[dict[str, Any]]:
    """Candidate records of one class: every synonym searched, limit per synonym."""
    if not synset:
        raise ConfigError(f"class {wnid!r} has an empty synset; nothing to search for.")
    who = uploader or getpass.getuser()
    limit = None if params.max_images is None else int(params.max_images / len(synset))
    records: list[dict[str, Any]] = []
    for key in synset:
        for photo in islice(client.walk(key, params), limit):
            rec = photo_to_record(
                photo,
                wnid=wnid,
                search_key=key,
                params=params,
                uploader=who,
                now=clock(),
            )
            if rec is not None:
                records.append(rec)
    return records


def search_classes(
    client: FlickrClient,
    synsets: Mapping[str, Sequence[str]],
    params: FlickrSearchParams,
    *,
    uploader: str | None = None,
    clock: Callable[[], datetime] = datetime.now,
    progress: ProgressCallback | None = None,
) -> list[dict[str, Any]]:
    """Search every class of ``synsets`` ({wnid: [synonym, ...]}) in order."""
    out: list[dict[str, Any]] = []
    for i, (wnid, synset) in enumerate(synsets.items()):
        out += search_class(
            client, wnid, synset, params, uploader=uploader, clock=clock
        )
        report(progress, "flickr search", i + 1, len(synsets))
    return out


def write_search_results(
    path: str | os.PathLike[str], records: Sequence[Mapping[str, Any]]
) -> Path:
    """Write records as a ``search_results/*.json`` list, atomically."""
    return atomic_write_bytes(path, json.dumps(list(records), indent=2).encode())


# ---------------------------------------------------------------------- plan search


def load_plan(path: str | os.PathLike[str]) -> list[tuple[str, str, int]]:
    """``(class, keyword, images needed)`` rows of a keyword plan, in plan order.

    Reads the plan artifact of ``retest plan`` (``reports/plan_<rule>.json``):
    ``{"allocation": {class: {keyword: n}}, ...}``; keywords planned at zero are
    left out.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise DataIntegrityError(
            f"plan file {p} does not exist; write one with `retest plan --rule v4|v6`."
        ) from None
    except (OSError, ValueError) as err:
        raise DataIntegrityError(f"plan file {p} is unreadable ({err}).") from err
    alloc = data.get("allocation") if isinstance(data, dict) else None
    if not isinstance(alloc, dict):
        raise DataIntegrityError(
            f"{p} is not a keyword plan: no 'allocation' {{class: {{keyword: n}}}} "
            "mapping. Use the file `retest plan` writes."
        )
    rows = []
    for cls, kws in alloc.items():
        if not isinstance(kws, dict):
            raise DataIntegrityError(
                f"{p}: allocation of class {cls!r} is not a mapping."
            )
        for kw, n in kws.items():
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise DataIntegrityError(
                    f"{p}: class {cls!r} keyword {kw!r} needs {n!r} images; expected "
                    "a non-negative integer."
                )
            if n:
                rows.append((str(cls), str(kw), n))
    if not rows:
        raise DataIntegrityError(f"{p}: the plan asks for no image at all.")
    return rows


@dataclass(slots=True)
class PlanSearchReport:
    """Outcome of :func:`search_plan`: result files in plan order and what ran."""

    files: list[Path] = field(default_factory=list)
    searched: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    pages_fetched: int = 0
    pages_reused: int = 0
    records: int = 0


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60] or "x"


def search_plan(
    client: FlickrClient,
    rows: Sequence[tuple[str, str, int]],
    params: FlickrSearchParams,
    out_dir: str | os.PathLike[str],
    *,
    factor: float = 4.0,
    max_per_keyword: int | None = None,
    uploader: str | None = None,
    clock: Callable[[], datetime] = datetime.now,
    progress: ProgressCallback | None = None,
) -> PlanSearchReport:
    """Search Flickr for every keyword of a plan; resumable page by page.

    Keyword ``k`` of class ``c`` needing ``n`` images is searched with text ``k``
    until ``ceil(factor * n)`` photos (capped at ``max_per_keyword``) have been
    seen (photos without a usable URL count, as in :func:`search_class`) or the
    results end. Records (the published ``search_results`` format, ``wnid`` = the
    class name, ``search_key`` = the keyword) go to
    ``out_dir/<NNNN>_<class>_<keyword>.json`` once the keyword is finished; until
    then each fetched page is kept under ``out_dir/.pages/``, so a rerun after an
    interruption skips finished keywords and resumes at the next page.
    """
    if not factor > 0:
        raise ConfigError(f"factor must be positive. Got {factor}.")
    if max_per_keyword is not None and max_per_keyword < 1:
        raise ConfigError(f"max_per_keyword must be at least 1. Got {max_per_keyword}.")
    rule = RULES["flickr search"]
    out = claim_output_dir(check_output(out_dir, rule), rule)
    who = uploader or getpass.getuser()
    rep = PlanSearchReport()
    for i, (cls, kw, n) in enumerate(rows):
        stem = f"{i:04d}_{_slug(cls)}_{_slug(kw)}"
        final = out / f"{stem}.json"
        rep.files.append(final)
        if final.is_file():
            rep.skipped.append((cls, kw))
            report(progress, "flickr search", i + 1, len(rows))
            continue
        limit = math.ceil(factor * n)
        if max_per_keyword is not None:
            limit = min(limit, max_per_keyword)
        kw_params = FlickrSearchParams(**{**_param_fields(params), "max_images": limit})
        pages_dir = out / ".pages" / stem
        records, seen, page, finished = _resume(pages_dir)
        rep.pages_reused += page - 1
        while not finished:
            photos, pages = client.page(kw, kw_params, page)
            take = photos[: max(0, limit - seen)]
            recs = [
                r
                for ph in take
                if (
                    r := photo_to_record(
                        ph,
                        wnid=cls,
                        search_key=kw,
                        params=kw_params,
                        uploader=who,
                        now=clock(),
                    )
                )
                is not None
            ]
            seen += len(take)
            finished = not photos or seen >= limit or page >= pages
            atomic_write_bytes(
                pages_dir / f"page_{page:05d}.json",
                json.dumps(
                    {
                        "page": page,
                        "pages": pages,
                        "n_photos": len(take),
                        "last": finished,
                        "records": recs,
                    }
                ).encode(),
            )
            records += recs
            rep.pages_fetched += 1
            page += 1
        write_search_results(final, records)
        for f in pages_dir.glob("page_*.json"):
            f.unlink()
        pages_dir.rmdir()
        rep.searched.append((cls, kw))
        report(progress, "flickr search", i + 1, len(rows))
    rep.records = sum(len(json.loads(f.read_text())) for f in rep.files)
    return rep


def _param_fields(params: FlickrSearchParams) -> dict[str, Any]:
    return {k: getattr(params, k) for k in FlickrSearchParams.__dataclass_fields__}


def _resume(pages_dir: Path) -> tuple[list[dict[str, Any]], int, int, bool]:
    """(records, photos seen, next page, finished) from the pages already fetched."""
    records: list[dict[str, Any]] = []
    seen, page, finished = 0, 1, False
    for f in sorted(pages_dir.glob("page_*.json")):
        try:
            data = json.loads(f.read_text())
            if int(data["page"]) != page:
                break  # a gap: refetch from here
            records += data["records"]
            seen += int(data["n_photos"])
            finished = bool(data["last"])
        except (OSError, ValueError, KeyError, TypeError):
            break  # unreadable page: refetch it
        page += 1
    return records, seen, page, finished


# ---------------------------------------------------------------------- pool loading


@dataclass(slots=True)
class CandidatePool:
    """Candidates from search-result files (``candidate_data.py:CandidateData``).

    ``candidates`` keeps the first record of each ``id_ours`` in file order;
    later records of the same id are in ``duplicates``; ``blacklisted`` lists the
    ids skipped because of the blacklist.
    """

    candidates: dict[str, dict[str, Any]] = field(default_factory=dict)
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    blacklisted: list[str] = field(default_factory=list)

    def by_wnid(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for rec in self.candidates.values():
            out.setdefault(rec["wnid"], []).append(rec)
        return out


def _blacklist_ids(
    blacklist: Mapping[str, Any] | Collection[str] | str | os.PathLike[str] | None,
) -> set[str]:
    if blacklist is None:
        return set()
    if isinstance(blacklist, (str, os.PathLike)):
        loaded: Collection[str] = json.loads(Path(blacklist).read_text())
        return {str(x) for x in loaded}  # a mapping contributes its keys
    return {str(x) for x in blacklist}


def load_search_results(
    files: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    blacklist: Mapping[str, Any]
    | Collection[str]
    | str
    | os.PathLike[str]
    | None = None,
) -> CandidatePool:
    """Load search-result JSON files (or every ``*.json`` in a directory).

    Files are read sorted by file name; blacklisted ids are skipped; the first
    occurrence of an ``id_ours`` wins and later ones go to ``duplicates``. Each
    record gains ``source_filename``.
    """
    if isinstance(files, (str, os.PathLike)):
        root = Path(files)
        paths = list(root.glob("*.json")) if root.is_dir() else [root]
    else:
        paths = [Path(p) for p in files]
    banned = _blacklist_ids(blacklist)
    pool = CandidatePool()
    for path in sorted(paths, key=lambda p: (p.name, str(p))):
        try:
            records = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise DataIntegrityError(
                f"search-result file {path} is unreadable ({err})."
            ) from err
        if not isinstance(records, list):
            raise DataIntegrityError(
                f"search-result file {path} holds a {type(records).__name__}; expected a list of records."
            )
        for rec in records:
            if not isinstance(rec, dict) or "id_ours" not in rec:
                raise DataIntegrityError(
                    f"search-result file {path}: record without 'id_ours': {str(rec)[:80]}"
                )
            rec = {**rec, "source_filename": path.name}
            cid = rec["id_ours"]
            if cid in banned:
                pool.blacklisted.append(cid)
            elif cid in pool.candidates:
                pool.duplicates.append(rec)
            else:
                pool.candidates[cid] = rec
    return pool


# ---------------------------------------------------------------------- downloader


@dataclass(slots=True)
class DownloadReport:
    """Outcome of :func:`download_candidates`.

    ``records`` are the input records (same order) with ``width``/``height`` set
    to the stored pixel size where the download succeeded; ``sha256`` maps each
    finished id to the sha256 of its stored ``original`` JPEG; ``failures`` maps
    ids to a one-line reason ("HTTP 404", "not an image: …", "too big: …").
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    downloaded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    blacklisted: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    sha256: dict[str, str] = field(default_factory=dict)


class _Failure(Exception):
    pass


def _fetch_bytes(url: str, *, timeout: float, max_bytes: int) -> bytes:
    req = urllib.request.Request(url, headers={"User-Agent": "retest-downloader/0.1"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        length = resp.headers.get("Content-Length")
        if length and length.isdigit() and int(length) > max_bytes:
            raise _Failure(f"too big: {length} bytes (limit {max_bytes})")
        data = resp.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise _Failure(f"too big: more than {max_bytes} bytes")
    return data


def _existing(out_dir: Path, cid: str) -> tuple[int, int, str] | None:
    """(width, height, sha256) of a finished candidate, or None."""
    paths = [out_dir / d / f"{cid}.jpg" for d in SIZE_DIRS]
    if not all(p.is_file() for p in paths):
        return None
    try:
        for p in paths:
            with Image.open(p) as im:
                im.verify()
        with Image.open(paths[0]) as im:
            w, h = im.size
    except (OSError, UnidentifiedImageError, SyntaxError):
        return None
    return w, h, hashlib.sha256(paths[0].read_bytes()).hexdigest()


def _download_one(
    rec: Mapping[str, Any], out_dir: Path, opts: Mapping[str, Any]
) -> tuple[int, int, str]:
    cid, url = rec["id_ours"], rec["url"]
    wait = opts["backoff"]
    for attempt in range(opts["retries"] + 1):
        try:
            opts["limiter"].wait()
            data = _fetch_bytes(
                url, timeout=opts["timeout"], max_bytes=opts["max_bytes"]
            )
            break
        except urllib.error.HTTPError as err:
            if not is_retryable(err) or attempt == opts["retries"]:
                raise _Failure(f"HTTP {err.code} {err.reason}") from err
        except (OSError, http.client.HTTPException) as err:
            if attempt == opts["retries"]:
                raise _Failure(f"download failed: {err}") from err
        except ValueError as err:  # malformed URL
            raise _Failure(f"bad URL {url!r}: {err}") from err
        opts["sleep"](wait)
        wait *= 2
    try:
        img = decode_image(data, source=url, max_pixels=opts["max_pixels"])
    except ImageDecodeError as err:
        reason = "too big" if "too big" in str(err) else "not an image"
        raise _Failure(f"{reason}: {err}") from err
    files = derive_sizes(img)
    # original last: its presence marks a finished candidate for resume
    for d in ("scaled_256", "scaled_500", "original"):
        atomic_write_bytes(out_dir / d / f"{cid}.jpg", files[d])
    return img.size[0], img.size[1], hashlib.sha256(files["original"]).hexdigest()


def download_candidates(
    records: Sequence[Mapping[str, Any]],
    out_dir: str | os.PathLike[str],
    *,
    workers: int = 8,
    retries: int = 3,
    backoff: float = 1.0,
    timeout: float = 30.0,
    max_bytes: int = 64 << 20,
    max_pixels: int = 178_956_970,
    blacklist: Mapping[str, Any]
    | Collection[str]
    | str
    | os.PathLike[str]
    | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rate: float | None = None,
    progress: ProgressCallback | None = None,
) -> DownloadReport:
    """Download candidate images and write the three derived JPEGs.

    Writes ``out_dir/{original,scaled_256,scaled_500}/<id_ours>.jpg``. Candidates
    whose three files already exist and decode are skipped (resume); failures are
    collected in the report, never raised. ``rate`` caps the image requests per
    second over all workers (retries included).
    """
    if workers < 1:
        raise ConfigError(f"workers must be ≥ 1. Got {workers}.")
    rule = RULES["flickr download"]
    out = claim_output_dir(check_output(out_dir, rule), rule)
    banned = _blacklist_ids(blacklist)
    opts = {
        "retries": retries,
        "backoff": backoff,
        "timeout": timeout,
        "max_bytes": max_bytes,
        "max_pixels": max_pixels,
        "sleep": sleep,
        "limiter": RateLimiter(rate),
    }
    rep = DownloadReport(records=[dict(r) for r in records])
    todo: list[dict[str, Any]] = []
    for rec in rep.records:
        cid = rec["id_ours"]
        if cid in banned:
            rep.blacklisted.append(cid)
        elif (done := _existing(out, cid)) is not None:
            rec["width"], rec["height"], rep.sha256[cid] = done
            rep.skipped.append(cid)
        else:
            todo.append(rec)
    total, finished = len(todo), 0
    report(progress, "download", 0, total)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_download_one, rec, out, opts): rec for rec in todo}
        for fut in as_completed(futures):
            rec = futures[fut]
            try:
                rec["width"], rec["height"], rep.sha256[rec["id_ours"]] = fut.result()
                rep.downloaded.append(rec["id_ours"])
            except _Failure as err:
                rep.failures[rec["id_ours"]] = str(err)
            finished += 1
            report(progress, "download", finished, total)
    order = {r["id_ours"]: i for i, r in enumerate(todo)}
    rep.downloaded.sort(key=order.__getitem__)
    return rep
