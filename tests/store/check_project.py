"""A small real project for the ``retest check`` tests: two classes and ``n``
random 8×8 RGB images added as an arrays source through the CLI.

Imported by the test modules (``from check_project import ...``), not a conftest.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from checkout_cli import retest_cli  # type: ignore[import-not-found]

__all__ = ["arrays_project"]


def arrays_project(tmp_path: Path, n: int = 300) -> Path:
    """``tmp_path/p``, with ``n`` images from ``tmp_path/a.npz`` (seed 7)."""
    rng = np.random.default_rng(7)
    np.savez(
        tmp_path / "a.npz",
        images=rng.integers(0, 256, (n, 8, 8, 3), dtype=np.uint8),
        labels=rng.integers(0, 2, n),
    )
    proj = tmp_path / "p"
    retest_cli("init", proj, "--classes", "cat,dog", ok=True)
    retest_cli(
        "source", "add", "arrays", tmp_path / "a.npz", "--project", proj, ok=True
    )
    return proj
