"""The registry of the web app's pages: a new page is a router and one registration.

:func:`register_page` stores a FastAPI ``APIRouter`` in :data:`PAGES` with its
nav-bar link and, optionally, its Jinja templates (a page may extend
``base.html`` and render with :func:`retest.web.views.render`).
:func:`include_pages`, called by :func:`retest.web.app.create_app`, mounts
every registered page (the built-in ones first, in their own order), adds the
templates to the app's loader and the links to the nav bar of every page.
A package provides a page with an entry point in the ``retest.web_pages`` group
naming the module that registers it.

Examples
--------
>>> [link.label for name in ("pages", "review") for link in PAGES.get(name).nav]
['Tasks', 'Near-duplicates', 'Selection frequency', 'Label errors', 'Quality']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from jinja2 import ChoiceLoader, DictLoader

from retest.errors import ConfigError
from retest.registry import Registry
from retest.web.routes import api, images, pages, review

__all__ = ["PAGES", "NavLink", "Page", "include_pages", "register_page"]


@dataclass(frozen=True, slots=True)
class NavLink:
    """A link of the nav bar; ``reviewer_only`` hides it from labelers."""

    label: str
    path: str
    reviewer_only: bool = True


@dataclass(frozen=True, slots=True)
class Page:
    """A router with its nav-bar links and templates (name → Jinja source).

    ``order`` places it among the pages (lower first); a request goes to the
    first route that matches, and the built-in pages come first.
    """

    router: APIRouter
    nav: tuple[NavLink, ...] = ()
    templates: Mapping[str, str] = field(default_factory=dict)
    order: int = 100


PAGES: Registry[Page] = Registry("web page", entry_point_group="retest.web_pages")


def register_page(
    name: str,
    router: APIRouter,
    *,
    nav_label: str | None = None,
    nav_path: str | None = None,
    reviewer_only: bool = True,
    templates: Mapping[str, str] | None = None,
) -> APIRouter:
    """Register ``router`` as the web page ``name`` (returns the router).

    Parameters
    ----------
    name : str
    router : fastapi.APIRouter
        Its routes; protect them with the dependencies of :mod:`retest.web.deps`
        (``ReviewerDep``: reviewers only, ``RoleDep``: anyone signed in).
    nav_label : str, optional
        Text of its nav-bar link (no link when omitted).
    nav_path : str, optional
        Where the link goes; default the router's first GET route without
        parameters.
    reviewer_only : bool
        Show the link to reviewers only (labelers see Tasks).
    templates : mapping of str to str, optional
        Jinja templates by name, for :func:`retest.web.views.render`.
    """
    nav: tuple[NavLink, ...] = ()
    if nav_label is not None:
        path = nav_path or _first_get(name, router)
        nav = (NavLink(nav_label, path, reviewer_only),)
    PAGES.add(name, Page(router, nav, dict(templates or {})))
    return router


def _first_get(name: str, router: APIRouter) -> str:
    for route in router.routes:
        if isinstance(route, APIRoute) and "GET" in (route.methods or ()):
            if "{" not in route.path:
                return route.path
    raise ConfigError(
        f"web page {name!r} has no GET route without parameters for its nav link; "
        "pass nav_path."
    )


def include_pages(app: FastAPI) -> None:
    """Mount every registered page on ``app``, with its templates and nav links.

    ``app.state.templates`` must hold the app's ``Jinja2Templates``. A page that
    would serve a method and path another page serves, or a template name that is
    taken, is refused: it must not change what an existing URL shows.
    """
    names = sorted(PAGES.names(), key=lambda n: PAGES.get(n).order)
    env = app.state.templates.env
    taken_templates = set(env.loader.list_templates())
    served: dict[tuple[str, str], str] = {}
    extra: dict[str, str] = {}
    links: list[NavLink] = []
    for name in names:
        page = PAGES.get(name)
        for route in page.router.routes:
            if not isinstance(route, APIRoute):
                continue
            for method in sorted(route.methods or ()):
                other = served.setdefault((method, route.path), name)
                if other != name:
                    raise ConfigError(
                        f"web page {name!r}: {method} {route.path} is already served "
                        f"by page {other!r}; choose another path."
                    )
        for tname, source in page.templates.items():
            if tname in taken_templates or tname in extra:
                raise ConfigError(
                    f"web page {name!r}: template name {tname!r} is taken; "
                    "choose another name."
                )
            extra[tname] = source
        app.include_router(page.router)
        links += page.nav
    if extra:
        env.loader = ChoiceLoader([env.loader, DictLoader(extra)])
    env.globals["nav_links"] = tuple(links)


# The built-in pages, in the order their routes are matched: answers and
# images first, as they are most of the requests (each route tried before the
# one that matches costs every request); nav links keep the pages' order.
PAGES.add("api", Page(api.router, order=0))
PAGES.add("images", Page(images.router, order=1))
PAGES.add("pages", Page(pages.router, (NavLink("Tasks", "/tasks", False),), order=2))
PAGES.add(
    "review",
    Page(
        review.router,
        (
            NavLink("Near-duplicates", "/neardup"),
            NavLink("Selection frequency", "/stats"),
            NavLink("Label errors", "/label-errors"),
            NavLink("Quality", "/quality"),
        ),
        order=3,
    ),
)
