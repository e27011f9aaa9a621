"""``retest status | cat`` (not a terminal: 80 columns) shows every count
column with its whole header and every number: its nine columns do not fit in
80, and rich squeezed the headers to ``candi…``. Too wide a table is now printed
as several, each repeating the class column; on a wide console it stays one."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from checkout_cli import RETEST, run_retest  # type: ignore[import-not-found]

CLASSES = ("T-shirt/top", "Trouser", "Ankle boot")
COLUMNS = ("class", "candidates", "annotated", "blacklisted", "near-dups",
           "unreviewed", "eligible", "sampled", "reviewed")  # fmt: skip
KEYS = ("class", "candidates", "annotated", "blacklisted", "near_duplicates",
        "unreviewed", "eligible", "sampled", "reviewed")  # fmt: skip


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("status")
    rng = np.random.default_rng(0)
    for name, n in (("train", 30), ("cand", 1234)):
        imgs = rng.integers(0, 256, (n, 8, 8, 3), dtype=np.uint8)
        np.savez(tmp / f"{name}.npz", images=imgs, labels=np.arange(n) % 3)
    root = tmp / "p"
    init = subprocess.run(
        [*RETEST, "init", str(root), "--classes", ",".join(CLASSES)],
        capture_output=True,
        text=True,
    )
    assert init.returncode == 0, init.stderr
    for args in (
        ("reference", "add", "arrays", str(tmp / "train.npz"), "--split", "train"),
        ("source", "add", "arrays", str(tmp / "cand.npz")),
    ):
        out = run_retest(root, *args)
        assert out.returncode == 0, out.stderr
    return root


def _by_class(text: str) -> dict[str, dict[str, str]]:
    """Every table's cells by class and header, the tables read side by side."""
    out: dict[str, dict[str, str]] = {}
    header: list[str] = []
    for line in text.splitlines():
        if line.startswith("┃"):
            header = [c.strip() for c in line.strip("┃").split("┃")]
        elif line.startswith("│") and header:
            cells = [c.strip() for c in line.strip("│").split("│")]
            out.setdefault(cells[0], {}).update(zip(header, cells, strict=True))
        elif line.startswith("└"):
            header = []  # the next table's header comes first
    return out


@pytest.mark.parametrize("width", [None, 200])
def test_every_header_and_number_shows_at_80_and_wide(
    project: Path, width: int | None
) -> None:
    out = run_retest(project, "status", columns=width)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    status = text.split("eligible for sampling")[0]  # the counts table(s)
    boxes = [x for x in text.splitlines() if x[:1] in "┏┃┡│└"]  # the tables
    assert max(len(line) for line in boxes) <= (width or 80)
    assert "…" not in text
    want = json.loads(run_retest(project, "status", "--json").stdout)["classes"]
    got = _by_class(status)
    assert list(got) == list(CLASSES)
    for row in want:
        cells = got[row["class"]]
        assert list(cells) == list(COLUMNS)  # every header, whole, in order
        for col, key in zip(COLUMNS, KEYS, strict=True):
            v = row[key]
            assert cells[col] == (f"{v:,}" if type(v) is int else str(v)), col
    tables = status.count("┏")
    assert tables == (2 if width is None else 1)
