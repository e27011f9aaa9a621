"""What the pages show, computed from the store's events (no writes here).

Selection frequencies come from :func:`retest.project._eligibility.selection_frequencies`
(``kind="task"`` events, Rejected assignments ignored), keyed by (item, class id);
the five-bin histograms use :data:`retest.sampling.histogram.DEFAULT_BINS`. The
keyword plan is the latest ``retest plan`` artifact (``reports/plan_<rule>.json``).
"""

from __future__ import annotations

import secrets
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from retest.config import ProjectConfig
from retest.labeling.instructions import pick_instructions, render_markdown
from retest.labeling.keyword_plan import assign_verified
from retest.labeling.tasks import image_token
from retest.project import (
    Project,
    candidate_eligibility,
    class_names,
    copies,
    planned_needs,
    target_histograms,
    verified_per_keyword,
)
from retest.sampling.histogram import DEFAULT_BINS, bin_index, round_histogram
from retest.sampling.selection_frequency import FrequencyStat
from retest.store.base import Store
from retest.store.rows import split_reference_id

__all__ = [
    "BIN_LABELS",
    "KeywordProgress",
    "Pool",
    "agreement",
    "busy",
    "candidate_pool",
    "class_histograms",
    "instructions_for",
    "keyword_progress",
    "keywords_of",
    "latest_values",
    "near_duplicate_ids",
    "render",
    "task_tokens",
    "verified_counts",
]

N_BINS = len(DEFAULT_BINS) + 1
BIN_LABELS = tuple(
    f"[{lo:g},{hi:g}{']' if i == N_BINS - 1 else ')'}"
    for i, (lo, hi) in enumerate(
        zip((0.0, *DEFAULT_BINS), (*DEFAULT_BINS, 1.0), strict=True)
    )
)
Stats = Mapping[tuple[str, int], FrequencyStat]


def render(request: Request, name: str, **ctx: Any) -> HTMLResponse:
    """A page with the signed-in name and role, and a fresh submission key
    (``submission``) that the page's forms send with their write."""
    templates = request.app.state.templates
    state = request.app.state.retest
    who = getattr(request.state, "who", None)
    base = {
        "project": state.name,
        "who": who.name if who is not None else "",
        "role": getattr(request.state, "role", None),
        "submission": secrets.token_urlsafe(12),
    }
    resp = templates.TemplateResponse(request, name, {**base, **ctx})
    # Back shows the page as it is now (e.g. the answer just given), with a
    # fresh submission key, not a stored copy
    resp.headers["Cache-Control"] = "no-store"
    return resp


_TITLES = {403: "Not for your role", 404: "Not found", 413: "Too large"}


def is_page(request: Request) -> bool:
    """Whether a browser opened this address as a page (not a script's API
    call or an image), so an error is shown as a page rather than JSON."""
    return request.method in ("GET", "HEAD") and not request.url.path.startswith(
        ("/api/", "/img/", "/static/")
    )


def error_page(request: Request, status: int, detail: str) -> HTMLResponse:
    """An error on a page, as a page: what happened and what to do (a labeler
    opening a reviewer's page, an unknown task, a bad address)."""
    resp = render(
        request,
        "message.html",
        title=_TITLES.get(status, "Cannot show this page"),
        message=detail,
    )
    resp.status_code = status
    return resp


def instructions_for(
    config: ProjectConfig,
    class_name: str,
    keyword: str | None = None,
    *,
    default: str | None = None,
) -> Markup | None:
    """The project's instructions for a keyword's or class's pages
    (:func:`~retest.labeling.instructions.pick_instructions`), else ``default``, as
    safe HTML; None when there is neither."""
    text = pick_instructions(config.instructions, class_name, keyword)
    text = default if text is None else text
    return None if text is None else Markup(render_markdown(text))


def busy(request: Request, err: Exception) -> HTMLResponse:
    """503 for a page whose data is still being computed in the background:
    says what and how far (``str(err)``), and reloads itself."""
    resp = render(request, "busy.html", message=str(err))
    resp.status_code = 503
    resp.headers["Retry-After"] = "5"
    resp.headers["Refresh"] = "5"
    return resp


