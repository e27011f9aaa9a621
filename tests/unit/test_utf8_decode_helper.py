"""Text files users hand over are decoded by one helper (``_validation.decode_utf8``).

The MTurk results reader and the keywords-file reader each had a copy of the
same decode-and-explain code; both now call the foundation's helper, so a
Latin-1 file gets the same kind of message (file, byte, line, what to do) from
either, and a byte-order mark is dropped by both.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import retest.sources.base as sources_base
import retest.stages.crowd.mturk as mturk
from retest.errors import InputValidationError


def test_latin1_files_get_the_same_message_from_both_readers(tmp_path: Path) -> None:
    kw = tmp_path / "keywords.txt"
    kw.write_bytes("tabby\ncaf\xe9\n".encode("latin-1"))
    res = tmp_path / "results.csv"
    res.write_bytes("AssignmentId,WorkerId\nA1,Tr\xe8s\n".encode("latin-1"))
    with pytest.raises(InputValidationError) as a:
        sources_base.read_keywords_file(kw)
    with pytest.raises(InputValidationError) as b:
        mturk.read_results(res)
    assert str(a.value).startswith(f"keywords file {kw} is not UTF-8 text (byte 0xe9 "
                                   "on line 2); ")  # fmt: skip
    assert str(b.value).startswith(f"{res} is not UTF-8 text (byte 0xe8 on line 2); ")


def test_a_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    kw = tmp_path / "keywords.txt"
    kw.write_bytes("\ufefftabby\nalley_cat\n".encode())
    assert list(sources_base.read_keywords_file(kw)) == ["tabby", "alley_cat"]


@pytest.mark.parametrize("module", [mturk, sources_base], ids=["mturk", "sources"])
def test_no_private_copy_of_the_decode(module: object) -> None:
    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    decodes = [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "decode"
        and any(
            isinstance(a, ast.Constant) and str(a.value).startswith("utf-8")
            for a in n.args
        )
    ]
    assert decodes == [], f"decode UTF-8 through _validation.decode_utf8: {decodes}"
