"""The layers of ``src/retest`` and the import graph between its packages.

``python docs/architecture_diagram.py`` rewrites the Mermaid block of
``docs/architecture.md`` from the code; ``--check`` exits 1 when the committed
block differs (``tests/unit/test_import_graph.py`` runs the same comparison, and
enforces the rules below on the same graph).

The graph counts every import: at module level, inside functions and under
``if TYPE_CHECKING:`` (a circle of types is still a circle). The one exception is
the root package's ``TYPE_CHECKING`` block: ``retest/__init__.py`` loads its public
names lazily and imports nothing at run time.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
DOC = ROOT / "docs" / "architecture.md"

# Layer of every top-level module or package of retest; imports point down only
# (to a lower number), or within a layer as SAME_LAYER allows.
LAYERS: dict[str, int] = {
    # foundation: contracts every layer relies on
    "errors": 0,
    "records": 0,
    "registry": 0,
    "config": 0,
    "names": 0,
    "_atomic": 0,
    "_native": 0,
    "_parallel": 0,
    "_validation": 0,
    "_output": 0,
    "_progress": 0,
    "_gc": 0,
    "_version": 0,
    # core: pure functions on arrays and records
    "dedup": 1,
    "sampling": 1,
    "labeling": 1,
    "evaluate": 1,
    "label_errors": 1,
    # adapters: files, models, the database, a Dask cluster
    "datasets": 2,
    "sources": 2,
    "models": 2,
    "store": 2,
    "cluster": 2,
    # the project layer
    "project": 3,
    # the stages, one package each
    "stages": 4,
    # edges
    "cli": 5,
    "web": 5,
    "demo": 5,
    "api": 5,
    "extend": 5,
    "__main__": 5,
}
LAYER_NAMES = ("foundation", "core", "adapters", "project", "stages", "edges")

# Packages whose modules are private (``_name.py``): other packages import the
# package (its ``__init__``), never a private module of it.
PRIVATE_PACKAGES = ("retest.project", "retest.cluster", "retest.stages.")


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported retest module (or a third-party top-level name)
    line: int


def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(src: Path = SRC) -> dict[str, Path]:
    return {module_name(p, src): p for p in sorted((src / "retest").rglob("*.py"))}


def _type_checking_lines(tree: ast.Module) -> set[int]:
    out: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                out.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return out


def imports(src: Path = SRC) -> Iterator[Import]:
    """Every import of every module, resolved to the module it names."""
    mods = modules(src)

    def resolve(name: str) -> str:
        while name not in mods and "." in name:
            name = name.rpartition(".")[0]
        return name

    for name, path in mods.items():
        tree = ast.parse(path.read_text())
        skip = _type_checking_lines(tree) if name == "retest" else set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if node.lineno not in skip:
                        yield Import(name, resolve(alias.name), node.lineno)
            elif isinstance(node, ast.ImportFrom) and node.lineno not in skip:
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    yield Import(
                        name, full if full in mods else resolve(base), node.lineno
                    )


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "retest":
        return None
    if len(parts) == 1:
        return 0  # the lazy facade: nothing at run time
    return LAYERS.get(parts[1])


def package_of(module: str) -> str:
    """The unit the diagram draws: ``retest.stages.<stage>`` or ``retest.<top>``."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "stages":
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def package_edges(src: Path = SRC) -> set[tuple[str, str]]:
    out = set()
    for imp in imports(src):
        if not imp.target.startswith("retest.") or imp.source == "retest":
            continue
        a, b = package_of(imp.source), package_of(imp.target)
        if a != b and b != "retest.stages":
            out.add((a, b))
    return out


def _short(pkg: str) -> str:
    return pkg.removeprefix("retest.")


def _node(pkg: str) -> str:
    return _short(pkg).replace(".", "_").strip("_") or "root"


def mermaid(src: Path = SRC) -> str:
    """The diagram: one box per layer, an arrow per package import across packages.

    Foundation modules are drawn as one box (everything imports them), and the
    edges' arrows are left out (they may import everything below; drawn, they
    would hide the rest).
    """
    edges = package_edges(src)
    pkgs = {package_of(m) for m in modules(src) if m != "retest"}
    pkgs.discard("retest.stages")

    def unit(pkg: str) -> str:
        return "foundation" if layer_of(pkg) == 0 else pkg

    lines = ["```mermaid", "flowchart BT"]
    for layer, title in reversed(list(enumerate(LAYER_NAMES))):
        members = sorted({unit(p) for p in pkgs if layer_of(p) == layer})
        lines.append(f"  subgraph {title}")
        for p in members:
            label = "errors, records, registry, config, names, _private helpers"
            if p != "foundation":
                label = _short(p)
            lines.append(f'    {_node(p)}["{label}"]')
        lines.append("  end")
    arrows = sorted(
        {
            (unit(a), unit(b))
            for a, b in edges
            if unit(b) != "foundation"
            and unit(a) != unit(b)
            and layer_of(a) != len(LAYER_NAMES) - 1
        }
    )
    lines += [f"  {_node(a)} --> {_node(b)}" for a, b in arrows]
    lines.append("```")
    return "\n".join(lines)


BEGIN = "<!-- diagram: generated by docs/architecture_diagram.py; do not edit -->"
END = "<!-- end of diagram -->"


def render(doc: str, src: Path = SRC) -> str:
    head, _, rest = doc.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{mermaid(src)}\n{END}{tail}"


def main(argv: list[str]) -> int:
    doc = DOC.read_text()
    new = render(doc)
    if "--check" in argv:
        if new != doc:
            print(
                "error: docs/architecture.md's diagram differs from the code; run "
                "python docs/architecture_diagram.py",
                file=sys.stderr,
            )
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
