"""Every path a command writes goes through one guard (``retest._output``).

The Typer app is walked for its options: each one named like an output
(``--out``, ``--dir``, ``--root``, ``--report…``, ``init DIRECTORY``) must carry
the tag of ``cli/_options.output_option`` (or ``read_only_option``), and each
tagged option is run against the project's own places and a user's folder: one
``error:`` line, exit 1 or 2, and every file of the project and of the user
folder byte-identical afterwards. Then the findings of issue 23 one by one, and
``retest check`` on a damaged ``arrays/`` and stray files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import typer
from bad_input_helpers import assert_one_line, build_project, invoke

from retest.cli.main import app

HEADER = "arrays/candidates_8x8x3.json"
_OUTPUT_NAME = re.compile(r"--(out|dir|root|report|csv)")
_UNTAGGED = object()


def _params() -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []

    def walk(cmd: object, path: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in sorted(subs.items()):
                walk(sub, (*path, name))
            return
        found.extend((" ".join(path), p) for p in cmd.params)  # type: ignore[attr-defined]

    walk(typer.main.get_command(app), ())
    return found


def _tag(param: object) -> object:
    info = getattr(getattr(param, "type_descriptor", None), "parameter_info", None)
    return getattr(info, "retest_output", _UNTAGGED)


def _looks_like_output(param: object) -> bool:
    if getattr(param, "param_type_name", "") == "argument":
        return param.name == "directory"  # type: ignore[attr-defined]
    opts = param.opts  # type: ignore[attr-defined]
    return not param.is_flag and any(_OUTPUT_NAME.match(o) for o in opts)  # type: ignore[attr-defined]


def _writers() -> dict[tuple[str, str], object]:
    return {
        (cmd, p.opts[0] if p.param_type_name == "option" else p.name.upper()): _tag(p)  # type: ignore[attr-defined]
        for cmd, p in _params()
        if _tag(p) not in (_UNTAGGED, None)
    }


# How to run each path-writing option: {out} the path under test, {p} the
# project, {d} a folder of valid inputs. Other inputs are valid, so a refusal
# comes from the guard.
TEMPLATES = {
    ("compare", "--out"): "compare --out {out} --example --bootstrap 20",
    ("crowd export", "--out"): "crowd export --out {out} --base-url https://x.org/i "
    "--project {p}",
    ("datasets fetch", "--root"): "datasets fetch fashion_mnist --root {out}",
    ("dedup-queue", "--csv"): "dedup-queue --csv {out} --project {p}",
    ("demo", "--dir"): "demo --dir {out} --quick --workers 0",
    ("evaluate", "--out"): "evaluate --out {out} --model gaussian-nb --project {p}",
    ("export", "--out"): "export r1 --out {out} --project {p}",
    ("flickr download", "--out"): "flickr download --results {d}/results.json "
    "--out {out}",
    ("flickr search", "--out"): "flickr search --plan {d}/plan.json --out {out} "
    "--api-key k",
    ("init", "DIRECTORY"): "init {out} --classes a,b",
    ("label-errors", "--out"): "label-errors --out {out} --labels {d}/labels.npy "
    "--pred-probs {d}/probs.npy",
    ("models predict", "--out"): "models predict sklearn {d}/m.joblib --images "
    "{d}/x.npy --num-classes 3 --out {out}",
    ("split", "--out"): "split --per-class 1 --seed 1 --include-unreviewed "
    "--out {out} --project {p}",
}
OVERWRITE = {"dedup-queue", "export", "models predict", "split"}
TARGETS = (
    "project",
    "db",
    "toml",
    "arrays",
    "header",
    "images",
    "user-dir",
    "user-file",
)


def tree(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (SQLite's -wal/-shm and locks aside)."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(("-wal", "-shm", ".lock"))
    }


def _inputs(d: Path) -> None:
    import joblib
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (30, 8, 8, 3), np.uint8)
    y = np.arange(30) % 3
    np.save(d / "x.npy", x)
    joblib.dump(
        LogisticRegression(max_iter=200).fit(x.reshape(30, -1) / 255, y), d / "m.joblib"
    )
    np.save(d / "labels.npy", y)
    probs = rng.dirichlet(np.ones(3), 30)
    probs[np.arange(30), y] += 1
    np.save(d / "probs.npy", probs / probs.sum(1, keepdims=True))
    (d / "results.json").write_text("{}")
    (d / "plan.json").write_text("[]")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    b = tmp_path_factory.mktemp("output-guard")
    build_project(b / "proj", b / "inputs")
    _inputs(b / "inputs")
    user = b / "user"
    user.mkdir()
    (user / "notes.json").write_text('{"mine": true}')
    (user / "thesis.txt").write_text("three years of work")
    return b


def _target(base: Path, name: str) -> Path:
    p = base / "proj"
    return {
        "project": p,
        "db": p / "retest.db",
        "toml": p / "retest.toml",
        "arrays": p / "arrays",
        "header": p / HEADER,
        "images": p / "images",
        "user-dir": base / "user",
        "user-file": base / "user" / "notes.json",
    }[name]


def _argv(key: tuple[str, str], base: Path, out: Path | str) -> list[str]:
    t = TEMPLATES[key].format(out=out, p=base / "proj", d=base / "inputs")
    return t.split()


# ----------------------------------------------------------------- the app


def test_every_output_option_is_tagged() -> None:
    untagged = [
        f"{cmd} {'/'.join(p.opts) or p.name}"  # type: ignore[attr-defined]
        for cmd, p in _params()
        if _looks_like_output(p) and _tag(p) is _UNTAGGED
    ]
    assert not untagged, f"tag these with cli/_options.output_option: {untagged}"


def test_every_tagged_option_is_exercised_and_every_rule_used() -> None:
    from retest._output import RULES

    writers = _writers()
    assert set(writers) == set(TEMPLATES), "add a TEMPLATES entry per new writer"
    assert {r.command for r in writers.values()} == set(RULES)  # type: ignore[attr-defined]


CASES = [
    pytest.param(key, target, ow, id=f"{key[0]}-{target}{'-overwrite' * ow}")
    for key in TEMPLATES
    for target in TARGETS
    for ow in ((False, True) if key[0] in OVERWRITE else (False,))
    # a dataset folder may hold other files (an existing copy of the dataset)
    if not (key[0] == "datasets fetch" and target == "user-dir")
]


@pytest.mark.parametrize(("key", "target", "overwrite"), CASES)
def test_refused_and_nothing_changes(
    base: Path, key: tuple[str, str], target: str, overwrite: bool
) -> None:
    out = _target(base, target)
    before, user = tree(base / "proj"), tree(base / "user")
    argv = _argv(key, base, out) + ["--overwrite"] * overwrite
    res = invoke(*argv)
    assert res.exit_code in (1, 2), (argv, res.exit_code, res.stdout, res.stderr)
    line = assert_one_line(res, res.exit_code)
    assert out.name in line, line
    assert tree(base / "proj") == before, f"project changed by {argv}"
    assert tree(base / "user") == user, f"user folder changed by {argv}"


# ----------------------------------------------------------------- findings


@pytest.fixture
def proj(base: Path, tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(base / "proj", root)
    return root


@pytest.mark.parametrize(
    "name", ["retest.db", "retest.toml", "arrays/candidates_8x8x3.u8"]
)
def test_split_never_replaces_a_project_file(proj: Path, name: str) -> None:
    before = tree(proj)
    args = ["split", "--per-class", "2", "--seed", "1", "--include-unreviewed"]
    res = invoke(*args, "--out", name, "--overwrite", cwd=proj)
    assert_one_line(res, 2, name)
    assert tree(proj) == before
    res = invoke(*args, "--out", "reports/mine.json", cwd=proj)  # its own place
    assert res.exit_code in (0, 1), res.stderr  # 1: short classes, still written
    assert json.loads((proj / "reports/mine.json").read_text())["seed"] == 1


def test_predict_replaces_only_predictions_with_overwrite(
    base: Path, tmp_path: Path
) -> None:
    d = base / "inputs"
    run = ["models", "predict", "sklearn", str(d / "m.joblib"), "--images",
           str(d / "x.npy"), "--num-classes", "3", "--out"]  # fmt: skip
    keep = tmp_path / "keep.json"
    keep.write_text('{"not": "predictions"}')
    assert_one_line(invoke(*run, keep), 2, "keep.json", "--overwrite")
    assert_one_line(invoke(*run, keep, "--overwrite"), 2, "keep.json")
    assert keep.read_text() == '{"not": "predictions"}'
    pred = tmp_path / "pred.json"
    assert invoke(*run, pred).exit_code == 0
    assert_one_line(invoke(*run, pred), 2, "pred.json")
    pred.write_text("[0, 1]")  # predictions of an earlier run: replaced
    assert invoke(*run, pred, "--overwrite").exit_code == 0
    assert len(json.loads(pred.read_text())) == 30


def test_predict_never_writes_an_array_header(proj: Path, base: Path) -> None:
    d = base / "inputs"
    before = tree(proj)
    res = invoke("models", "predict", "sklearn", d / "m.joblib", "--images",
                 d / "x.npy", "--num-classes", "3", "--out", proj / HEADER,
                 "--overwrite")  # fmt: skip
    assert_one_line(res, 2, "candidates_8x8x3.json")
    assert tree(proj) == before
    assert invoke("check", "--project", proj).exit_code == 0


def test_crowd_export_never_writes_into_the_project(proj: Path, tmp_path: Path) -> None:
    before = tree(proj)
    url = ("--base-url", "https://x.org/b1/images", "--project", str(proj))
    assert_one_line(invoke("crowd", "export", "--out", proj, *url), 2, str(proj))
    assert_one_line(invoke("crowd", "export", "--out", proj / "images", *url), 2)
    assert tree(proj) == before
    out = tmp_path / "batch"
    assert invoke("crowd", "export", "--out", out, *url).exit_code == 0
    assert (out / "batch_input.csv").is_file()
    res = invoke("crowd", "export", "--out", out, "--all", *url)  # its own folder
    assert res.exit_code == 0, res.stderr


@pytest.mark.parametrize("command", ["label-errors", "compare"])
def test_reports_never_go_into_arrays(proj: Path, base: Path, command: str) -> None:
    d = base / "inputs"
    before = tree(proj)
    if command == "compare":
        res = invoke(
            "compare", "--out", proj / "arrays", "--example", "--bootstrap", "20"
        )
    else:
        res = invoke("label-errors", "--out", proj / "arrays", "--labels",
                     d / "labels.npy", "--pred-probs", d / "probs.npy")  # fmt: skip
    assert_one_line(res, 2, "arrays")
    assert tree(proj) == before
    assert invoke("check", "--project", proj).exit_code == 0
    res = invoke("source", "add", "arrays", base / "inputs" / "test.npz",
                 "--name", "more", "--project", proj)  # fmt: skip
    assert res.exit_code == 0, res.stderr


def test_a_rerun_reuses_its_folder_but_a_user_folder_is_refused(
    base: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cmp"
    for _ in range(2):
        res = invoke("compare", "--out", out, "--example", "--bootstrap", "20")
        assert res.exit_code == 0, res.stderr
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "table.csv").write_text("my own table")
    res = invoke("compare", "--out", mine, "--example", "--bootstrap", "20")
    assert_one_line(res, 2, "mine", "table.csv")
    assert (mine / "table.csv").read_text() == "my own table"


def test_the_python_api_is_guarded_too(proj: Path) -> None:
    import retest
    from retest.errors import ConfigError

    y = np.arange(20) % 2
    preds = {"a": y, "b": 1 - y, "c": y}
    before = tree(proj)
    with pytest.raises(ConfigError, match="retest project"):
        retest.compare(y, y, preds, preds, n_boot=10, out=proj / "arrays")
    assert tree(proj) == before


# ----------------------------------------------------------------- check


def _check(proj: Path, *extra: str) -> dict[str, object]:
    res = invoke("check", "--json", "--project", proj, *extra)
    assert "Traceback" not in res.stdout + res.stderr, res.stderr
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def test_check_sees_a_missing_array_header(proj: Path) -> None:
    (proj / HEADER).unlink()
    rep = _check(proj)
    assert not rep["ok"]
    [p] = [p for p in rep["problems"] if p["kind"] == "pixels"]  # type: ignore[union-attr,index]
    assert "candidates_8x8x3.json" in p["detail"] and p["count"] == 30


@pytest.mark.parametrize("header", ['{"count": 30, "dtype": "uint8"}', "[1, 2]", "{"])
def test_check_and_ingest_see_an_altered_header(
    proj: Path, base: Path, header: str
) -> None:
    (proj / HEADER).write_text(header)
    rep = _check(proj)
    [p] = [p for p in rep["problems"] if p["kind"] == "pixels"]  # type: ignore[union-attr,index]
    assert "candidates_8x8x3.json" in p["detail"] and p["count"] == 30
    res = invoke("source", "add", "arrays", base / "inputs" / "test.npz",
                 "--name", "more", "--project", proj)  # fmt: skip
    assert_one_line(res, 1, "candidates_8x8x3.json")


def test_check_names_stray_files_and_repair_keeps_them(proj: Path) -> None:
    (proj / "images" / "3f2a9c.jpg").write_bytes(b"a crowd batch JPEG")
    (proj / "arrays" / "label_errors.json").write_text("[]")
    orphan = proj / "images" / hashlib.sha256(b"x").hexdigest()
    orphan.write_bytes(b"x")  # what a killed ingest leaves: retest's own
    rep = _check(proj, "--repair")
    strays = [p for p in rep["problems"] if p["kind"] == "stray"]  # type: ignore[union-attr]
    assert {s["repaired"] for s in strays} == {False}
    text = " ".join(s["detail"] for s in strays)
    assert "images/3f2a9c.jpg" in text and "arrays/label_errors.json" in text
    assert (proj / "images" / "3f2a9c.jpg").read_bytes() == b"a crowd batch JPEG"
    assert (proj / "arrays" / "label_errors.json").is_file()
    assert not orphan.exists()
    assert not rep["ok"]


def test_check_is_clean_on_an_intact_project(proj: Path) -> None:
    rep = _check(proj)
    assert rep["ok"], rep
    assert os.path.isdir(proj / "arrays" / "dedup")
