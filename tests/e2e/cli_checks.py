"""Checks on what a `retest` command printed, shared by the CLI-only tests.

Nothing here imports retest, so the tests that use it run against any version
of the CLI.
"""

from __future__ import annotations

from typing import Any


def one_error_line(run: Any) -> str:
    """The only stderr line of a refused command (no traceback)."""
    assert run.returncode != 0, run.describe()
    lines = [x for x in run.stderr.strip().splitlines() if "━" not in x]
    assert len(lines) == 1 and lines[0].startswith("error: "), run.describe()
    assert "Traceback" not in run.stderr
    return lines[0]
