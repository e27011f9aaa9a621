"""``retest init FILE`` exits like every other output path that is a file.

``--out FILE`` for a folder output (compare, evaluate, label-errors, flickr,
``demo --dir``) is a bad option value: exit 2. ``init DIR`` names the folder the
command writes, so a file there (or a file above it) is exit 2 as well.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(
    ("init_args", "out_args"),
    [
        (["init", "{f}", "--classes", "a,b"], ["demo", "--quick", "--dir", "{f}"]),
        (["init", "{f}/p", "--classes", "a,b"], ["demo", "--quick", "--dir", "{f}/p"]),
    ],
    ids=["is-file", "under-file"],
)
def test_init_on_a_file_exits_as_out_on_a_file(
    tmp_path: Path, init_args: list[str], out_args: list[str]
) -> None:
    f = tmp_path / "afile"
    f.write_text("notes\n")
    codes = []
    for args in (init_args, out_args):
        r = subprocess.run(
            [sys.executable, "-m", "retest", *(a.format(f=f) for a in args)],
            capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
        assert str(f) in lines[0], lines
        codes.append(r.returncode)
    assert codes == [2, 2]
    assert f.read_text() == "notes\n"
