"""Bad inputs to the crowd and review commands.

``retest crowd tasks|export|import`` and ``retest review
queue-label-errors|label-errors``: the ``--nearest`` map, an MTurk results CSV
and a label-error list come missing, empty, truncated, non-UTF-8, as a
directory, with the wrong columns or values out of range; option values out of
range; outputs that are files. Each must be one ``error:`` line with the right
exit code, and leave the project's database and pixels byte-identical.
"""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from bad_input_helpers import build_project, case_param, invoke, ok, refused, snapshot

HEADER = ["AssignmentId", "WorkerId", "AssignmentStatus", "Input.task_id",
          "Answer.selected"]  # fmt: skip


def _results(path: Path, rows: list[list[str]], header: list[str] = HEADER) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(header)
        w.writerows(rows)


def _files(d: Path, batch: Path) -> None:
    with batch.open(newline="") as f:
        tasks = list(csv.DictReader(f))
    good = [[f"A{i}", f"W{i}", "Submitted", t["task_id"], t["token_0"]]
            for i, t in enumerate(tasks)]  # fmt: skip
    _results(d / "good.csv", good)
    text = (d / "good.csv").read_text()
    (d / "empty.csv").write_bytes(b"")
    (d / "trunc.csv").write_text(text[: text.index("\n") + 30])
    (d / "stray-quote.csv").write_text(text.replace(f'"{good[1][1]}"', '"W1', 1))
    (d / "latin1.csv").write_bytes(text.encode().replace(b"W1", b"W\xe91", 1))
    _results(d / "no-answer.csv", [r[:4] for r in good], HEADER[:4])
    _results(d / "unknown-task.csv", [["A0", "W0", "Submitted", "nope", "x"]])
    (d / "binary.csv").write_bytes(bytes(range(256)) * 4)
    (d / "adir").mkdir()
    (d / "afile").write_text("x")
    # --nearest maps
    (d / "nearest-empty.json").write_bytes(b"")
    (d / "nearest-trunc.json").write_text('{"a": "b", "b":')
    (d / "nearest-latin1.json").write_bytes(b'{"a": "\xe9"}')
    (d / "nearest-list.json").write_text('["a", "b"]')
    (d / "nearest-unknown.json").write_text('{"a": "zebra"}')
    # label-error lists
    le = [{"rank": 1, "index": 3, "given": 0, "suggested": 1, "score": 0.1}]
    (d / "le.json").write_text(json.dumps(le))
    (d / "le-empty.json").write_bytes(b"")
    (d / "le-trunc.json").write_text(json.dumps(le)[:30])
    (d / "le-latin1.json").write_bytes(
        json.dumps(le).encode().replace(b"rank", b"r\xe9nk")
    )
    (d / "le-dict.json").write_text('{"rank": 1}')
    (d / "le-oor.json").write_text(json.dumps([{**le[0], "index": 999}]))
    (d / "le-neg.json").write_text(json.dumps([{**le[0], "index": -1}]))
    (d / "le-class.json").write_text(json.dumps([{**le[0], "suggested": 9}]))
    (d / "le-text.json").write_text(json.dumps([{**le[0], "index": "three"}]))
    (d / "le.txt").write_text("3\n")


@pytest.fixture(scope="session")
def env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("bad-input-crowd")
    root = build_project(base / "proj", base / "inputs")
    ok("crowd", "export", "--out", base / "mturk", "--base-url", "https://x.org/i",
       "--project", root)  # fmt: skip
    d = base / "bad"
    d.mkdir()
    _files(d, base / "mturk" / "batch_input.csv")
    return root, d


