"""A dataset typed with hyphens (``fashion-mnist``), as README's naming rule and
``retest init --classes-from fashion-mnist`` have users write it, is the
registered ``fashion_mnist`` for every command that takes a dataset name."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from checkout_cli import RETEST  # type: ignore[import-not-found]
from retest.datasets.base import dataset_name
from retest.errors import UnknownNameError
from retest.project import Project


def _run(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RETEST, *map(str, args)], capture_output=True, text=True, check=False
    )


def test_hyphen_spelling_maps_to_the_registered_name() -> None:
    assert dataset_name("fashion-mnist") == "fashion_mnist"
    assert dataset_name("cifar10-1") == "cifar10_1"
    assert dataset_name("fashion_mnist") == "fashion_mnist"
    # unknown names are left alone, so the lookup still names them and suggests
    assert dataset_name("fashion-mnst") == "fashion-mnst"
    from retest.datasets.base import get_dataset

    with pytest.raises(UnknownNameError, match=r"fashion-mnst.*fashion_mnist"):
        get_dataset("fashion-mnst")


def test_reference_add_and_info_take_the_hyphen_spelling(
    tmp_path: Path, fashion_mnist_dir: Path
) -> None:
    proj = tmp_path / "p"
    init = _run("init", proj, "--classes-from", "fashion-mnist")
    assert init.returncode == 0, init.stderr
    info = _run("datasets", "info", "fashion-mnist", "--root", fashion_mnist_dir)
    assert info.returncode == 0, info.stderr
    assert "10,000" in info.stdout or "10000" in info.stdout
    add = _run(
        "reference", "add", "fashion-mnist", fashion_mnist_dir,
        "--split", "test", "--project", proj,
    )  # fmt: skip
    assert add.returncode == 0, add.stderr
    with Project.open(proj) as p:
        assert sum(1 for _ in p.store.references.list()) == 10_000
    bad = _run(
        "reference", "add", "fashion-mnst", fashion_mnist_dir,
        "--split", "test", "--project", proj,
    )  # fmt: skip
    assert bad.returncode in (1, 2) and "fashion_mnist" in bad.stderr
    assert "Traceback" not in bad.stderr
