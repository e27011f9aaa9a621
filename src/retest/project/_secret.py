"""The project's secret for image tokens and worker-id hashes."""

from __future__ import annotations

import os
import secrets

from retest.project._project import Project

__all__ = ["project_secret"]


def project_secret(project: Project) -> bytes:
    """The project's secret for image tokens and worker-id hashes.

    Created once (``.retest-secret``, mode 0600) and never shown to workers; losing it
    makes exported batches unreadable, so it lives next to ``retest.db``.

    Parameters
    ----------
    project : Project

    Returns
    -------
    bytes
    """
    path = project.root / ".retest-secret"
    if not path.exists():
        fd = os.open(
            path.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600
        )
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        os.replace(path.with_suffix(".tmp"), path)
    return bytes.fromhex(path.read_text().strip())
