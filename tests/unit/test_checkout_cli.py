"""The test run checks this checkout's commands, not whichever is first on PATH.

``tests/conftest.py`` puts broken ``retest`` and ``dask`` executables first on PATH
for the whole run; the commands of ``checkout_cli`` must not reach them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import retest
from checkout_cli import (  # type: ignore[import-not-found]
    DASK,
    DECOY_MESSAGE,
    RETEST,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["retest", "dask"])
def test_path_leads_to_a_broken_command(name: str, decoy_path_dir: Path) -> None:
    found = shutil.which(name)
    assert found is not None and Path(found).parent == decoy_path_dir
    run = subprocess.run([name, "--version"], capture_output=True, text=True)
    assert run.returncode == 3 and DECOY_MESSAGE in run.stderr


def test_retest_command_is_this_checkout() -> None:
    run = subprocess.run([*RETEST, "--version"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"retest {retest.__version__}"
    where = subprocess.run(
        [RETEST[0], "-c", "import retest; print(retest.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(REPO / "src")
    assert Path(retest.__file__).is_relative_to(REPO / "src")


def test_retest_command_names_itself_retest(tmp_path: Path) -> None:
    """``python -m retest`` tells the user to run ``retest``, as the installed command."""
    run = subprocess.run([*RETEST, "init"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "See 'retest init --help'." in run.stderr, run.stderr


def test_dask_command_is_the_interpreters() -> None:
    run = subprocess.run([*DASK, "--version"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert DECOY_MESSAGE not in run.stdout + run.stderr
    assert "version" in run.stdout.lower()
