"""``retest people``: the people of a labeling campaign and their sign-in links."""

from __future__ import annotations

from typing import Annotated

import typer

from retest.cli._options import JsonOpt, ProjectOpt

people_app = typer.Typer(
    help="People who label or review in the web app (retest serve), each with a "
    "personal sign-in link.",
    no_args_is_help=True,
)

BaseUrlOpt = Annotated[
    str,
    typer.Option(
        help="Where the web app is reached (the links point there); "
        "`retest serve`'s default address."
    ),
]


def _by() -> str:
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def _show(name: str, role: str, link: str, as_json: bool) -> None:
    from retest.cli._console import console, escape, print_json

    if as_json:
        print_json({"name": name, "role": role, "link": link})
        return
    console.print(f"{escape(name)} ({role}): {escape(link)}", soft_wrap=True)
    console.print(
        "Send this link to that person only: it signs them in as "
        f"{escape(name)}. It is shown once; `retest people link` makes a new one."
    )


@people_app.command("add")
def add_cmd(
    name: Annotated[str, typer.Argument(help="The person's name (1-80 characters).")],
    role: Annotated[
        str,
        typer.Option(
            help="labeler (labeling, grid tasks) or reviewer (also results and review pages)."
        ),
    ] = "labeler",
    project: ProjectOpt = None,
    base_url: BaseUrlOpt = "http://127.0.0.1:8000",
    as_json: JsonOpt = False,
) -> None:
    """Add a person and print their personal sign-in link."""
    from retest.project import Project, add_person

    with Project.open(project) as proj:
        inv = add_person(proj, name, role, by=_by())
    _show(inv.person.name, inv.person.role, inv.link(base_url), as_json)


@people_app.command("link")
def link_cmd(
    name: Annotated[str, typer.Argument(help="The person's name (any case).")],
    project: ProjectOpt = None,
    base_url: BaseUrlOpt = "http://127.0.0.1:8000",
    as_json: JsonOpt = False,
) -> None:
    """A new sign-in link for a person: the old link and their sessions stop
    working (a revoked person is reinstated)."""
    from retest.project import Project, new_link

    with Project.open(project) as proj:
        inv = new_link(proj, name, by=_by())
    _show(inv.person.name, inv.person.role, inv.link(base_url), as_json)


@people_app.command("revoke")
def revoke_cmd(
    name: Annotated[str, typer.Argument(help="The person's name (any case).")],
    project: ProjectOpt = None,
) -> None:
    """End a person's link and sessions at once (their answers stay stored)."""
    from retest.cli._console import console, escape
    from retest.project import Project, revoke_person

    with Project.open(project) as proj:
        person = revoke_person(proj, name, by=_by())
    console.print(
        f"{escape(person.name)} revoked: their link and sessions no longer work.",
        soft_wrap=True,
    )


@people_app.command("list")
def list_cmd(project: ProjectOpt = None, as_json: JsonOpt = False) -> None:
    """The people of the project: name, role, added, revoked."""
    from retest.cli._console import console, print_json, print_table
    from retest.project import Project

    with Project.open(project) as proj:
        people = proj.store.people.list()
    if as_json:
        print_json(
            [
                {
                    "name": p.name,
                    "role": p.role,
                    "added": p.created,
                    "revoked": p.revoked,
                }
                for p in people
            ]
        )
        return
    if not people:
        console.print("No people yet: `retest people add NAME --role labeler`.")
        return
    print_table(
        ["name", "role", "added", "status"],
        [
            (
                p.name,
                p.role,
                p.created[:19],
                f"revoked {p.revoked[:19]}" if p.revoked else "active",
            )
            for p in people
        ],
    )


def _exclusion(worker: str, project: ProjectOpt, reason: str, excluded: bool) -> None:
    from retest.cli._console import console, escape
    from retest.project import Project, resolve_worker, set_exclusion

    with Project.open(project) as proj:
        key = resolve_worker(proj, worker)
        changed = set_exclusion(proj, key, excluded=excluded, by=_by(), reason=reason)
    state = "excluded from" if excluded else "counted in"
    console.print(
        f"Worker {escape(key)}'s answers {'are now' if changed else 'were already'} "
        f"{state} the counts.",
        soft_wrap=True,
    )


@people_app.command("exclude")
def exclude_cmd(
    worker: Annotated[
        str,
        typer.Argument(
            help="A person's name (any case; local:NAME alike), or a crowd "
            "worker's id as `retest crowd workers` prints it, or their MTurk WorkerId."
        ),
    ],
    project: ProjectOpt = None,
    reason: Annotated[str, typer.Option(help="Why (kept in the audit log).")] = "",
) -> None:
    """Leave a worker's answers out of every count (audited; `include` undoes it).

    A value naming no worker of the project is refused."""
    _exclusion(worker, project, reason, True)


@people_app.command("include")
def include_cmd(
    worker: Annotated[str, typer.Argument(help="Worker id, as for `exclude`.")],
    project: ProjectOpt = None,
    reason: Annotated[str, typer.Option(help="Why (kept in the audit log).")] = "",
) -> None:
    """Count an excluded worker's answers again."""
    _exclusion(worker, project, reason, False)


def register(app: typer.Typer) -> None:
    app.add_typer(people_app, name="people")
