"""The README's "Use it from Python" section runs and prints what it shows.

Every ```python block of the section is executed from the repository root (where
the README's relative paths point) and must be followed by a plain ``` block with
its printed output, compared as doctest compares (whitespace normalised, ``...``
matches anything).
"""

from __future__ import annotations

import contextlib
import doctest
import io
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SECTION = "## Use it from Python"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)


def section_blocks(readme: str) -> list[tuple[str, str]]:
    """(code, expected output) of each ```python block in the section."""
    start = readme.index(SECTION + "\n")
    nxt = readme.find("\n## ", start + len(SECTION))
    text = readme[start : nxt if nxt >= 0 else len(readme)]
    fences = [
        (m.group(1), m.group(2), m.start(), m.end()) for m in _FENCE.finditer(text)
    ]
    out = []
    for n, (lang, body, _, end) in enumerate(fences):
        if lang != "python":
            continue
        following = fences[n + 1] if n + 1 < len(fences) else None
        if following is None or following[0] != "" or text[end : following[2]].strip():
            raise AssertionError(
                f"README {SECTION!r}: python block {body.splitlines()[0]!r}... must be "
                "followed directly by a plain ``` block with its output."
            )
        out.append((body, following[1]))
    return out


BLOCKS = section_blocks((REPO / "README.md").read_text())


def _needs(code: str) -> list[str]:
    """Fixtures (from tests/conftest.py) that skip when the block's data is absent."""
    needs = []
    if "../shared/data" in code:
        needs.append("shared_data")
    if 'load_dataset("fashion_mnist"' in code:
        needs.append("fashion_mnist_dir")
    return needs


def test_section_has_examples() -> None:
    assert len(BLOCKS) >= 2
    used = "\n".join(code for code, _ in BLOCKS)
    for name in ("compare", "find_label_errors", "knn", "ssim"):
        assert f"retest.{name}(" in used


@pytest.mark.slow
@pytest.mark.parametrize(
    ("code", "expected"),
    BLOCKS,
    ids=[f"block{i}" for i in range(len(BLOCKS))],
)
def test_block_prints_what_the_readme_shows(
    code: str,
    expected: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for fixture in _needs(code):
        request.getfixturevalue(fixture)
    monkeypatch.chdir(REPO)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    got = buf.getvalue()
    checker = doctest.OutputChecker()
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    assert checker.check_output(expected, got, flags), (
        f"README output differs.\nshown:\n{expected}\nprinted:\n{got}"
    )
