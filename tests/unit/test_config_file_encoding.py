"""A retest.toml with a Latin-1 byte: one error line naming the file and line."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from checkout_cli import RETEST  # type: ignore[import-not-found]
from retest.project import Project


def test_latin1_byte_in_retest_toml_is_one_line_naming_file_and_line(
    tmp_path: Path,
) -> None:
    root = tmp_path / "proj"
    Project.init(root, name="t", classes=["cat", "dog"]).close()
    toml = root / "retest.toml"
    lines = toml.read_bytes().splitlines(keepends=True)
    toml.write_bytes(b"".join([lines[0], "# café\n".encode("latin-1"), *lines[1:]]))
    run = subprocess.run(
        [
            *RETEST,
            "status",
            "--project",
            str(root),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )
    err = run.stderr.strip().splitlines()
    assert run.returncode == 2, run.stderr
    assert len(err) == 1 and "Traceback" not in run.stderr, run.stderr
    assert str(toml) in err[0] and "line 2" in err[0] and "0xe9" in err[0]
    assert "UTF-8" in err[0]
