"""``retest datasets`` through its real CLI."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from retest.cli.main import app

runner = CliRunner()


def test_list_json() -> None:
    res = runner.invoke(app, ["datasets", "list", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["name"] for r in rows] == [
        "cifar10",
        "cifar10_1",
        "fashion_mnist",
        "imagenet_v2",
    ]
    assert rows[1]["versions"] == ["v4", "v6"]


def test_info_of_absent_dataset(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "datasets",
            "info",
            "cifar10_1",
            "--root",
            str(tmp_path),
            "--version",
            "v4",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["ready"] is False and data["counts"] == {}
    assert [f["status"] for f in data["files"]] == ["missing", "missing"]
    assert data["files"][0]["sha256"].startswith("5aaedc26")
    res = runner.invoke(app, ["datasets", "info", "cifar10_1", "--root", str(tmp_path)])
    assert "not fetched: run `retest datasets fetch cifar10_1" in res.stdout


def test_fetch_refuses_a_mirror_serving_other_bytes(
    http_server, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    buf = io.BytesIO()
    np.save(buf, np.zeros((3, 32, 32, 3), dtype=np.uint8))
    http_server.add("/cifar10.1_v6_data.npy", buf.getvalue())
    res = runner.invoke(
        app,
        [
            "datasets",
            "fetch",
            "cifar10_1",
            "--root",
            str(tmp_path),
            "--mirror",
            http_server.url,
        ],
    )
    assert res.exit_code == 1
    assert "error:" in res.stderr and "cifar10.1_v6_data.npy" in res.stderr
    assert "expected 2997188e" in res.stderr
    assert not (tmp_path / "cifar10.1_v6_data.npy").exists()


def test_unknown_names_exit_2() -> None:
    res = runner.invoke(app, ["datasets", "info", "cifar10.1"])
    assert res.exit_code == 2 and "Did you mean 'cifar10_1'" in res.stderr
    res = runner.invoke(app, ["datasets", "fetch", "cifar10", "--version", "v6"])
    assert res.exit_code == 2 and "cifar10 has no version 'v6'" in res.stderr


def test_fetch_and_info_use_debian_copy(fashion_mnist_dir: Path) -> None:
    res = runner.invoke(
        app,
        [
            "datasets",
            "fetch",
            "fashion_mnist",
            "--root",
            str(fashion_mnist_dir),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert set(json.loads(res.stdout)["files"].values()) == {"ok"}
    res = runner.invoke(
        app,
        [
            "datasets",
            "info",
            "fashion_mnist",
            "--root",
            str(fashion_mnist_dir),
            "--json",
        ],
    )
    counts = json.loads(res.stdout)["counts"]
    assert counts["train"] == {"n": 60000, "per_class": [6000] * 10}
    assert counts["test"]["per_class"] == [1000] * 10
