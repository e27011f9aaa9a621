"""A table of more than two columns too wide for the console keeps every cell
whole: `retest revisions | cat` cut its strategy to ``class-balan…`` and rich
cropped the rest of the line (the ``created`` time read ``2026-11-``, its header
``cr``). It is now printed as tables one under the other, the first column in
each."""

from __future__ import annotations

import re

import pytest

from retest.cli import _console

COLS = ["revision", "strategy", "parent", "seed", "valid", "images", "created"]
ROW = ["fm-class-balanced-0", "class-balanced", "-", "0", "yes", "100",
       "2026-11-27T21:43:21.769880Z"]  # fmt: skip


@pytest.mark.parametrize("width", [80, 200])
def test_every_cell_whole_at_80_and_one_table_when_wide(monkeypatch, width) -> None:
    con = _console.Console(width=width, record=True, highlight=False)
    monkeypatch.setattr(_console, "console", con)
    _console.print_table(COLS, [ROW])
    text = con.export_text()
    assert max(len(line) for line in text.splitlines()) <= width
    assert "…" not in text
    cells: dict[str, str] = {}
    header: list[str] = []
    for line in text.splitlines():
        if line.startswith("┃"):
            header = [c.strip() for c in line.strip("┃").split("┃")]
        elif line.startswith("│"):
            row = [c.strip() for c in line.strip("│").split("│")]
            cells.update(zip(header, row, strict=True))
    assert cells == dict(zip(COLS, ROW, strict=True))
    assert text.count("┏") == (2 if width == 80 else 1)


def test_a_message_column_reads_from_the_left_and_keeps_its_paths(
    monkeypatch,
) -> None:
    """`retest check | cat`: a detail naming a long path was right-aligned and the
    path cut to ``/work/…/arrays/candida…``; it now folds, every character kept."""
    con = _console.Console(width=80, record=True, highlight=False)
    monkeypatch.setattr(_console, "console", con)
    path = "/work/scratch/projects/fashion-mnist/arrays/candidates_28x28.u8"
    detail = f"1000 rows of {path} are not used by any candidate or reference image"
    _console.print_table(
        ["problem", "count", "repaired", "detail"],
        [("orphan_rows", "1,000", "no", detail), ("indexes", "1", "no", "x " * 30)],
    )
    text = con.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    column = [
        line.split("│")[4]
        for line in text.splitlines()
        if line.startswith("│") and line.count("│") == 5
    ]
    assert path in "".join(c.strip() for c in column)  # folded, not cut
    assert column[0].startswith(" 1000 rows of")  # from the left


def test_a_column_with_numbers_and_a_long_path_keeps_numbers_right(
    monkeypatch,
) -> None:
    con = _console.Console(width=80, record=True, highlight=False)
    monkeypatch.setattr(_console, "console", con)
    path = "/work/scratch/projects/fashion-mnist/sources/pool-of-new-images.npz" * 2
    _console.print_table(["item", "value"], [("path", path), ("new", "1,430")])
    text = con.export_text()
    assert re.search(r"│ new +│ +1,430 │", text), text
    assert path in "".join(
        line.split("│")[2].strip() for line in text.splitlines() if "│" in line
    )
