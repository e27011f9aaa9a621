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
        token: Annotated[
            str | None,
            typer.Option(help="Labelers' invitation token (random if unset)."),
        ] = None,
        reviewer_token: Annotated[
            str | None,
            typer.Option(
                help="Reviewers' token: results, controls, statistics and review "
                "pages (random if unset)."
            ),
        ] = None,
        openapi: Annotated[
            bool, typer.Option(help="Serve /openapi.json (off by default).")
        ] = False,
    ) -> None:
        """Serve labeling, grid tasks, near-duplicate review and class review.

        Prints two links: the labelers' (labeling and grid tasks only) and the
        reviewers' (everything). Requests must name this host and port (others
        get 421), so a web page elsewhere cannot reach the app by DNS tricks.
        """
        import uvicorn

        from retest.cli._console import console
        from retest.errors import InputValidationError
        from retest.pipeline.crowd import project_secret
        from retest.pipeline.project import Project
        from retest.web.app import create_app, new_token

        tok = token or new_token()
        rtok = reviewer_token or new_token()
        if tok == rtok:
            raise InputValidationError(
                "--reviewer-token must differ from --token: the reviewer token "
                "grants more than the invitation."
            )
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
            hosts=None if host == "0.0.0.0" else hosts,
            progress=lambda task, done, total: console.print(f"  {task}"),
            processes=True,
        )
        # read the event log once now, so the first page does not wait for it
        web.state.retest.live.sync()
        shown = "127.0.0.1" if host == "0.0.0.0" else host
        console.print(
            f"retest serving {proj.root} on http://{shown}:{port}/", soft_wrap=True
        )
        console.print(
            f"  labelers:  http://{shown}:{port}/?token={tok}", soft_wrap=True
        )
        console.print(
            f"  reviewers: http://{shown}:{port}/?token={rtok}", soft_wrap=True
        )
        console.print(
            "Share the labelers' link with labelers only; the reviewers' link "
            "shows results and controls."
        )
        # Pages (worker threads), answers (the event loop) and the writer share
        # one interpreter lock, and a thread back from SQLite waits for it up to
        # the switch interval: 1 ms instead of 5 gave 362-381 instead of 272-353
        # answers/s with pages read meanwhile (bench_web.py, 1 M events).
        sys.setswitchinterval(0.001)
        try:
            uvicorn.run(web, host=host, port=port, log_level="warning")
        finally:
            proj.close()
