"""An empty output path (``--out ''``, ``init ''``) is an error, never ``.``.

``Path("")`` is the current folder, so without this check ``--out ''`` wrote
into (or was refused as) whatever folder the command ran in, and the message
echoed ``.`` or the resolved folder, never what was typed. Every option tagged
as an output (the walk of ``test_output_guard``) is run with an empty value.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from bad_input_helpers import assert_one_line, invoke
from test_output_guard import TEMPLATES, _writers


def test_every_output_option_is_in_the_table() -> None:
    assert set(_writers()) == set(TEMPLATES)


@pytest.mark.parametrize("empty", ["", "  "])
@pytest.mark.parametrize("key", sorted(TEMPLATES), ids=" ".join)
def test_empty_output_path_is_refused(
    tmp_path: Path, key: tuple[str, str], empty: str
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "mine.txt").write_text("mine")
    args = [a.format(p=tmp_path / "p", d=tmp_path / "d", out=empty)
            for a in shlex.split(TEMPLATES[key])]  # fmt: skip
    res = invoke(*args, cwd=cwd)
    line = assert_one_line(res, 2, "an empty path")
    flag = key[1] if key[1].startswith("--") else key[1].lower()
    assert f"'{flag}'" in line, line
    assert sorted(p.name for p in cwd.iterdir()) == ["mine.txt"]


@pytest.mark.parametrize("empty", ["", " "])
def test_the_python_guard_refuses_an_empty_string(empty: str) -> None:
    from retest._output import RULES, check_location, check_output
    from retest.errors import ConfigError

    for check in (check_output, check_location):
        with pytest.raises(ConfigError, match="--out is empty; pass a path"):
            check(empty, RULES["export"])
