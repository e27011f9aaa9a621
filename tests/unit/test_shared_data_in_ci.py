"""The real-data folder missing: a skip with its reason on a user's clone, a
failure in CI (``CI`` set), so a green CI run has run the real-data tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# any test that takes the ``shared_data`` fixture
TEST = "tests/evaluate/test_evaluate_cifar10_1.py::test_v4_table_matches_the_published_numbers"


def _pytest(missing: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["RETEST_SHARED_DATA"] = str(missing)
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", TEST, "-q", "-rsf", "-p", "no:cacheprovider"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize("ci", [None, ""])
def test_absent_data_is_a_skip_with_its_reason_outside_ci(
    tmp_path: Path, ci: str | None
) -> None:
    missing = tmp_path / "no-such-data"
    run = _pytest(missing, ci)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 skipped" in run.stdout and "failed" not in run.stdout
    assert f"real data folder {missing} is absent" in run.stdout


def test_absent_data_fails_in_ci(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-data"
    run = _pytest(missing, "true")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 error" in run.stdout and "skipped" not in run.stdout, run.stdout
    assert f"real data folder {missing} is absent" in run.stdout
    assert "CI is set" in run.stdout
