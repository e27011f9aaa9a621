"""The commands of this checkout, for tests that run them as real processes.

Resolved from the interpreter running the tests (``sys.executable -m …``), never
from PATH: another installation's ``retest`` (or ``dask``) first on PATH must not
be what a test checks. ``tests/conftest.py`` puts broken ``retest`` and ``dask``
executables first on PATH for the whole run to keep it that way.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = [
    "DASK",
    "DECOY_MESSAGE",
    "RETEST",
    "retest_cli",
    "run_retest",
    "write_decoys",
]

#: ``retest`` of this checkout (``src/retest/__main__.py``).
RETEST: tuple[str, ...] = (sys.executable, "-m", "retest")
#: Dask's ``dask`` command (scheduler, worker) of the interpreter's installation.
DASK: tuple[str, ...] = (sys.executable, "-m", "dask")

#: What the broken commands ``tests/conftest.py`` puts first on PATH print (exit 3).
DECOY_MESSAGE = "PATH retest used"


def write_decoys(folder: Path) -> None:
    """Broken ``retest`` and ``dask`` executables in ``folder``."""
    for name in ("retest", "dask"):
        exe = folder / name
        exe.write_text(f'#!/bin/sh\necho "{DECOY_MESSAGE}" >&2\nexit 3\n')
        exe.chmod(0o755)


def run_retest(
    root: Path, *args: str, columns: int | None = None
) -> subprocess.CompletedProcess[str]:
    """``retest ARGS --project ROOT`` of this checkout, output captured, never
    raising on a non-zero exit; ``columns``: the terminal width it sees."""
    env = {**os.environ, **({"COLUMNS": str(columns)} if columns else {})}
    return subprocess.run(
        [*RETEST, *args, "--project", str(root)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )


def retest_cli(*args: str | Path, ok: bool = False) -> subprocess.CompletedProcess[str]:
    """``retest ARGS`` of this checkout (no ``--project`` added), output captured;
    with ``ok``, asserts that it succeeded."""
    cp = subprocess.run(
        [*RETEST, *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if ok:
        assert cp.returncode == 0, (args, cp.stdout, cp.stderr)
    return cp
