"""retest.toml sections the commands honour ([sources.NAME], [keywords]) and the
option values `retest source` / `retest reference` refuse on one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from retest.cli.main import app
from retest.datasets.tinyimages import write_tinyimages
from retest.project import Project

runner = CliRunner()


def _run(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, list(args))
    return res.exit_code, res.output


def _one_error_line(out: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    return lines[0]


def _npz(path: Path, n: int, *, seed: int, keywords: list[str] | None = None) -> Path:
    rng = np.random.default_rng(seed)
    data: dict[str, object] = {
        "images": rng.integers(0, 256, (n, 8, 8, 3), dtype=np.uint8),
        "labels": np.arange(n) % 2,
    }
    if keywords is not None:
        data["keywords"] = np.array(keywords)
    np.savez(path, **data)  # type: ignore[arg-type]
    return path


def _add_to_config(root: Path, section: str, body: str) -> None:
    toml = root / "retest.toml"
    text = toml.read_text()
    header = f"[{section}]\n"
    if header in text:
        text = text.replace(header, header + body)
    else:
        text += f"\n{header}{body}"
    toml.write_text(text)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    code, out = _run("init", str(root), "--classes", "cat,dog")
    assert code == 0, out
    return root


# -- [sources.NAME]


def test_source_add_name_ingests_the_configured_source(root: Path) -> None:
    _npz(root / "pool.npz", 6, seed=1)
    _add_to_config(root, "sources.pool", 'kind = "arrays"\npath = "pool.npz"\n')
    code, out = _run("source", "add", "pool", "-p", str(root), "--json")
    assert code == 0, out
    rep = json.loads(out)
    assert (rep["name"], rep["kind"], rep["new"]) == ("pool", "arrays", 6)
    assert Path(rep["path"]) == (root / "pool.npz").resolve()
    with Project.open(root) as p:
        rows = list(p.store.candidates.iter())
    assert len(rows) == 6 and {r.source for r in rows} == {"pool"}


def test_configured_options_apply_and_the_command_line_overrides(root: Path) -> None:
    imgs = root / "imgs"
    imgs.mkdir()
    rng = np.random.default_rng(3)
    from PIL import Image

    for i in range(3):
        arr = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
        Image.fromarray(arr).save(imgs / f"{i}.png")
    _add_to_config(
        root, "sources.pics", 'kind = "folder"\npath = "imgs"\nclass = "dog"\n'
    )
    code, out = _run("source", "add", "pics", "--class", "cat", "-p", str(root))
    assert code == 0, out
    with Project.open(root) as p:
        cat = next(c.id for c in p.store.classes.list() if c.name == "cat")
        assert {r.class_id for r in p.store.candidates.iter()} == {cat}


def test_unknown_configured_name_gets_a_suggestion(root: Path) -> None:
    _add_to_config(root, "sources.pool", 'kind = "arrays"\npath = "pool.npz"\n')
    code, out = _run("source", "add", "pol", "-p", str(root))
    line = _one_error_line(out)
    assert code == 2 and "Did you mean 'pool'?" in line and "[sources.pol]" in line
    code, out = _run("source", "add", "folder", "-p", str(root))
    line = _one_error_line(out)
    assert code == 2 and "needs a PATH" in line
    _add_to_config(root, "sources.bad", 'kind = "foldr"\npath = "x"\n')
    code, out = _run("source", "add", "bad", "-p", str(root))
    line = _one_error_line(out)
    assert code == 2 and "retest.toml: [sources.bad] kind: Unknown" in line
    assert "Did you mean 'folder'?" in line


def test_tinyimages_source_defaults_to_the_configured_keywords(root: Path) -> None:
    kws = ["cat_a"] * 4 + ["dog_a"] * 3 + ["fox"] * 5
    ti = np.random.default_rng(5).integers(0, 256, (len(kws), 32, 32, 3), np.uint8)
    write_tinyimages(root / "ti", ti, kws)
    _add_to_config(root, "keywords", 'cat = ["cat_a"]\ndog = ["dog_a"]\n')
    _add_to_config(root, "sources.tiny", 'kind = "tinyimages"\npath = "ti"\n')
    code, out = _run("source", "add", "tiny", "-p", str(root), "--json")
    assert code == 0, out
    assert json.loads(out)["new"] == 7  # cat_a and dog_a records, not fox
    with Project.open(root) as p:
        names = {c.id: c.name for c in p.store.classes.list()}
        got = sorted((r.keyword, names[r.class_id]) for r in p.store.candidates.iter())
    assert got == [("cat_a", "cat")] * 4 + [("dog_a", "dog")] * 3


# -- option values of `retest source add`


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["source", "add", "foldr", "x"], "Unknown candidate source 'foldr'. Did you mean 'folder'?"),
        (["source", "add", "folder", "x", "--batch-size", "0"],
         "--batch-size must be an integer >= 1"),
        (["source", "add", "folder", "x", "--labels", "l.idx"],
         "--labels applies to source kind 'idx' only"),
        (["source", "add", "folder", "x", "--keywords", "a"],
         "--keywords applies to source kind 'tinyimages' only"),
        (["source", "add", "tinyimages", "x", "--keywords", " , "],
         "--keywords needs at least one value"),
        (["source", "add", "folder", "x", "--class", "dgo"],
         "class 'dgo' is not a class of the project. Did you mean 'dog'?"),
        (["reference", "add", "arrays", "x.npz", "--split", "validation"],
         "--split must be one of train, test. Got 'validation'"),
        (["reference", "add", "arays", "x.npz", "--split", "train"],
         "Unknown reference kind 'arays'. Did you mean 'arrays'?"),
        (["reference", "add", "cifar", "x", "--split", "test", "--labels", "l"],
         "--labels applies to kind 'idx' only"),
        (["reference", "show", "--top", "0"], "--top must be an integer >= 1"),
        (["reference", "keywords", "ti", "--only", ","],
         "--only needs at least one keyword"),
    ],
)  # fmt: skip
def test_option_values_are_refused_on_one_line(
    root: Path, args: list[str], needle: str
) -> None:
    code, out = _run(*args, "-p", str(root))
    line = _one_error_line(out)
    assert code == 2 and needle in line
    with Project.open(root) as p:  # nothing was ingested or registered
        assert p.store.candidates.count() == 0 and p.store.references.count() == 0


def test_reference_split_validation_was_accepted_before(root: Path) -> None:
    _npz(root / "ref.npz", 4, seed=2)
    code, _ = _run("reference", "add", "arrays", str(root / "ref.npz"),
                   "--split", "validation", "-p", str(root))  # fmt: skip
    assert code == 2
    code, out = _run("reference", "add", "arrays", str(root / "ref.npz"),
                     "--split", "train", "-p", str(root), "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["n"] == 4


# -- [keywords] in `retest plan`


def test_plan_uses_configured_keywords_when_the_reference_has_none(root: Path) -> None:
    _npz(root / "ref.npz", 4, seed=2)
    assert _run("reference", "add", "arrays", str(root / "ref.npz"), "--split",
                "train", "-p", str(root))[0] == 0  # fmt: skip
    code, out = _run("plan", "--rule", "v6", "--size", "10", "-p", str(root))
    assert code == 1 and "[keywords]" in _one_error_line(out)
    _add_to_config(
        root, "keywords", 'cat = ["tabby", "kitten"]\ndog = ["puppy", "hound", "pug"]\n'
    )
    code, out = _run("plan", "--rule", "v6", "--size", "10", "-p", str(root), "--json")
    assert code == 0, out
    res = json.loads(out)
    assert res["keyword_source"] == "retest.toml [keywords]"
    # equal weights: 5 per class spread evenly, list order breaks ties
    assert res["allocation"] == {
        "cat": {"tabby": 3, "kitten": 2},
        "dog": {"puppy": 2, "hound": 2, "pug": 1},
    }
    saved = json.loads((root / "reports" / "plan_v6.json").read_text())
    assert saved["keyword_source"] == "retest.toml [keywords]"
    code, out = _run("plan", "--rule", "v4", "-p", str(root))
    assert code == 2 and "use --rule v6" in _one_error_line(out)


def test_configured_keywords_must_cover_every_class(root: Path) -> None:
    _npz(root / "ref.npz", 4, seed=2)
    _run("reference", "add", "arrays", str(root / "ref.npz"), "--split", "train",
         "-p", str(root))  # fmt: skip
    _add_to_config(root, "keywords", 'cat = ["tabby"]\n')
    code, out = _run("plan", "--rule", "v6", "--size", "10", "-p", str(root))
    assert code == 2 and "no keywords for classes ['dog']" in _one_error_line(out)


def test_reference_keywords_win_over_configured_ones(root: Path) -> None:
    _npz(root / "ref.npz", 4, seed=2, keywords=["tabby", "puppy", "tabby", "pug"])
    assert _run("reference", "add", "arrays", str(root / "ref.npz"), "--split",
                "train", "-p", str(root))[0] == 0  # fmt: skip
    _add_to_config(root, "keywords", 'cat = ["kitten"]\ndog = ["hound"]\n')
    code, out = _run("plan", "--rule", "v6", "--size", "4", "-p", str(root), "--json")
    assert code == 0, out
    res = json.loads(out)
    assert res["keyword_source"] == "reference"
    assert res["allocation"] == {"cat": {"tabby": 2}, "dog": {"puppy": 1, "pug": 1}}


# -- option help naming retest.toml sections


def _commands(
    cmd: Any, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_help_shows_the_retest_toml_sections_it_names() -> None:
    """Rich reads `[seeds]` as markup and drops it: an option's help that names a
    section must show it, or the user cannot tell where the default comes from."""
    import re

    import typer

    checked, missing = 0, []
    for path, cmd in _commands(typer.main.get_command(app)):
        named = {
            m
            for p in getattr(cmd, "params", [])
            for m in re.findall(r"\[(thresholds|seeds|keywords|sources[^\]]*)\]", p.help or "")
        }  # fmt: skip
        if not named:
            continue
        out = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "400"}).output
        checked += 1
        missing += [f"{' '.join(path)}: [{m}]" for m in named if f"[{m}]" not in out]
    assert checked >= 4 and not missing, missing
