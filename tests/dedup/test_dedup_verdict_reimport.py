"""``retest dedup-verdict --from q.csv --who ana`` run twice records each verdict once.

The second import used to append every verdict and review mark again without a
word. A pair whose latest verdict by the same reviewer already says the same is
now left out, and the summary says how many were; a changed verdict is still
recorded (the latest counts). Through the real CLI on a real SQLite project.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np

from retest.store.sqlite import SQLiteStore


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    cp = subprocess.run(
        [sys.executable, "-m", "retest", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert cp.returncode == 0, (args, cp.stdout, cp.stderr)
    return cp


def _events(proj: Path) -> tuple[list[tuple[str, str, bool, str]], int]:
    """Every verdict (candidate, reference, duplicate, who) and the review marks."""
    with SQLiteStore(proj / "retest.db") as s:
        verdicts = [
            (v.candidate_id, v.ref_id, v.is_duplicate, v.who)
            for v in s.neardup.verdicts()
        ]
        return verdicts, len(s.neardup.reviews())


def _write(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(
            ["candidate", "class", "metric", "reference", "distance", "duplicate"]
        )
        w.writerows([c, "x", "l2", r, "1.5", d] for c, r, d in rows)
    return path


def test_a_second_import_records_nothing_and_says_so(tmp_path: Path) -> None:
    proj = tmp_path / "p"
    _cli("init", proj, "--classes", "x,y")
    rng = np.random.default_rng(0)
    np.savez(
        tmp_path / "pool.npz",
        images=rng.integers(0, 256, (6, 8, 8, 3), dtype=np.uint8),
        labels=np.zeros(6, np.int64),
    )
    _cli("source", "add", "arrays", tmp_path / "pool.npz", "-p", proj)
    with SQLiteStore(proj / "retest.db") as s:
        a, b, c, d, e, _ = sorted(r.id for r in s.candidates.iter())
    rows = [(a, b, "yes"), (a, c, "no"), (d, e, "no")]
    q = _write(tmp_path / "q.csv", rows)

    first = _cli("dedup-verdict", "--from", q, "--who", "ana", "-p", proj).stdout
    assert "recorded 2 reviews by ana" in first and "already" not in first
    once = _events(proj)
    assert sorted(once[0]) == [(a, b, True, "ana"), (a, c, False, "ana"),
                               (d, e, False, "ana")]  # fmt: skip
    assert once[1] == 2

    second = _cli("dedup-verdict", "--from", q, "--who", "ana", "-p", proj).stdout
    assert "recorded 0 reviews by ana" in second
    assert "3 of the pairs were already recorded by ana" in second
    assert _events(proj) == once  # nothing appended

    # another reviewer's verdicts are theirs: recorded
    _cli("dedup-verdict", "--from", q, "--who", "bob", "-p", proj)
    assert len(_events(proj)[0]) == 6

    # ana changes her mind on one pair: only that pair is recorded
    q2 = _write(tmp_path / "q2.csv", [(a, b, "no"), (a, c, "no"), (d, e, "no")])
    third = _cli("dedup-verdict", "--from", q2, "--who", "ana", "-p", proj).stdout
    assert "recorded 1 reviews by ana" in third
    assert "2 of the pairs were already recorded" in third
    verdicts, marks = _events(proj)
    assert verdicts[6:] == [(a, b, False, "ana")] and marks == 5
