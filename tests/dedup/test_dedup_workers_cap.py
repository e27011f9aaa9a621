"""``retest dedup --workers N`` with more workers than the cores retest may use is
refused in one line before any worker starts (a typo such as ``--workers 20``
for 2 started twenty processes that shared the memory and ran no faster)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dedup_helpers import fm_images, fm_project  # type: ignore[import-not-found]

from retest._parallel import available_cpus


def test_more_workers_than_cores_is_refused_before_any_starts(
    tmp_path: Path, fashion_mnist_dir: Path
) -> None:
    train, labels, test = fm_images(fashion_mnist_dir, 50, 5)
    fm_project(tmp_path, train, labels, test).close()
    n = available_cpus() + 1  # the child inherits this process's affinity
    out = subprocess.run(
        [sys.executable, "-m", "retest", "dedup", "--metrics", "l2",
         "--workers", str(n), "--project", str(tmp_path)],
        capture_output=True, text=True, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"error: a local cluster of {n} workers:")
    assert f"pass at most {n - 1} workers" in lines[0]
    assert "--cluster" in lines[0]
    # nothing was computed: no neighbour list, no dedup state
    status = subprocess.run(
        [sys.executable, "-m", "retest", "status", "--project", str(tmp_path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert "no near-duplicate search has run" in status.stderr
