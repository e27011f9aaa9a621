"""``retest serve``: the labeling and review web app."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from retest.cli._options import ProjectOpt, port_option


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        project: ProjectOpt = None,
        host: Annotated[
            str, typer.Option(help="Interface to listen on.")
        ] = "127.0.0.1",
        port: Annotated[
            int, typer.Option(help="Port (1-65535).", callback=port_option)
        ] = 8000,
        reviewer_token: Annotated[
            str | None,
            typer.Option(
                "--reviewer-token",
                "--admin-token",
                help="The project owner's token: everything, as reviewer "
                "'owner' (random if unset).",
            ),
        ] = None,
        public_labeling: Annotated[
            bool,
            typer.Option(
                help="Also print a public labeling link: anyone with it labels as "
                "an anonymous worker of their own (one per browser)."
            ),
        ] = False,
        token: Annotated[
            str | None,
            typer.Option(
                help="The public link's token (with --public-labeling; random if unset)."
            ),
        ] = None,
        session_days: Annotated[
            float,
            typer.Option(min=0.01, max=3650, help="How long a sign-in lasts, in days."),
        ] = 30.0,
        trusted_proxy: Annotated[
            str | None,
            typer.Option(
                help="Address of a TLS reverse proxy in front of the app: its "
                "X-Forwarded-Proto/-For are believed (cookies become Secure over https)."
            ),
        ] = None,
        openapi: Annotated[
            bool, typer.Option(help="Serve /openapi.json (off by default).")
        ] = False,
    ) -> None:
        """Serve labeling, grid tasks, near-duplicate review and class review.

        People sign in with their personal links (`retest people add`); this
        prints the owner's link (everything). Requests must name this host and
        port (others get 421), so a web page elsewhere cannot reach the app by
        DNS tricks.
        """
        import uvicorn

        from retest.cli._console import console
        from retest.errors import InputValidationError
        from retest.labeling.people import new_token
        from retest.project import Project
        from retest.stages.crowd import project_secret
        from retest.web.app import create_app

        if token is not None and not public_labeling:
            raise InputValidationError(
                "--token is the public link's token: give it with --public-labeling "
                "(people sign in with their own links: `retest people add`)."
            )
        tok = (token or new_token()) if public_labeling else None
        rtok = reviewer_token or new_token()
        if tok == rtok:
            raise InputValidationError(
                "--admin-token must differ from --token: the owner's token grants "
                "more than the public link."
            )
        _check_can_listen(host, port)
        proj = Project.open(project)
        hosts = {f"{host}:{port}"}
        if host in ("127.0.0.1", "localhost", "::1", "0.0.0.0"):
            hosts |= {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
        web = create_app(
            proj,
            token=tok,
            reviewer_token=rtok,
            secret=project_secret(proj),
            openapi=openapi,
            hosts=None if host == "0.0.0.0" or trusted_proxy else hosts,
            progress=lambda task, done, total: console.print(f"  {task}"),
            processes=True,
            session_days=session_days,
        )
        # read the event log once now, so the first page does not wait for it
        web.state.retest.live.sync()
        shown = "127.0.0.1" if host == "0.0.0.0" else host
        console.print(
            f"retest serving {proj.root} on http://{shown}:{port}/", soft_wrap=True
        )
        console.print(
            f"  owner (everything): http://{shown}:{port}/?token={rtok}",
            soft_wrap=True,
        )
        if tok is not None:
            console.print(
                f"  public labeling:    http://{shown}:{port}/?token={tok}",
                soft_wrap=True,
            )
        n = len(proj.store.people.list())
        console.print(
            f"{n} people have personal links; `retest people add NAME --role "
            "labeler|reviewer` adds one. Keep the owner's link to yourself."
        )
        # Pages (worker threads), answers (the event loop) and the writer share
        # one interpreter lock, and a thread back from SQLite waits for it up to
        # the switch interval: 1 ms instead of 5 gave 362-381 instead of 272-353
        # answers/s with pages read meanwhile (bench_web.py, 1 M events).
        sys.setswitchinterval(0.001)
        try:
            uvicorn.run(
                web,
                host=host,
                port=port,
                log_level="warning",
                proxy_headers=trusted_proxy is not None,
                forwarded_allow_ips=trusted_proxy,
            )
        finally:
            proj.close()


def _check_can_listen(host: str, port: int) -> None:
    """Refuse, in one line, an address this machine cannot listen on (a port in
    use, a host that is not one of its addresses) before the project is opened;
    uvicorn would log its own error and exit 3 after start-up."""
    import socket

    from retest.errors import ConfigError

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM
        )[0]
    except (OSError, UnicodeError) as err:
        raise ConfigError(
            f"--host {host!r} is not an address of this machine ({err}); use "
            "127.0.0.1, 0.0.0.0 or one of its interfaces."
        ) from None
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn
        try:
            sock.bind(address)
        except OSError as err:
            raise ConfigError(
                f"cannot listen on {host}:{port}: {err.strerror or err}; choose "
                "another --port (or stop what uses it) or another --host."
            ) from None