@pytest.fixture
def proj(env: tuple[Path, Path], tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(env[0], root)
    return root


IMPORT = "crowd import"
QUEUE = "review queue-label-errors"

# (id, argv, exit code, words the line names[, xfail reason])
CASES = [
    ("import-missing", f"{IMPORT} {{d}}/nope.csv", 1, ["nope.csv"]),
    ("import-empty", f"{IMPORT} {{d}}/empty.csv", 1, ["empty.csv"]),
    ("import-non-utf8", f"{IMPORT} {{d}}/latin1.csv", 1, ["latin1.csv"]),
    ("import-missing-column", f"{IMPORT} {{d}}/no-answer.csv", 1,
     ["Answer.selected"]),
    ("import-binary", f"{IMPORT} {{d}}/binary.csv", 1, ["binary.csv"]),
    ("import-directory", f"{IMPORT} {{d}}/adir", 1, ["adir"]),
    ("tasks-images-per-task-0", "crowd tasks --seed 1 --images-per-task 0", 2,
     ["--images-per-task"]),
    ("tasks-controls-negative", "crowd tasks --seed 1 --controls -1", 2,
     ["--controls"]),
    ("tasks-controls-too-many", "crowd tasks --seed 1 --images-per-task 4 "
     "--controls 3", 2, ["--controls"]),
    ("tasks-nearest-missing", "crowd tasks --seed 1 --nearest {d}/nope.json", 1,
     ["nope.json"]),
    ("tasks-nearest-empty", "crowd tasks --seed 1 --nearest {d}/nearest-empty.json",
     1, ["nearest-empty.json"]),
    ("tasks-nearest-truncated", "crowd tasks --seed 1 --nearest "
     "{d}/nearest-trunc.json", 1, ["nearest-trunc.json"]),
    ("tasks-nearest-non-utf8", "crowd tasks --seed 1 --nearest "
     "{d}/nearest-latin1.json", 1, ["nearest-latin1.json"]),
    ("tasks-nearest-list", "crowd tasks --seed 1 --nearest {d}/nearest-list.json",
     1, ["nearest-list.json"]),
    ("tasks-nearest-unknown-class", "crowd tasks --seed 1 --nearest "
     "{d}/nearest-unknown.json", 1, ["zebra"]),
    ("tasks-nearest-directory", "crowd tasks --seed 1 --nearest {d}/adir", 1,
     ["adir"]),
    ("export-out-is-file", "crowd export --out {d}/afile --base-url https://x.org/i",
     2, ["afile"]),
    ("export-base-url", "crowd export --out {tmp}/m --base-url notaurl", 2,
     ["notaurl"]),
    ("queue-missing", f"{QUEUE} {{d}}/nope.json", 1, ["nope.json"]),
    ("queue-empty", f"{QUEUE} {{d}}/le-empty.json", 1, ["le-empty.json"]),
    ("queue-truncated", f"{QUEUE} {{d}}/le-trunc.json", 1, ["le-trunc.json"]),
    ("queue-non-utf8", f"{QUEUE} {{d}}/le-latin1.json", 1, ["le-latin1.json"]),
    ("queue-wrong-shape", f"{QUEUE} {{d}}/le-dict.json", 1, ["le-dict.json"]),
    ("queue-index-out-of-range", f"{QUEUE} {{d}}/le-oor.json", 1, ["999"]),
    ("queue-index-negative", f"{QUEUE} {{d}}/le-neg.json", 1, ["-1"]),
    ("queue-class-out-of-range", f"{QUEUE} {{d}}/le-class.json", 1, ["9"]),
    ("queue-index-text", f"{QUEUE} {{d}}/le-text.json", 1, ["three"]),
    ("queue-directory", f"{QUEUE} {{d}}/adir", 1, ["adir"]),
    ("queue-suffix", f"{QUEUE} {{d}}/le.txt", 1, ["le.txt"]),
    ("queue-split", f"{QUEUE} {{d}}/le.json --split validation", 2, ["validation"]),
    ("queue-top-0", f"{QUEUE} {{d}}/le.json --top 0", 2, ["--top"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("template", "code", "culprits"), [case_param(*c) for c in CASES]
)
def test_refused(
    template: str,
    code: int,
    culprits: list[str],
    env: tuple[Path, Path],
    proj: Path,
    tmp_path: Path,
) -> None:
    argv = template.replace("{d}", str(env[1])).replace("{tmp}", str(tmp_path))
    refused(proj, argv.split(), code, *culprits)
    assert not (tmp_path / "m").exists()


def test_good_inputs_are_accepted(env: tuple[Path, Path], proj: Path) -> None:
    """The files the refusals damage are good: importing and queueing change the db."""
    before = snapshot(proj)
    res = invoke("crowd", "import", env[1] / "good.csv", "--project", proj)
    assert res.exit_code == 0, (res.stdout, res.stderr, res.exception)
    res = invoke("review", "queue-label-errors", env[1] / "le.json", "--project", proj)
    assert res.exit_code == 0, (res.stdout, res.stderr, res.exception)
    assert snapshot(proj) != before


@pytest.mark.parametrize(("name", "line"), [("trunc.csv", 2), ("stray-quote.csv", 3)])
def test_unparsable_rows_are_reported(
    name: str, line: int, env: tuple[Path, Path], proj: Path
) -> None:
    """A truncated row or a stray quote: the row is rejected with its line number,
    the others are imported, and the counts add up to the file's rows. A file
    whose every row is rejected imported nothing: exit 1, with the same report."""
    res = invoke("crowd", "import", env[1] / name, "--json", "--project", proj)
    data = json.loads(res.stdout)
    code = 0 if data["rows"] > len(data["rejected"]) else 1
    assert res.exit_code == code, (res.stdout, res.stderr, res.exception)
    assert [r["line"] for r in data["rejected"]] == [line]
    assert data["rows"] == data["new"] + data["unchanged"] + len(data["rejected"])


def test_unknown_task_is_reported(env: tuple[Path, Path], proj: Path) -> None:
    """Rows naming tasks the project never made are not silently dropped."""
    res = invoke("crowd", "import", env[1] / "unknown-task.csv", "--json",
                 "--project", proj)  # fmt: skip
    assert "Traceback" not in res.stderr
    text = res.stdout + res.stderr
    assert "nope" in text or "rejected" in text or "unknown" in text, text


def test_a_stray_quote_costs_one_row_not_the_rest_of_the_file(
    env: tuple[Path, Path], proj: Path, tmp_path: Path
) -> None:
    """An unquoted results file with one field starting with ``"``: a CSV reader
    would read every following line into that field. Only that row is lost; it
    is reported with its line number and the other 14 assignments are stored."""
    tasks = list(csv.reader((env[1] / "good.csv").open(newline="")))[1:]
    rows = [[f"A{i}", f"W{i}", "Submitted", *tasks[i % len(tasks)][3:]]
            for i in range(15)]  # several workers per task  # fmt: skip
    lines = [",".join(HEADER), *(",".join(r) for r in rows)]
    lines[3] = lines[3].replace(f",{rows[2][1]},", f',"{rows[2][1]},', 1)
    path = tmp_path / "stray.csv"
    path.write_text("\n".join(lines) + "\n")
    res = invoke("crowd", "import", path, "--project", proj)
    assert res.exit_code == 0, (res.stdout, res.stderr, res.exception)
    assert "Traceback" not in res.stdout + res.stderr
    with sqlite3.connect(proj / "retest.db") as db:
        (stored,) = db.execute(
            "SELECT COUNT(DISTINCT assignment_id) FROM annotations"
        ).fetchone()
    assert stored == 14
    assert "line 4" in res.stdout + res.stderr