@lru_cache(maxsize=4096)
@lru_cache(maxsize=4096)
def task_tokens(
    task_id: str, items: tuple[str, ...], secret: bytes
) -> Mapping[str, str]:
    """Image token → item of a grid task (computed once per task: each of a
    page's 48 image requests and its answer look it up)."""
    return MappingProxyType({image_token(f"{task_id}|{i}", secret): i for i in items})


def agreement(frequency: float) -> float:
    """Share of valid annotators agreeing with the majority answer."""
    return max(frequency, 1.0 - frequency)


def class_histograms(
    project: Project,
    stats: Stats,
    black: Mapping[str, str],
    *,
    min_annotations: int = 10,
    per_class: Mapping[int, int] | None = None,
    near_duplicates: Collection[str] = frozenset(),
) -> dict[int, dict[str, list[int]]]:
    """Per class id, the review page's bin table: original, target, valid, annotated.

    See docs/algorithms.md#revisions.

    ``original``: original images of the class with ≥ ``min_annotations`` valid
    assignments (as for the target histogram); ``target``: that histogram
    rounded to ``per_class[c]`` images (largest remainder; zeros when unknown);
    ``valid``: candidates of the class with ≥ ``min_annotations``, not
    blacklisted and not near-duplicates; ``annotated``: candidates with any valid assignment.
    """
    names = class_names(project)
    hists = target_histograms(
        project, min_annotations=min_annotations, min_images=1, stats=stats
    )
    out: dict[int, dict[str, list[int]]] = {}
    for cid, name in names.items():
        h = hists.get(name)
        orig = list(h.counts) if h is not None else [0] * N_BINS
        n = (per_class or {}).get(cid, 0)
        target = round_histogram(orig, n) if sum(orig) and n else [0] * N_BINS
        out[cid] = {
            "original": orig,
            "target": list(target),
            "valid": [0] * N_BINS,
            "annotated": [0] * N_BINS,
        }
    for (item, cid), st in stats.items():
        if cid not in out or split_reference_id(item) is not None:
            continue
        if st.n_assignments > 0:
            b = bin_index(st.frequency)
            out[cid]["annotated"][b] += 1
            if (
                st.n_assignments >= min_annotations
                and item not in black
                and item not in near_duplicates
            ):
                out[cid]["valid"][b] += 1
    return out


@dataclass(frozen=True, slots=True)
class KeywordProgress:
    """CIFAR labeling progress of one keyword against the keyword plan."""

    class_id: int
    keyword: str
    needed: int
    verified: int
    selected: int
    to_select: int
    to_verify: int

    @property
    def missing(self) -> int:
        return max(0, self.needed - self.verified)


def near_duplicate_ids(project: Project) -> frozenset[str]:
    """Candidates excluded as copies, by the one eligibility decision of the project
    (:func:`retest.project._eligibility.candidate_eligibility`)."""
    return copies(candidate_eligibility(project))


def latest_values(store: Store, kind: str) -> dict[str, int]:
    """Latest value per item of one annotation kind."""
    return {e.item_id: e.value for e in store.annotations.list(kind=kind)}


@dataclass(frozen=True)
class Pool:
    """The blacklist, and how many blacklisted candidates each ``(keyword,
    class_id)`` holds. Everything else the keyword pages need is read per keyword
    through the keyword index (:meth:`ids`, :func:`keyword_progress`), never by
    a pass over every candidate."""

    black: dict[str, str]
    black_at: dict[tuple[str, int | None], int]

    def ids(self, store: Store, keyword: str, class_id: int) -> list[str]:
        """Unblacklisted candidates of the keyword for the class (or classless),
        in store order."""
        return [
            r.id
            for r in store.candidates.iter(keyword=keyword)
            if r.class_id in (None, class_id) and r.id not in self.black
        ]

    def count(
        self, counts: Mapping[tuple[str, int | None], int], keyword: str, class_id: int
    ) -> int:
        """How many :meth:`ids` gives, from ``count_by_keyword`` ``counts``."""
        keys = {(keyword, None), (keyword, class_id)}
        return sum(counts.get(k, 0) - self.black_at.get(k, 0) for k in keys)


