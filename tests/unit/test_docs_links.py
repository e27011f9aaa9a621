"""References to docs/algorithms.md resolve to its headings; none to an outside spec.

Docstrings and comments cite the algorithm documentation as
``docs/algorithms.md#<anchor>`` (several anchors: ``docs/algorithms.md#a, #b``).
An anchor is the id GitHub gives a heading, so a renamed heading breaks the link
silently unless something checks it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "algorithms.md"
SCANNED_DIRS = ("src", "tests", "benchmarks")
SUFFIXES = (".py", ".md")
REF = re.compile(r"docs/algorithms\.md#([\w-]+)((?:, #[\w-]+)*)")
OLD_SPEC = re.compile(r"\bSPEC\b")  # as a word: not _SPECS or SUSPECT_KIND
SELF = Path(__file__).resolve()  # its docstrings show example references


def github_anchor(heading: str) -> str:
    """The id GitHub gives a Markdown heading: lower case, every character that is
    not a letter, digit, space, hyphen or underscore dropped, spaces → hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def heading_anchors(markdown: str) -> set[str]:
    """Anchors of every heading outside code fences; repeats get ``-1``, ``-2``, …"""
    out: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
        if m is None or fenced:
            continue
        base = github_anchor(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def scanned_files() -> list[Path]:
    files = [ROOT / "README.md"] if (ROOT / "README.md").is_file() else []
    for d in SCANNED_DIRS:
        for p in sorted((ROOT / d).rglob("*")):
            rel = p.relative_to(ROOT).parts
            if p.suffix not in SUFFIXES or not p.is_file() or p == SELF:
                continue
            if "__pycache__" in rel or any(x.endswith(".egg-info") for x in rel):
                continue
            files.append(p)
    return files


def references(text: str) -> list[tuple[int, str]]:
    """``(line number, anchor)`` of every docs/algorithms.md reference in ``text``."""
    out = []
    for m in REF.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        out.append((line, m.group(1)))
        out += [(line, a) for a in re.findall(r"#([\w-]+)", m.group(2))]
    return out


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Near-duplicates", "near-duplicates"),
        ("Train-test split", "train-test-split"),
        ("CIFAR-10 pickles", "cifar-10-pickles"),
        ("CIFAR-10.1 arrays", "cifar-101-arrays"),
        ("What is a near-duplicate", "what-is-a-near-duplicate"),
        ("Using `knn` (exact)", "using-knn-exact"),
    ],
)
def test_github_anchor_rules(heading: str, anchor: str) -> None:
    assert github_anchor(heading) == anchor


def test_repeated_headings_get_numbered_anchors() -> None:
    md = "# A\n## Notes\n```\n# not a heading\n```\n### Notes\n"
    assert heading_anchors(md) == {"a", "notes", "notes-1"}


def test_links_inside_the_document_resolve() -> None:
    text = DOC.read_text(encoding="utf-8")
    known = heading_anchors(text)
    links = re.findall(r"\]\(#([\w-]+)\)", text)
    assert links, "docs/algorithms.md has no table of contents or cross-links"
    assert sorted(set(links) - known) == []


def test_every_reference_resolves_to_a_heading() -> None:
    known = heading_anchors(DOC.read_text(encoding="utf-8"))
    broken = []
    in_src = 0
    for path in scanned_files():
        for line, anchor in references(path.read_text(encoding="utf-8")):
            in_src += path.is_relative_to(ROOT / "src")
            if anchor not in known:
                broken.append(f"{path.relative_to(ROOT)}:{line}: #{anchor}")
    assert broken == [], "references to missing headings:\n" + "\n".join(broken)
    assert in_src >= 50, f"only {in_src} references in src/ point to the docs"


def test_no_reference_to_the_outside_spec() -> None:
    left = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in scanned_files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OLD_SPEC.search(line)
    ]
    assert left == [], (
        "cite docs/algorithms.md#<section> instead of the spec outside the "
        "repository:\n" + "\n".join(left)
    )
