"""``retest dedup-verdict CANDIDATE METRIC``: a bad METRIC is named as typed.

The message names the argument the user typed (METRIC, not an option they never
passed), the bad value, and every valid metric; exit 2 (a bad value).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_bad_metric_argument_names_it_and_lists_the_valid_ones(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    init = subprocess.run([sys.executable, "-m", "retest", "init", str(root),
                           "--classes", "a,b"], capture_output=True, text=True)  # fmt: skip
    assert init.returncode == 0, init.stderr
    r = subprocess.run(
        [sys.executable, "-m", "retest", "dedup-verdict", "00ab", "nosuchmetric",
         "--shown", "train:1", "--who", "ana", "--project", str(root)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [
        "error: METRIC takes l2, features, dssim, warp. Got 'nosuchmetric'."
    ]