def candidate_pool(store: Store) -> Pool:
    black = store.blacklist.current()
    cols = store.candidates.columns(("class_id", "keyword"), ids=black)
    at = Counter(zip(cols["keyword"], cols["class_id"], strict=True))
    return Pool(black, {k: n for k, n in at.items() if k[0] is not None})


def keywords_of(store: Store, ids: Collection[str]) -> dict[str, str]:
    """``candidate → keyword`` of those ``ids`` that are candidates with one."""
    cols = store.candidates.columns(("id", "keyword"), ids=ids)
    return {i: kw for i, kw in zip(cols["id"], cols["keyword"], strict=True) if kw}


def verified_counts(
    latest_verify: Mapping[tuple[str, int], int],
    keyword_of: Mapping[str, str],
    names: Mapping[int, str],
) -> dict[tuple[str, str], int]:
    """``(class name, keyword) → candidates whose latest verify answer is yes``;
    the same count as :func:`retest.project.verified_per_keyword`, from
    the kept latest answers instead of a scan of the events."""
    out: dict[tuple[str, str], int] = {}
    # an image verified for several classes counts once (the one rule)
    for item, cls in assign_verified(latest_verify, keyword_of)[0].items():
        kw = keyword_of.get(item)
        if kw is not None:
            key = (names.get(cls, str(cls)), kw)
            out[key] = out.get(key, 0) + 1
    return out


def keyword_progress(
    project: Project,
    *,
    class_id: int | None = None,
    selected: Mapping[str, int] | None = None,
    verdicts: Mapping[str, int] | None = None,
    verified: Mapping[tuple[str, str], int] | None = None,
    pool: Pool | None = None,
    counts: Mapping[tuple[str, int | None], int] | None = None,
) -> tuple[list[KeywordProgress], str]:
    """Needed vs verified per keyword, and what is left to select / verify.

    ``needed`` comes from the newest ``retest plan`` artifact; without one it is
    the keyword's count in the original dataset. Returns (rows, plan path or "").
    The optional arguments pass state the caller already keeps (the web app's
    incremental aggregates); without them it is read from the store.
    """
    store = project.store
    needs, plan_path = planned_needs(project)
    names = class_names(project)
    verified = verified_per_keyword(project) if verified is None else verified
    if selected is None:
        selected = latest_values(store, "select")
    if verdicts is None:
        verdicts = latest_values(store, "verify")
    pool = candidate_pool(store) if pool is None else pool
    keywords = store.classes.keywords(class_id=class_id)
    if counts is None:
        counts = store.candidates.count_by_keyword({k.keyword for k in keywords})
    # where the labelled candidates are (only they are read, not the pool)
    cols = store.candidates.columns(("id", "class_id", "keyword"), ids=selected)
    labelled: dict[str, list[tuple[str, int | None]]] = defaultdict(list)
    for i, k, kw in zip(cols["id"], cols["class_id"], cols["keyword"], strict=True):
        if kw is not None and i not in pool.black:
            labelled[kw].append((i, k))
    rows = []
    for kw in keywords:
        name = names.get(kw.class_id, str(kw.class_id))
        ids = [i for i, k in labelled.get(kw.keyword, ()) if k in (None, kw.class_id)]
        rows.append(
            KeywordProgress(
                kw.class_id,
                kw.keyword,
                needs.get((name, kw.keyword), 0) if plan_path else kw.original_count,
                verified.get((name, kw.keyword), 0),
                sum(1 for i in ids if selected.get(i) == 1),
                pool.count(counts, kw.keyword, kw.class_id) - len(ids),
                sum(1 for i in ids if selected.get(i) == 1 and i not in verdicts),
            )
        )
    return rows, plan_path
