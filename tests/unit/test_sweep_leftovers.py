"""Two tracebacks a careless-user sweep of this session's main found, now one line."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest

from checkout_cli import RETEST  # type: ignore[import-not-found]
from retest import find_label_errors
from retest.errors import ConfigError


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RETEST, *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def _one_error_line(res: subprocess.CompletedProcess[str]) -> str:
    out = res.stdout + res.stderr
    assert "Traceback" not in out, out
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    return lines[0]


def test_serve_on_a_busy_port_is_one_line(tmp_path: Path) -> None:
    assert _run("init", "proj", "--classes", "a,b", cwd=tmp_path).returncode == 0
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = _run("serve", "-p", "proj", "--port", str(port), cwd=tmp_path)
    assert res.returncode == 2
    line = _one_error_line(res)
    assert f"127.0.0.1:{port}" in line and "--port" in line


def test_serve_on_a_host_that_is_not_this_machine_is_one_line(tmp_path: Path) -> None:
    assert _run("init", "proj", "--classes", "a,b", cwd=tmp_path).returncode == 0
    res = _run("serve", "-p", "proj", "--host", "999.1.1.1", cwd=tmp_path)
    assert res.returncode == 2
    assert "'999.1.1.1'" in _one_error_line(res)


def test_a_huge_min_examples_per_class_is_refused(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    labels = np.arange(40) % 4
    probs = rng.dirichlet(np.ones(4), 40)
    np.save(tmp_path / "labels.npy", labels)
    np.save(tmp_path / "probs.npy", probs)
    huge = "999999999999999999999"  # overflowed int64 inside the pruners
    res = _run(
        "label-errors", "--out", "out", "--labels", "labels.npy", "--pred-probs",
        "probs.npy", "--min-examples-per-class", huge, cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2
    assert huge in _one_error_line(res)
    with pytest.raises(ConfigError, match="between 0 and"):
        find_label_errors(labels, probs, min_examples_per_class=2**40)
    # the bound itself is still a count a class could have
    assert find_label_errors(labels, probs, min_examples_per_class=2**31 - 1).sum() == 0


def test_a_rerun_without_images_leaves_no_stale_contact_sheet(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    labels = np.arange(60) % 3
    probs = rng.dirichlet(np.ones(3), 60)
    probs[np.arange(60), (labels + 1) % 3] += 2  # every given label looks wrong
    probs /= probs.sum(1, keepdims=True)
    np.save(tmp_path / "labels.npy", labels)
    np.save(tmp_path / "probs.npy", probs)
    np.save(tmp_path / "images.npy", rng.integers(0, 256, (60, 8, 8), np.uint8))
    common = ["label-errors", "--out", "out", "--labels", "labels.npy",
              "--pred-probs", "probs.npy"]  # fmt: skip
    first = _run(*common, "--images", "images.npy", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "out" / "contact_sheet.png").is_file()
    again = _run(*common, cwd=tmp_path)  # the same folder, no images this time
    assert again.returncode == 0, again.stderr
    assert not (tmp_path / "out" / "contact_sheet.png").exists()


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("--num-classes", "99999999999999999999", "num_classes"),
        ("--name-new", "a\nb", "name_new"),
        ("--metric", "top7", "top7"),
        ("--confidence", "0", "confidence"),
    ],
)
def test_compare_refuses_bad_options_before_any_work(
    tmp_path: Path, option: str, value: str, named: str
) -> None:
    res = _run("compare", "--example", "--out", "ex", option, value, cwd=tmp_path)
    assert res.returncode in (1, 2)
    assert named in _one_error_line(res)
    assert not (tmp_path / "ex").exists()  # refused before the testbed was made
