"""Every text file a user hands over is decoded by ``_validation.decode_utf8``.

retest.toml had its own copy of the decode-and-explain code (with no byte-order
mark handling), and several JSON/CSV readers caught ``UnicodeDecodeError`` and
printed only its class name. Now the settings file, the model-names CSV, the
keyword counts, ``--nearest``, the imagefolder class index, the near-duplicate
review CSV, the label-error list and the split's manifest all go through the one
helper: the same message (file, byte, line, what to do) and a BOM dropped.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import retest
from retest.errors import ConfigError, InputValidationError
from retest.project import Project

SRC = Path(retest.__file__).parent
#: Not files a user hands over: HTTP request bodies (the web answers 422).
NOT_FILE_READERS = {"web"}


def _strict_utf8_decodes(tree: ast.AST) -> list[int]:
    """Lines calling ``.decode("utf-8…")`` without an ``errors`` argument, or
    catching ``UnicodeDecodeError``: a private copy of the helper."""
    hits = []
    for n in ast.walk(tree):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "decode"
            and n.args
            and isinstance(n.args[0], ast.Constant)
            and str(n.args[0].value).lower().startswith("utf")
            and len(n.args) == 1
            and not n.keywords
        ):
            hits.append(n.lineno)
        if isinstance(n, ast.ExceptHandler) and n.type is not None:
            names = n.type.elts if isinstance(n.type, ast.Tuple) else [n.type]
            if any(
                isinstance(x, ast.Name) and x.id == "UnicodeDecodeError" for x in names
            ):
                hits.append(n.lineno)
    return hits


def test_no_module_decodes_utf8_itself() -> None:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[0] in NOT_FILE_READERS or rel == Path("_validation.py"):
            continue
        hits = _strict_utf8_decodes(ast.parse(path.read_text(encoding="utf-8")))
        if hits:
            found[str(rel)] = hits
    # files retest wrote itself and reads back: an output marker, an export's or a
    # pixel array's JSON, a cached predictions file, a Dask scheduler file (a
    # damaged one is "not ours" or corrupt data, not a user's text), and the
    # review CSV's "is this ours?" probe
    allowed = {"_output.py", "stages/export/_export.py", "stages/dedup/_review_csv.py",
               "store/artifacts.py", "datasets/predictions.py",
               "cluster/_dask.py"}  # fmt: skip
    assert {k: v for k, v in found.items() if k not in allowed} == {}


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    Project.init(root, name="t", classes=["cat", "dog"]).close()
    return root


def test_retest_toml_with_a_byte_order_mark_opens(tmp_path: Path) -> None:
    """Notepad saves UTF-8 with a BOM; tomllib alone refuses it (main did)."""
    root = _project(tmp_path)
    toml = root / "retest.toml"
    toml.write_bytes("\ufeff".encode() + toml.read_bytes())
    with Project.open(root) as p:
        assert list(p.class_names) == ["cat", "dog"]


def test_retest_toml_latin1_is_a_config_error_from_the_helper(tmp_path: Path) -> None:
    root = _project(tmp_path)
    toml = root / "retest.toml"
    toml.write_bytes(toml.read_bytes() + "# caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError) as err:
        Project.open(root)
    lines = toml.read_bytes().count(b"\n")
    assert str(err.value) == (
        f"{toml} is not UTF-8 text (byte 0xe9 on line {lines}); TOML files must be "
        "UTF-8. Save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8`) and run again."
    )


def test_review_csv_latin1_names_file_byte_and_line(tmp_path: Path) -> None:
    from retest.stages.dedup import read_review_file

    f = tmp_path / "q.csv"
    f.write_bytes(
        "candidate,class,metric,reference,distance,duplicate\n"
        "c1,chat,l2,test:0,1.0,oui\nc2,caf\xe9,l2,test:1,2.0,no\n".encode("latin-1")
    )
    with pytest.raises(InputValidationError, match=r"review file .*q\.csv is not "
                       r"UTF-8 text \(byte 0xe9 on line 3\)"):  # fmt: skip
        read_review_file(f)
