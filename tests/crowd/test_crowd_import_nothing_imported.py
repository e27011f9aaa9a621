"""A results file whose every row is rejected imported nothing: exit 1, and why.

A script that runs ``retest crowd import`` trusts exit 0 to mean the votes are
in. A partial import (some rows rejected) still exits 0 with the rejected count.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from test_crowd_reimport import (  # noqa: F401  (crowd: a fixture)
    Crowd,
    cli,
    crowd,
    result_row,
    write_results,
)


def _rows(c: Crowd, n: int, *, bad: set[int]) -> list[dict[str, str]]:
    rows = []
    for k in range(n):
        task = c.task(k % 2)
        row = result_row(c, task, assignment=f"A{k}", worker=f"W{k}",
                         selected=c.candidates(task)[:1])  # fmt: skip
        if k in bad:
            row["Answer.selected"] = "nosuchtoken"
        rows.append(row)
    return rows


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("as_json", [False, True])
def test_every_row_rejected_exits_1_naming_why(
    crowd: Crowd,  # noqa: F811
    tmp_path: Path,
    as_json: bool,
) -> None:
    path = write_results(tmp_path / "r.csv", _rows(crowd, 3, bad={0, 1, 2}))
    db = _sha(crowd.root / "retest.db")
    res = cli("crowd", "import", str(path), "--project", str(crowd.root),
              *(["--json"] if as_json else []))  # fmt: skip
    assert res.exit_code == 1, res.output
    err = res.stderr.strip().splitlines()
    assert len(err) == 1, res.stderr
    assert err[0].startswith(f"error: {path}: nothing imported; all 3 data rows "
                             "were rejected (every row: answer contains unknown "
                             "image token 'nosuchtoken')"), err[0]  # fmt: skip
    if as_json:
        assert [r["line"] for r in json.loads(res.stdout)["rejected"]] == [2, 3, 4]
    else:
        assert "rejected line 2" in res.stdout
    assert _sha(crowd.root / "retest.db") == db


def test_partial_import_exits_0_with_the_rejected_count(
    crowd: Crowd,  # noqa: F811
    tmp_path: Path,
) -> None:
    path = write_results(tmp_path / "r.csv", _rows(crowd, 3, bad={1}))
    res = cli("crowd", "import", str(path), "--project", str(crowd.root))
    assert res.exit_code == 0, res.output
    assert "2 new assignments" in res.stdout and "1 rejected" in res.stdout
    assert "error" not in res.stderr
