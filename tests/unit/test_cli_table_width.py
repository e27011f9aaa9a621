"""Tables at 80 columns (piped output): every column shows, ids are never cut."""

from __future__ import annotations

import hashlib

import pytest

from retest.cli import _console


@pytest.fixture
def narrow(monkeypatch) -> _console.Console:
    con = _console.Console(width=80, record=True, highlight=False)
    monkeypatch.setattr(_console, "console", con)
    return con


def _ids(n: int) -> list[str]:
    return [hashlib.sha256(str(i).encode()).hexdigest() for i in range(n)]


def test_every_column_and_whole_ids_at_80_columns(narrow) -> None:
    ids = _ids(3)
    cols = ["candidate", "class", "pending", "closest", "verdict"]
    rows = [(i, "T-shirt/top", 12, "0.0312", "undecided") for i in ids]
    _console.print_table(cols, rows)
    text = narrow.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    for c in cols:  # headers whole: none squeezed away or cut to "candi…"
        assert c in text
    assert "…" not in text
    flat = "".join(
        "".join(ch for ch in line.split("│")[1] if ch not in " ")
        for line in text.splitlines()
        if line.count("│") == len(cols) + 1
    )
    for i in ids:  # a folded id keeps every character, in order
        assert i in flat
    assert "undecided" in text and "0.0312" in text


def test_a_table_that_fits_keeps_one_line_per_row(narrow) -> None:
    _console.print_table(["class", "images"], [("Sandal", 6000), ("Bag", 6000)])
    lines = [x for x in narrow.export_text().splitlines() if "│" in x]
    assert len(lines) == 2  # one line per row


def test_too_many_columns_still_show_the_first_whole(narrow) -> None:
    # the counts alone are wider than 80 columns (as `status` at 80): the class
    # names must not be squeezed away to make room for them
    cols = ["class", *(f"column number {i}" for i in range(8))]
    _console.print_table(cols, [("T-shirt/top", *range(8)), ("Ankle boot", *range(8))])
    text = narrow.export_text()
    assert "T-shirt/top" in text and "Ankle boot" in text
