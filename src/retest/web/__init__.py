"""The labeling and review web app (FastAPI + Jinja2, minimal JavaScript).

Build it with :func:`retest.web.app.create_app`; ``retest serve`` runs it.
"""
