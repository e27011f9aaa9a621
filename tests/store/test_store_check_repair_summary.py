"""``retest check --repair`` says what it found, what it repaired and what
remains, and exits 1 exactly when something remains. It printed "N problems
found" counting the repaired ones too, and "ok" alone when it had repaired
everything, so a user could not tell a repaired project from a healthy one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from check_project import arrays_project  # type: ignore[import-not-found]

from checkout_cli import RETEST  # type: ignore[import-not-found]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RETEST, *args], capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip


_project = arrays_project


def _leftover(proj: Path) -> Path:
    """A temporary of a killed writer (a process that no longer runs)."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    temp = proj / "reports" / f".report.json.{dead}.abcd1234.tmp"
    temp.write_bytes(b"{")
    return temp


def _summary(r: subprocess.CompletedProcess[str]) -> str:
    """The line after the table (wrapped at 80 columns), without its stats."""
    after = r.stdout.split("┘")[-1]
    return " ".join(after.split()).split(" (checked:")[0]


def test_some_repaired_some_remaining(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    temp = _leftover(proj)
    with open(proj / "arrays" / "candidates_8x8x3.u8", "r+b") as f:
        f.seek(10 * 192 + 5)  # a stored image overwritten: reported, not repaired
        f.write(b"\x01\x02")
    r = _cli("check", "--project", str(proj))
    assert (r.returncode, _summary(r)) == (1, "2 problems found"), r.stdout
    r = _cli("check", "--repair", "--project", str(proj))
    assert r.returncode == 1, r.stdout + r.stderr
    assert _summary(r) == "2 problems found, 1 repaired, 1 remains", r.stdout
    assert not temp.exists()
    r = _cli("check", "--repair", "--json", "--project", str(proj))
    rep = json.loads(r.stdout)
    assert r.returncode == 1
    assert (rep["found"], rep["repaired"], rep["remaining"]) == (1, 0, 1)
    r = _cli("check", "--repair", "--project", str(proj))
    assert _summary(r) == "1 problem found, none repaired, 1 remains", r.stdout


def test_all_repaired_exits_0_and_says_so(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    _leftover(proj)
    with open(proj / "arrays" / "candidates_8x8x3.u8", "ab") as f:
        f.write(b"\x01" * 100)  # a half-written append
    r = _cli("check", "--repair", "--project", str(proj))
    assert r.returncode == 0, r.stdout + r.stderr
    assert _summary(r) == "ok: 2 problems found, all repaired", r.stdout
    r = _cli("check", "--project", str(proj))
    assert (r.returncode, _summary(r)) == (0, "ok"), r.stdout
