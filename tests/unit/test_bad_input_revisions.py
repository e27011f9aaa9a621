"""Bad inputs to the commands that find duplicates, sample, split and export.

``retest dedup``, ``dedup-queue``, ``dedup-verdict``, ``plan``, ``sample``,
``revisions``, ``diff``, ``status``, ``split`` and ``export``: unknown names,
option values out of range, input files (keyword counts, an exported release)
missing, empty, truncated, non-UTF-8 or a directory, and outputs that would
land on the project or on a file. Each must be one ``error:`` line with the
right exit code, and leave the project's database and pixels byte-identical.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from bad_input_helpers import build_project, case_param, invoke, refused


def _files(d: Path, export: Path) -> None:
    (d / "afile").write_text("x")
    (d / "adir").mkdir()
    (d / "empty.json").write_bytes(b"")
    (d / "trunc.json").write_text('{"a": {"cat": 2, "kitten"')
    (d / "latin1.json").write_bytes(b'{"a": {"caf\xe9": 2}}')
    (d / "list.json").write_text("[1, 2, 3]")
    (d / "negative.json").write_text('{"a": {"cat": -2}}')
    (d / "unknown_class.json").write_text('{"zebra": {"stripes": 2}}')
    # exported releases with a damaged manifest
    for name, manifest in {
        "exp-no-manifest": None,
        "exp-empty": b"",
        "exp-trunc": (export / "manifest.json").read_bytes()[:200],
        "exp-latin1": b'{"revision": "caf\xe9"}',
        "exp-list": b"[]",
    }.items():
        shutil.copytree(export, d / name)
        m = d / name / "manifest.json"
        if manifest is None:
            m.unlink()
        else:
            m.write_bytes(manifest)
    shutil.copytree(export, d / "exp-dir-manifest")
    (d / "exp-dir-manifest" / "manifest.json").unlink()
    (d / "exp-dir-manifest" / "manifest.json").mkdir()
    shutil.copytree(export, d / "exp-short-labels")
    data = (d / "exp-short-labels" / "r1_labels.npy").read_bytes()
    (d / "exp-short-labels" / "r1_labels.npy").write_bytes(data[:-8])


@pytest.fixture(scope="session")
def env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    base = tmp_path_factory.mktemp("bad-input-revisions")
    root = build_project(base / "proj", base / "inputs")
    export = base / "inputs" / "export-r1"
    d = base / "bad"
    d.mkdir()
    _files(d, export)
    member = json.loads((export / "manifest.json").read_text())["images"][0]
    return root, d, member["item_id"]


@pytest.fixture
def proj(env: tuple[Path, Path, str], tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(env[0], root)
    return root


SAMPLE = "sample --strategy class-balanced --per-class 1 --seed 1 --name r2"
KW = "sample --strategy keyword-count --seed 1 --name r2 --keyword-counts"
SPLIT = "split --per-class 2 --seed 1 --out {tmp}/split.json"

# (id, argv, exit code, words the line names[, xfail reason])
LEAD = "lead (cli/sample.py, pipeline/sample.py)"
CASES = [
    # dedup
    ("dedup-chunk-size-0", "dedup --metrics l2 --chunk-size 0", 2, ["--chunk-size"]),
    ("dedup-k-0", "dedup --metrics l2 --k 0", 2, ["--k"]),
    ("dedup-metric", "dedup --metrics l3", 2, ["l3"]),
    ("dedup-against", "dedup --metrics l2 --against original-val", 2,
     ["original-val"]),
    ("dedup-embedder-spec", "dedup --metrics features --embedder "
     "random-projection:abc", 2, ["abc"]),
    ("dedup-embedder-unknown", "dedup --metrics features --embedder resnet", 2,
     ["resnet"]),
    ("dedup-embedder-file-missing", "dedup --metrics features --embedder "
     "torchscript:{d}/nope.pt", 1, ["nope.pt"]),
    ("dedup-embedder-file-dir", "dedup --metrics features --embedder "
     "onnx:{d}/adir", 1, ["adir", "directory"]),
    ("dedup-resize-0", "dedup --metrics l2 --resize 0", 2, ["--resize"]),
    ("dedup-memory", "dedup --metrics l2 --memory-gib -1", 2, ["--memory-gib"]),
    ("dedup-win-size", "dedup --metrics dssim --win-size 4", 2, ["--win-size"]),
    ("dedup-workers-0", "dedup --metrics l2 --workers 0", 2, ["--workers"]),
    ("dedup-workers-and-cluster", "dedup --metrics l2 --workers 2 --cluster "
     "tcp://127.0.0.1:1", 2, ["--cluster"]),
    ("dedup-queue-threshold-form", "dedup-queue --threshold warp", 2, ["warp"]),
    ("dedup-queue-threshold-metric", "dedup-queue --threshold l3=5", 2, ["l3"]),
    ("dedup-queue-threshold-value", "dedup-queue --threshold l2=abc", 2, ["abc"]),
    ("verdict-unknown-candidate", "dedup-verdict nope l2 --shown train:0 --who me",
     1, ["nope"]),
    ("verdict-unknown-metric", "dedup-verdict {member} l3 --shown train:0 --who me",
     2, ["l3"]),
    ("verdict-unknown-reference", "dedup-verdict {member} l2 --shown train:999 "
     "--who me", 1, ["train:999"]),
    ("verdict-duplicate-not-shown", "dedup-verdict {member} l2 --shown train:0 "
     "--duplicates train:1 --who me", 2, ["train:1"]),
    ("verdict-empty-shown", "dedup-verdict {member} l2 --shown , --who me", 2,
     ["--shown"]),
    # plan
    ("plan-rule", "plan --rule v5", 2, ["v5"]),
    ("plan-size-0", "plan --rule v6 --size 0", 2, ["--size"]),
    ("plan-top-k-0", "plan --rule v6 --top-k 0", 2, ["--top-k"]),
    # sample
    ("sample-strategy", "sample --strategy random --seed 1", 2, ["random"]),
    ("sample-per-class-0", SAMPLE + " --per-class 0", 2, ["--per-class"]),
    ("sample-from-unknown", SAMPLE + " --from nope", 1, ["nope"]),
    ("sample-class-threshold-class", SAMPLE + " --class-threshold Nope=0.5", 2,
     ["Nope"]),
    ("sample-class-threshold-value", SAMPLE + " --class-threshold a=2", 2,
     ["--class-threshold", "2"]),
    ("sample-class-threshold-form", SAMPLE + " --class-threshold a", 2, ["a"]),
    ("sample-threshold", SAMPLE + " --threshold 1.5", 2, ["--threshold"]),
    ("sample-min-annotations", SAMPLE + " --min-annotations -1", 2,
     ["--min-annotations"]),
    ("sample-name-escapes", SAMPLE.replace("r2", "../x"), 2, ["../x"]),
    ("sample-name-taken", SAMPLE.replace("r2", "r1"), 1, ["r1"]),
    ("sample-kw-missing", KW + " {d}/nope.json", 1, ["nope.json"]),
    ("sample-kw-empty", KW + " {d}/empty.json", 1, ["empty.json"]),
    ("sample-kw-truncated", KW + " {d}/trunc.json", 1, ["trunc.json"]),
    ("sample-kw-non-utf8", KW + " {d}/latin1.json", 1, ["latin1.json"]),
    ("sample-kw-directory", KW + " {d}/adir", 1, ["adir"]),
    ("sample-kw-wrong-type", KW + " {d}/list.json", 1, ["list.json"]),
    ("sample-kw-negative", KW + " {d}/negative.json", 1, ["negative.json"]),
    ("sample-kw-unknown-class", KW + " {d}/unknown_class.json", 1, ["zebra"]),
    # revisions, diff, status
    ("diff-unknown", "diff r1 nope", 1, ["nope"]),
    ("status-unknown-revision", "status nope", 1, ["nope"]),
    ("status-unknown-candidate", "status --candidate nope", 1, ["nope"]),
    # split
    ("split-per-class-0", SPLIT + " --per-class 0", 2, ["--per-class"]),
    ("split-fraction", SPLIT + " --train-fraction 1.5", 2, ["--train-fraction"]),
    ("split-policy", SPLIT + " --policy best", 2, ["best"]),
    ("split-revision-unknown", SPLIT + " --revision nope", 1, ["nope"]),
    ("split-revision-and-export", SPLIT + " --revision r1 --export {d}/adir", 2,
     ["--export"]),
    ("split-export-missing", SPLIT + " --export {d}/nope-exp", 1, ["nope-exp"]),
    ("split-export-is-file", SPLIT + " --export {d}/afile", 2, ["afile"]),
    ("split-export-no-manifest", SPLIT + " --export {d}/exp-no-manifest", 1,
     ["manifest.json"]),
    ("split-export-manifest-empty", SPLIT + " --export {d}/exp-empty", 1,
     ["manifest.json"]),
    ("split-export-manifest-truncated", SPLIT + " --export {d}/exp-trunc", 1,
     ["manifest.json"]),
    ("split-export-manifest-non-utf8", SPLIT + " --export {d}/exp-latin1", 1,
     ["manifest.json"]),
    ("split-export-manifest-list", SPLIT + " --export {d}/exp-list", 1,
     ["manifest.json"]),
    ("split-export-manifest-dir", SPLIT + " --export {d}/exp-dir-manifest", 1,
     ["manifest.json"]),
    ("split-out-is-dir", SPLIT.replace("{tmp}/split.json", "{d}/adir"), 2, ["adir"]),
    ("split-out-under-file", SPLIT.replace("{tmp}/split.json", "{d}/afile/s.json"),
     2, ["afile"]),
    # export
    ("export-unknown", "export nope --out {tmp}/e", 1, ["nope"]),
    ("export-format", "export r1 --format zip --out {tmp}/e", 2, ["zip"]),
    ("export-batch-size-0", "export r1 --format cifar --batch-size 0 --out {tmp}/e",
     2, ["--batch-size"]),
    ("export-name-escapes", "export r1 --name ../../x --out {tmp}/e", 2, ["../../x"]),
    ("export-out-is-file", "export r1 --out {d}/afile", 2, ["afile"]),
    ("export-out-under-file", "export r1 --out {d}/afile/e", 2, ["afile"]),
    ("export-out-not-empty", "export r1 --out {d}/exp-no-manifest", 2,
     ["exp-no-manifest"]),
    ("export-overwrite-foreign", "export r1 --overwrite --out {d}/exp-no-manifest",
     2, ["exp-no-manifest"]),
    ("export-out-is-project", "export r1 --overwrite --out {proj}", 2, ["proj"]),
    ("export-out-in-project", "export r1 --overwrite --out {proj}/arrays", 2,
     ["arrays"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("template", "code", "culprits"), [case_param(*c) for c in CASES]
)
def test_refused(
    template: str,
    code: int,
    culprits: list[str],
    env: tuple[Path, Path, str],
    proj: Path,
    tmp_path: Path,
) -> None:
    argv = (
        template.replace("{d}", str(env[1]))
        .replace("{tmp}", str(tmp_path))
        .replace("{proj}", str(proj))
        .replace("{member}", env[2])
        .split()
    )
    refused(proj, argv, code, *culprits)
    assert not (tmp_path / "e").exists() and not (tmp_path / "split.json").exists()


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["--strategy", "class-balanced", "--per-class", "1000"], "INVALID"),
        (["--strategy", "threshold"], "rx: 0 images"),  # nothing is verified
    ],
    ids=["short-classes", "empty"],
)
def test_an_invalid_or_empty_revision_exits_1(
    proj: Path, args: list[str], shown: str
) -> None:
    """The revision is recorded (its shortfall is what to fix), but it is not a
    usable test set, so a script running `retest sample` must see it fail."""
    res = invoke("sample", *args, "--seed", "1", "--name", "rx", "--project", proj)
    out = res.stdout + res.stderr
    assert res.exit_code == 1, out
    assert "Traceback" not in out and shown in res.stdout, out


# Another `retest sample` stores a revision under the automatic name this one
# picked, between the pick and the write (the store's create, patched in the child).
_NAME_TAKEN_MEANWHILE = """
import sys
from retest.store._sqlite_decisions import _Revisions
from retest.store.sqlite import SQLiteStore
db, original, taken = sys.argv.pop(1), _Revisions.create, []
def create(self, revision, members):
    if not taken:
        taken.append(revision.name)
        other = SQLiteStore(db)
        try:
            original(other.revisions, revision, members)
        finally:
            other.close()
    return original(self, revision, members)
_Revisions.create = create
from retest.cli.main import main
sys.argv[0] = "retest"
main()
"""


def test_two_unnamed_samples_at_once_get_two_names(proj: Path) -> None:
    """The automatic name raced: this run takes the next free name instead of
    failing (or replacing the other run's revision)."""
    args = ["sample", "--strategy", "class-balanced", "--per-class", "1",
            "--seed", "1", "--project", str(proj)]  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-c", _NAME_TAKEN_MEANWHILE, str(proj / "retest.db"), *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    with sqlite3.connect(proj / "retest.db") as db:
        names = [n for (n,) in db.execute("SELECT name FROM revisions ORDER BY seq")]
    assert len(names) == 3 and len(set(names)) == 3, names  # r1, theirs, ours
    assert names[2] in r.stdout
