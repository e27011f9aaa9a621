"""Counts in the CLI's messages are grouped by thousands (``12,345``), the one way
every message shows a count (:func:`retest._validation.fmt_count`)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from checkout_cli import run_retest
from retest.project import Project
from retest.store.artifacts import PixelArray
from retest.store.rows import content_id

N = 12_345


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12,345 candidates of ten classes, real pixels, no dedup run."""
    root = tmp_path_factory.mktemp("counts")
    p = Project.init(root, name="t", classes_from="fashion-mnist")
    imgs = np.random.default_rng(0).integers(0, 256, (N, 28, 28), dtype=np.uint8)
    rows = PixelArray.create(p.arrays_dir, "a", shape=(28, 28)).append(imgs)
    p.store.candidates.add_columns(
        [content_id(x) for x in imgs], [str(i) for i in range(N)],
        [i % 10 for i in range(N)], [None] * N, list(rows),
        source="t", width=28, height=28, array_name="a",
    )  # fmt: skip
    p.close()
    return root


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_retest(root, *args)


def _raw_counts(lines: str) -> list[str]:
    """Numbers of five or more digits not grouped by commas."""
    return re.findall(r"(?<![\d,.])\d{5,}(?![\d,])", lines)


def test_status_and_sample_refusal_group_the_count(root: Path) -> None:
    st = _cli(root, "status")
    assert st.returncode == 0, st.stderr
    assert "eligible for sampling: 12,345" in st.stdout
    assert re.search(r"│ T-shirt/top +│ +1,235 │", st.stdout)  # the class table too
    assert "no near-duplicate search has run on the 12,345 candidates" in st.stderr
    out = _cli(root, "sample", "--strategy", "class-balanced", "--per-class", "5",
               "--seed", "1")  # fmt: skip
    assert out.returncode == 1
    assert out.stderr.startswith(
        "error: no near-duplicate search has run on the 12,345 candidates;"
    ), out.stderr
    assert not _raw_counts(out.stderr)
    check = _cli(root, "check")
    assert check.returncode == 0, check.stdout
    assert "candidates 12,345, " in " ".join(check.stdout.split())  # wrapped at 80
    assert not _raw_counts(check.stdout), check.stdout


def test_a_large_revision_reports_grouped_counts(root: Path) -> None:
    out = _cli(root, "sample", "--strategy", "class-balanced", "--per-class", "1100",
               "--no-dedup", "--seed", "1")  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if not ln.startswith(("│", "┃"))]
    text = "\n".join(lines)
    assert ": 11,000 images, valid" in text
    assert "eligible candidates: 12,345" in text
    assert not _raw_counts(text), text


def test_reference_add_says_its_counts_on_one_line(
    tmp_path: Path, fashion_mnist_dir: Path
) -> None:
    Project.init(tmp_path, name="r", classes_from="fashion-mnist").close()
    out = _cli(tmp_path, "reference", "add", "fashion-mnist", str(fashion_mnist_dir),
               "--split", "test")  # fmt: skip
    assert out.returncode == 0, out.stderr
    # not the narrow table's title, wrapped over three lines
    assert "reference test: 10,000 images (10,000 new), 0 with keyword\n" in out.stdout
    assert re.search(r"│ Ankle boot +│ +1,000 │", out.stdout)
