"""The shape of ``src/retest``: layers, no import circles, a web app that only serves.

The graph and the layer table are those of ``docs/architecture_diagram.py`` (the
script that draws docs/architecture.md's diagram), so the rules, the doc and the
code cannot drift apart. Imports inside functions and under ``TYPE_CHECKING``
count: they hide a circle, they do not remove it.

Rules (docs/architecture.md):

* every module belongs to a layer; an import points to a lower layer, or stays in
  its layer as follows;
* same layer: the foundation's modules, and a package's own modules, import each
  other freely; core and adapter packages may import another package of their
  layer; a stage imports another stage only through that stage's package
  (``retest.stages.dedup``), never its private modules; the web app imports no
  other edge (the CLI may start the web app and the demo);
* private modules (``_name.py``) of ``retest.project``, ``retest.cluster`` and the
  stage packages are imported only from inside their package;
* no circle among modules;
* the web package imports neither ``sqlite3`` nor the SQLite store, nor any
  stage: it serves, and reads and writes project state through ``retest.project``;
* no module over 1,000 lines without a reason written at its top.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _load_diagram() -> ModuleType:
    name = "architecture_diagram"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, ROOT / "docs" / "architecture_diagram.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


arch = _load_diagram()
IMPORTS = list(arch.imports())
MODULES = arch.modules()


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _edges(imports: list[object]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for imp in imports:
        if imp.target in MODULES and imp.target != imp.source:  # type: ignore[attr-defined]
            out.setdefault(imp.source, set()).add(imp.target)  # type: ignore[attr-defined]
    return out


def test_cycle_finder_finds_function_level_circles() -> None:
    # the check itself: a circle closed only inside a function is found
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"]
    ]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles() -> None:
    cycles = _cycles(_edges(IMPORTS))
    assert not cycles, "import circles (function-level imports included): " + "; ".join(
        " <-> ".join(c) for c in cycles
    )


def test_every_module_has_a_layer() -> None:
    missing = sorted(m for m in MODULES if arch.layer_of(m) is None)
    assert not missing, (
        f"modules without a layer: {missing}; add their package to LAYERS in "
        "docs/architecture_diagram.py"
    )


def _same_layer_violation(src: str, dst: str) -> str | None:
    a, b = arch.package_of(src), arch.package_of(dst)
    layer = arch.layer_of(src)
    if a == b or layer == 0:
        return None
    if layer in (1, 2):
        return None  # core/adapter packages may use each other (no circle: tested)
    if layer == 4:
        if dst != b:
            return f"{src} imports {dst}: import the stage's package {b}"
        return None
    if a == "retest.web":
        return f"{src} imports {dst}: the web app imports no other edge"
    return None  # the CLI starts the web app and the demo (no circle: tested)


def test_imports_point_one_way() -> None:
    bad = []
    for imp in IMPORTS:
        src_layer, dst_layer = arch.layer_of(imp.source), arch.layer_of(imp.target)
        if dst_layer is None or src_layer is None:
            continue
        where = f"{imp.source}:{imp.line}"
        if dst_layer > src_layer:
            bad.append(
                f"{where} (layer {src_layer}) imports {imp.target} (layer {dst_layer})"
            )
        elif dst_layer == src_layer:
            why = _same_layer_violation(imp.source, imp.target)
            if why:
                bad.append(f"{where}: {why}")
    assert not bad, "imports must point towards the core:\n" + "\n".join(bad)


def test_private_modules_stay_inside_their_package() -> None:
    bad = []
    for imp in IMPORTS:
        pkg, _, last = imp.target.rpartition(".")
        if not last.startswith("_") or last.startswith("__"):
            continue
        if not (
            pkg in arch.PRIVATE_PACKAGES[:2] or pkg.startswith(arch.PRIVATE_PACKAGES[2])
        ):
            continue
        if not (imp.source == pkg or imp.source.startswith(pkg + ".")):
            bad.append(f"{imp.source}:{imp.line} imports {imp.target}; import {pkg}")
    assert not bad, "\n".join(bad)


def test_web_imports_neither_sqlite3_nor_the_sqlite_store() -> None:
    bad = [
        f"{imp.source}:{imp.line} imports {imp.target}"
        for imp in IMPORTS
        if imp.source.startswith("retest.web")
        and (
            imp.target == "sqlite3"
            or imp.target.startswith(("retest.store.sqlite", "retest.store._sqlite"))
        )
    ]
    assert not bad, "the web app goes through retest.project:\n" + "\n".join(bad)


def test_web_imports_no_stage() -> None:
    bad = [
        f"{imp.source}:{imp.line} imports {imp.target}"
        for imp in IMPORTS
        if imp.source.startswith("retest.web")
        and (imp.target == "retest.stages" or imp.target.startswith("retest.stages."))
    ]
    assert not bad, (
        "the web app only serves; what it reads or writes lives in retest.project:\n"
        + "\n".join(bad)
    )


def test_third_party_imports_are_seen() -> None:
    # the graph records non-retest imports too (what the sqlite3 rule relies on)
    assert any(
        imp.target == "sqlite3" and imp.source.startswith("retest.store")
        for imp in IMPORTS
    )


REASON = "Over 1,000 lines because"


def test_no_module_over_1000_lines_without_a_reason() -> None:
    long = []
    for path in MODULES.values():
        text = path.read_text()
        if text.count("\n") > 1000 and REASON not in "\n".join(text.splitlines()[:40]):
            long.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    assert not long, (
        f"split these, or write '{REASON} …' in their first 40 lines: {long}"
    )


def test_architecture_diagram_is_current() -> None:
    doc = arch.DOC.read_text()
    assert arch.BEGIN in doc and arch.END in doc
    assert arch.render(doc) == doc, (
        "docs/architecture.md's diagram differs from the code; run "
        "python docs/architecture_diagram.py"
    )
