"""``retest sample --strategy nosuch`` reports the bad strategy before anything else.

Without ``--seed`` (and with no ``[seeds] sample``) the command also lacks a
seed; the user should first hear that the strategy does not exist, with the
valid ones, since fixing the seed alone would only lead to a second error.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_bad_strategy_before_the_missing_seed(tmp_path: Path) -> None:
    root = tmp_path / "p"
    init = subprocess.run([sys.executable, "-m", "retest", "init", str(root),
                           "--classes", "a,b"], capture_output=True, text=True)  # fmt: skip
    assert init.returncode == 0, init.stderr
    r = subprocess.run(
        [sys.executable, "-m", "retest", "sample", "--strategy", "nosuch",
         "--per-class", "3", "--project", str(root)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: Unknown sampler 'nosuch'. Available: "), lines
    for name in ("class-balanced", "matched-frequency", "threshold"):
        assert name in lines[0], lines


def test_keyword_count_without_counts_names_the_option(tmp_path: Path) -> None:
    root = tmp_path / "p"
    init = subprocess.run([sys.executable, "-m", "retest", "init", str(root),
                           "--classes", "a,b"], capture_output=True, text=True)  # fmt: skip
    assert init.returncode == 0, init.stderr
    r = subprocess.run(
        [sys.executable, "-m", "retest", "sample", "--strategy", "keyword-count",
         "--per-class", "3", "--seed", "1", "--no-dedup", "--project", str(root)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--keyword-counts FILE" in lines[0], lines
