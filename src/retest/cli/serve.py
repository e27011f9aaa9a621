"""``retest serve``: the labeling and review web app."""

from __future__ import annotations

from typing import Annotated

import typer

from retest.cli._options import ProjectOpt


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        project: ProjectOpt = None,
        host: Annotated[
            str, typer.Option(help="Interface to listen on.")
        ] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Port.")] = 8000,
        token: Annotated[
            str | None, typer.Option(help="Invitation token (random if unset).")
        ] = None,
    ) -> None:
        """Serve labeling, grid tasks, near-duplicate review and class review."""
        import uvicorn

        from retest.cli._console import console
        from retest.pipeline.crowd import project_secret
        from retest.pipeline.project import Project
        from retest.web.app import create_app, new_token

        proj = Project.open(project)
        tok = token or new_token()
        web = create_app(proj, token=tok, secret=project_secret(proj.root))
        console.print(
            f"retest serving {proj.root} on http://{host}:{port}/?token={tok}"
        )
        console.print("Share that link with your labelers; writes need the token.")
        try:
            uvicorn.run(web, host=host, port=port, log_level="warning")
        finally:
            proj.close()
