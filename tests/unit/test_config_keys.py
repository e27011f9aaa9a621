"""retest.toml: every key is known (or refused with a suggestion) and typed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import retest.config
from retest.cli.main import app
from retest.config import (
    KNOWN_KEYS,
    SEED_KEYS,
    THRESHOLD_KEYS,
    ProjectConfig,
    load_config,
    save_config,
)
from retest.errors import ConfigError, UnknownNameError

BASE = 'classes = ["cat", "dog"]\n\n[project]\nname = "demo"\n'


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "retest.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("text", "key", "hint"),
    [
        ('classes = ["a"]\n[projetc]\nname = "x"\n', "[projetc]", "[project]"),
        (BASE + "[treshold]\nl2 = 1.0\n", "[treshold]", "[thresholds]"),
        ('clases = ["a"]\n' + BASE, "`clases`", "`classes`"),
        (BASE.replace("name =", "nmae ="), "`nmae`", "`name`"),
        (BASE + "[thresholds]\ndssm = 0.2\n", "`dssm`", "`dssim`"),
        (BASE + "[thresholds]\nselection_frequncy = 0.5\n", "`selection_frequncy`",
         "`selection_frequency`"),
        (BASE + "[seeds]\nsampel = 3\n", "`sampel`", "`sample`"),
        (BASE + '[sources.t]\nkind = "folder"\npath = "x"\nlabel = "a"\n', "`label`",
         "`labels`"),
        (BASE + '[keywords]\ncta = ["tabby"]\n', "`cta`", "`cat`"),
    ],
)  # fmt: skip
def test_unknown_keys_are_refused_with_a_suggestion(
    tmp_path: Path, text: str, key: str, hint: str
) -> None:
    p = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(p)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{p}: ")
    assert key in msg and f"Did you mean {hint}?" in msg


def test_the_misspelt_project_section_no_longer_reads_as_a_missing_name(
    tmp_path: Path,
) -> None:
    p = _write(tmp_path, '[projetc]\nname = "x"\n')
    with pytest.raises(ConfigError, match=r"unknown section \[projetc\]"):
        load_config(p)


def test_unknown_key_without_a_close_match_lists_the_known_ones(tmp_path: Path) -> None:
    p = _write(tmp_path, BASE + "[seeds]\nzzz = 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(p)
    msg = str(info.value)
    assert "Did you mean" not in msg
    assert "Known keys: " + ", ".join(SEED_KEYS) in msg


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ("[thresholds]\nl2 = true\n", r"\[thresholds\] l2 must be a finite number"),
        ("[thresholds]\ndssim = -1.0\n", r"dssim must be a finite number >= 0"),
        ("[thresholds]\nselection_frequency = 1.5\n", r"fraction in \[0, 1\]"),
        ("[seeds]\nsample = -1\n", r"\[seeds\] sample must be an integer >= 0"),
        ("[seeds]\nsplit = true\n", r"split must be an integer"),
        ('[sources.t]\nkind = "folder"\n', r"\[sources.t\] needs `path`"),
        ('[sources.t]\npath = "x"\n', r"\[sources.t\] needs `kind`"),
        ('[sources.t]\nkind = "folder"\npath = "x"\nbatch_size = 0\n',
         r"batch_size must be an integer >= 1"),
        ('[sources.t]\nkind = "tinyimages"\npath = "x"\nkeywords = "a,b"\n',
         r"keywords must be a non-empty list"),
        ("[sources]\nt = 3\n", r"\[sources.t\] must be a table"),
        ('[keywords]\ncat = "tabby"\n', r"\[keywords\] cat must be a list"),
        ("[thresholds]\n", None),
    ],
)  # fmt: skip
def test_values_are_typed(tmp_path: Path, extra: str, match: str | None) -> None:
    p = _write(tmp_path, BASE + extra)
    if match is None:
        assert load_config(p).thresholds == {}
        return
    with pytest.raises(ConfigError, match=match):
        load_config(p)


def test_threshold_and_seed_accessors(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        BASE + "[thresholds]\nl2 = 5\nnear_original = 2.5e5\n[seeds]\nsample = 7\n",
    )
    cfg = load_config(p)
    assert cfg.threshold("l2") == 5.0 and isinstance(cfg.threshold("l2"), float)
    assert cfg.threshold("near_original") == 2.5e5
    assert cfg.threshold("warp") is None  # derived from the data by the command
    assert cfg.threshold("selection_frequency") == 0.7  # fixed default
    assert cfg.seed("sample") == 7 and cfg.seed("split") is None
    with pytest.raises(UnknownNameError, match="Did you mean 'dssim'"):
        cfg.threshold("ssim")
    with pytest.raises(UnknownNameError, match="Did you mean 'sample'"):
        cfg.seed("samples")
    cfg2 = ProjectConfig("x", ("a",), thresholds={"selection_frequency": 0.5})
    assert cfg2.threshold("selection_frequency") == 0.5


def test_constructor_refuses_unknown_names_too() -> None:
    with pytest.raises(ConfigError, match=r"unknown key `ssim` in \[thresholds\]"):
        ProjectConfig("x", ("a",), thresholds={"ssim": 0.5})
    with pytest.raises(ConfigError, match=r"unknown key `seed` in \[seeds\]"):
        ProjectConfig("x", ("a",), seeds={"seed": 1})


def test_every_known_key_is_documented_in_the_module_docstring() -> None:
    doc = retest.config.__doc__ or ""
    for section, keys in KNOWN_KEYS.items():
        if section.startswith("sources"):
            layout = doc[doc.index("[sources.") :]
        elif section:
            layout = doc[doc.index(f"[{section}]") :]
        else:
            layout = doc
        for key in keys:
            assert re.search(rf"^\s*\[?{key}\b", layout, re.M), (section, key)
    assert set(THRESHOLD_KEYS) >= {"l2", "features", "dssim", "warp"}
    assert {"near_original", "selection_frequency"} <= set(THRESHOLD_KEYS)
    assert all(v.strip() for keys in KNOWN_KEYS.values() for v in keys.values())


def test_full_config_round_trips(tmp_path: Path) -> None:
    cfg = ProjectConfig(
        name="demo",
        classes=("cat", "dog"),
        keywords={"cat": ("tabby",)},
        sources={
            "tiny": {"kind": "tinyimages", "path": "tiny", "keywords": ["tabby"]},
            "f": {"kind": "folder", "path": "imgs", "class": "dog", "batch_size": 8},
        },
        thresholds=dict.fromkeys(THRESHOLD_KEYS, 0.5),
        seeds=dict.fromkeys(SEED_KEYS, 3),
    )
    save_config(tmp_path / "retest.toml", cfg)
    assert load_config(tmp_path / "retest.toml") == cfg


def test_cli_reports_a_bad_key_on_one_line_with_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    root = tmp_path / "p"
    assert runner.invoke(app, ["init", str(root), "--classes", "a,b"]).exit_code == 0
    toml = root / "retest.toml"
    text = toml.read_text()
    assert "[seeds]\n" in text
    toml.write_text(text.replace("[seeds]\n", "[seeds]\nsampel = 1\n"))
    res = runner.invoke(app, ["status", "--project", str(root)])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "retest.toml" in lines[0] and "Did you mean `sample`?" in lines[0]
    assert "`sampel` in [seeds]." in lines[0]  # brackets are text, not markup
