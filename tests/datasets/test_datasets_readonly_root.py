"""Verifying a dataset folder never writes into it (Debian's folder is read-only
system data): checksums are cached under retest's own cache directory."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retest.cli.main import app

DEBIAN = Path("/usr/share/datasets/fashion-mnist")


def test_fetch_from_the_debian_folder_leaves_it_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not (DEBIAN / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    before = sorted(p.name for p in DEBIAN.iterdir())
    monkeypatch.setenv("RETEST_CACHE_DIR", str(tmp_path / "cache"))
    r = CliRunner().invoke(app, ["datasets", "fetch", "fashion_mnist"])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in DEBIAN.iterdir()) == before
    assert list((tmp_path / "cache" / "sha256").glob("*.json"))


def test_fetch_into_a_dataset_folder_writes_nothing_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same check on a copy, so it holds however the real folder was left:
    verifying the files of --root adds no file to it (the checksums go to
    retest's cache) and a second fetch reads them from there."""
    if not (DEBIAN / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    root = tmp_path / "fashion-mnist"
    root.mkdir()
    for f in sorted(DEBIAN.glob("*-ubyte.gz")):
        shutil.copy2(f, root / f.name)
    before = sorted(p.name for p in root.iterdir())
    monkeypatch.setenv("RETEST_CACHE_DIR", str(tmp_path / "cache"))
    for _ in range(2):
        r = CliRunner().invoke(app, ["datasets", "fetch", "fashion_mnist", "--root",
                                     str(root)])  # fmt: skip
        assert r.exit_code == 0, r.output
        assert sorted(p.name for p in root.iterdir()) == before
    assert list((tmp_path / "cache" / "sha256").glob("*.json"))
