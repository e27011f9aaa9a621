"""`retest export` never touches what it does not own.

Each test runs the real CLI on a real project (SQLite + pixel arrays + an image
file) and checks the exit code, a one-line ``error:`` message and that every file
of the project (retest.db, arrays/, images/, …) is byte-identical afterwards.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from retest.cli.main import app
from retest.project import Project
from retest.stages.export import export_revision
from retest.store.artifacts import PixelArray, write_image_file
from retest.store.rows import (
    BlacklistEvent,
    CandidateRow,
    ReferenceRow,
    Revision,
    RevisionMember,
    content_id,
)

N = 8
PARQUET = pytest.param(
    "parquet",
    marks=pytest.mark.skipif(
        importlib.util.find_spec("pyarrow") is None,
        reason="Parquet export needs the [parquet] extra",
    ),
)


def _project(root: Path) -> tuple[list[str], np.ndarray]:
    """Project with 8 array candidates, one PNG file candidate and one original
    image, all in the valid revision ``r-0``; plus ``bad-0`` (invalid),
    ``empty-0`` (no members) and ``../../x`` (a name from before names were checked). Returns the member ids and the array pixels."""
    rng = np.random.default_rng(11)
    imgs = rng.integers(0, 256, (N + 2, 8, 8, 3), dtype=np.uint8)
    with Project.init(root, name="safe", classes=["a", "b"]) as p:
        rows = PixelArray.create(p.arrays_dir, "cand8", shape=(8, 8, 3)).append(imgs)
        ids = [content_id(x) for x in imgs]
        p.store.candidates.add(
            CandidateRow(
                ids[i], "arrays", str(i), i % 2, array_name="cand8", array_row=rows[i]
            )
            for i in range(N)
        )
        p.store.references.add(
            [ReferenceRow("test", 0, 0, ids[N], None, "cand8", rows[N])]
        )
        buf = io.BytesIO()
        Image.fromarray(imgs[N + 1]).save(buf, format="PNG")
        sha, _ = write_image_file(p.images_dir, buf.getvalue())
        p.store.candidates.add(
            [CandidateRow(sha, "folder", "x.png", 1, file_path=f"images/{sha}")]
        )
        members = [*ids[:N], "test:0", sha]
        p.store.revisions.create(
            Revision("r-0", "class-balanced", seed=1, created="2020-01-01T00:00:00Z"),
            [RevisionMember(m, k % 2) for k, m in enumerate(members)],
        )
        p.store.revisions.create(
            Revision("bad-0", "x", valid=False, shortfall={"b": {"missing": 3}}),
            [RevisionMember(ids[0], 0)],
        )
        p.store.revisions.create(Revision("empty-0", "x"), [])
        # written by an older version that did not check names
        p.store.revisions.create(Revision("../../x", "x"), [RevisionMember(ids[0], 0)])
        _warm_caches(p)
    return members, imgs


def _warm_caches(p: Project) -> None:
    """Derived caches the eligibility check writes on first use (not project data)."""
    from retest.project import candidate_eligibility

    candidate_eligibility(p)


def _is_export(folder: Path) -> bool:
    m = folder / "manifest.json"
    return m.is_file() and {"files", "revision"} <= set(json.loads(m.read_text()))


def _snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under the project (retest.db, arrays/, images/, …)."""
    return {
        f.relative_to(root).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(root.rglob("*"))
        if f.is_file()
    }


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    _project(root)
    return root


def _run(root: Path, *args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, [*args, "--project", str(root)])
    return res.exit_code, res.output


def _refused(root: Path, *args: str, match: str, code: int = 1) -> str:
    """Run the CLI, assert a one-line refusal and an unchanged project."""
    before = _snapshot(root)
    exit_code, out = _run(root, *args)
    lines = out.strip().splitlines()
    assert exit_code == code, out
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    assert match in lines[0], out
    assert "Traceback" not in out
    assert _snapshot(root) == before
    return lines[0]


# ---------------------------------------------------------------- 1. --overwrite


def test_overwrite_refuses_the_project_itself(proj: Path) -> None:
    _refused(
        proj,
        "export",
        "r-0",
        "--out",
        str(proj),
        "--overwrite",
        code=2,
        match="project",
    )
    assert (proj / "retest.db").is_file() and (proj / "arrays").is_dir()


def test_overwrite_refuses_project_arrays(proj: Path) -> None:
    _refused(
        proj,
        "export",
        "r-0",
        "--out",
        str(proj / "arrays"),
        "--overwrite",
        code=2,
        match="arrays/",
    )


def test_overwrite_refuses_a_folder_containing_the_project(proj: Path) -> None:
    _refused(
        proj,
        "export",
        "r-0",
        "--out",
        str(proj.parent),
        "--overwrite",
        code=2,
        match="contains the project",
    )


def test_overwrite_refuses_symlink_to_the_project(proj: Path, tmp_path: Path) -> None:
    link = tmp_path / "looks-harmless"
    link.symlink_to(proj)
    _refused(
        proj,
        "export",
        "r-0",
        "--out",
        str(link),
        "--overwrite",
        code=2,
        match="project",
    )
    assert link.is_symlink()


def test_out_inside_project_outside_revisions_refused(proj: Path) -> None:
    _refused(
        proj,
        "export",
        "r-0",
        "--out",
        str(proj / "reports" / "x"),
        code=2,
        match="inside the project",
    )
    assert not (proj / "reports" / "x").exists()


def test_overwrite_refuses_user_folder_and_keeps_it(proj: Path, tmp_path: Path) -> None:
    user = tmp_path / "thesis"
    user.mkdir()
    (user / "chapter1.tex").write_text("precious")
    (user / "manifest.json").write_text(json.dumps({"files": {}}))  # not ours
    _refused(
        proj,
        "export",
        "r-0",
        "--out",
        str(user),
        "--overwrite",
        code=2,
        match="no retest manifest.json",
    )
    assert (user / "chapter1.tex").read_text() == "precious"


def test_overwrite_refuses_a_file(proj: Path, tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("keep")
    _refused(
        proj, "export", "r-0", "--out", str(f), "--overwrite", code=2, match="is a file"
    )
    assert f.read_text() == "keep"


def test_overwrite_replaces_our_own_export(proj: Path, tmp_path: Path) -> None:
    out = tmp_path / "release"
    code, text = _run(proj, "export", "r-0", "--out", str(out))
    assert code == 0, text
    assert _is_export(out)
    first = (out / "manifest.json").read_bytes()
    (out / ".DS_Store").write_text("x")  # a file browser's, not the user's
    code, text = _run(
        proj, "export", "r-0", "--out", str(out), "--overwrite", "--format", "npy"
    )
    assert code == 0, text
    assert not (out / ".DS_Store").exists()
    assert (out / "manifest.json").read_bytes() == first  # deterministic


@pytest.mark.parametrize("extra", ["notes.txt", "analysis/fig1.py", "0/mine.png"])
def test_overwrite_refuses_an_export_holding_the_users_files(
    proj: Path, tmp_path: Path, extra: str
) -> None:
    """Files put into an export folder after it was written are the user's:
    --overwrite would delete them, so it refuses and keeps everything."""
    out = tmp_path / "release"
    code, text = _run(proj, "export", "r-0", "--out", str(out), "--format",
                      "imagefolder")  # fmt: skip
    assert code == 0, text
    (out / extra).parent.mkdir(parents=True, exist_ok=True)
    (out / extra).write_text("mine")
    before = _snapshot(out)
    line = _refused(proj, "export", "r-0", "--out", str(out), "--overwrite",
                    "--format", "imagefolder", code=2, match=extra)  # fmt: skip
    assert "did not export" in line
    assert _snapshot(out) == before


# ---------------------------------------------------------------- 2. names


@pytest.mark.parametrize(
    "args",
    [
        ["export", "r-0", "--name", "../../x", "--out", "o"],
        ["export", "r-0", "--name", "a/b", "--out", "o"],
        ["export", "r-0", "--name", "..", "--out", "o"],
        ["export", "r-0", "--name", "-rf", "--out", "o"],
        ["export", "r-0", "--name", "a\nb", "--out", "o"],
        ["export", "../../x"],
        ["export", "r-0/.."],
    ],
)
def test_export_names_cannot_escape(
    proj: Path, tmp_path: Path, args: list[str]
) -> None:
    args = [str(tmp_path / a) if a == "o" else a for a in args]
    before_parent = sorted(p.name for p in tmp_path.iterdir())
    # a bad --name is a bad option value (2); a revision name that no revision can
    # have is a missing revision (1)
    _refused(proj, *args, match="name", code=2 if "--name" in args else 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == before_parent
    assert not (tmp_path.parent / "x_data.npy").exists()
    assert not (tmp_path / "x").exists()  # revisions/../../x from the project


# ---------------------------------------------------------------- 3. integrity


def _corrupt_array_row(root: Path, row: int) -> None:
    data = root / "arrays" / "cand8.u8"
    raw = bytearray(data.read_bytes())
    raw[row * 192] ^= 0xFF
    data.write_bytes(bytes(raw))


@pytest.mark.parametrize("fmt", ["npy", "cifar", "imagefolder", PARQUET])
def test_overwritten_pixels_are_not_certified(
    proj: Path, tmp_path: Path, fmt: str
) -> None:
    _corrupt_array_row(proj, 3)
    out = tmp_path / "o"
    line = _refused(
        proj,
        "export",
        "r-0",
        "--format",
        fmt,
        "--out",
        str(out),
        match="does not match its content hash",
    )
    assert "arrays/cand8 row 3" in line and "retest check" in line
    assert not out.exists() and not list(tmp_path.glob(".o.*"))


def test_damaged_original_image_is_caught(proj: Path, tmp_path: Path) -> None:
    _corrupt_array_row(proj, N)  # the original test:0 lives in row N
    line = _refused(
        proj,
        "export",
        "r-0",
        "--out",
        str(tmp_path / "o"),
        "--force",
        match="test:0",
    )
    assert "does not match its content hash" in line


def test_damaged_image_file_is_caught(proj: Path, tmp_path: Path) -> None:
    (f,) = (proj / "images").iterdir()
    f.write_bytes(f.read_bytes()[:-1] + b"\x00")
    _refused(
        proj,
        "export",
        "r-0",
        "--format",
        "imagefolder",
        "--out",
        str(tmp_path / "o"),
        match=f"images/{f.name}",
    )


def test_nothing_left_in_default_location(proj: Path) -> None:
    _corrupt_array_row(proj, 0)
    _refused(proj, "export", "r-0", match="content hash")
    assert list((proj / "revisions").iterdir()) == []


# ---------------------------------------------------------------- 4. leftovers


def _dead_pid() -> int:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(proc.stdout)


def test_stale_staging_folders_are_removed(proj: Path, tmp_path: Path) -> None:
    pid = _dead_pid()
    out = tmp_path / "o"
    tmp = tmp_path / f".o.tmp-{pid}"
    (tmp / "0").mkdir(parents=True)
    (tmp / "0" / "0.png").write_bytes(b"partial")
    live = tmp_path / f".o.tmp-{os.getppid()}"  # a running process: untouched
    live.mkdir()
    other = tmp_path / f".other.tmp-{pid}"  # another target's: untouched
    other.mkdir()
    res = CliRunner().invoke(
        app, ["export", "r-0", "--out", str(out), "--project", str(proj), "--json"]
    )
    assert res.exit_code == 0, res.output
    payload = json.loads(res.output[res.output.index("{") :])
    assert payload["cleaned"] == [str(tmp)]
    assert not tmp.exists() and live.is_dir() and other.is_dir()
    assert _is_export(out)


def test_old_export_of_a_killed_overwrite_is_restored(
    proj: Path, tmp_path: Path
) -> None:
    """Killed between moving the old export aside and renaming the new one in:
    the next run puts the old export back first, then overwrites it normally."""
    out = tmp_path / "o"
    with Project.open(proj) as p:
        export_revision(p, "r-0", format="npy", out=out)
    old = tmp_path / f".o.old-{_dead_pid()}"
    os.replace(out, old)
    code, text = _run(proj, "export", "r-0", "--out", str(out))
    assert code == 2 and "--overwrite" in text  # the restored export is there
    assert not old.exists() and _is_export(out)
    code, text = _run(proj, "export", "r-0", "--out", str(out), "--overwrite")
    assert code == 0, text


def test_killed_export_leaves_a_clean_retry(proj: Path, tmp_path: Path) -> None:
    """A real export process killed mid-write; the next run cleans up after it."""
    out = tmp_path / "o"
    code = (
        "import os, signal, sys\n"
        "from retest.project._project import Project\n"
        "from retest.stages.export._export import export_revision\n"
        "def die(*a):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "with Project.open(sys.argv[1]) as p:\n"
        "    export_revision(p, 'r-0', format='imagefolder', out=sys.argv[2],\n"
        "                    progress=die)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(proj), str(out)], capture_output=True
    )
    assert proc.returncode == -9, proc.stderr
    assert len(list(tmp_path.glob(".o.tmp-*"))) == 1
    code_, text = _run(
        proj, "export", "r-0", "--format", "imagefolder", "--out", str(out)
    )
    assert code_ == 0, text
    assert not list(tmp_path.glob(".o.*"))
    assert "leftovers of killed exports" in text


# ---------------------------------------------------------------- 5. fitness


def test_invalid_revision_refused_unless_force(proj: Path, tmp_path: Path) -> None:
    _refused(proj, "export", "bad-0", "--out", str(tmp_path / "o"), match="INVALID")
    code, text = _run(proj, "export", "bad-0", "--out", str(tmp_path / "o"), "--force")
    assert code == 0, text


def test_empty_revision_refused_unless_force(proj: Path, tmp_path: Path) -> None:
    _refused(proj, "export", "empty-0", "--out", str(tmp_path / "o"), match="empty")
    code, text = _run(
        proj, "export", "empty-0", "--out", str(tmp_path / "o"), "--force", "-f",
        "imagefolder",
    )  # fmt: skip
    assert code == 0, text


def test_members_blacklisted_since_sampling_refused(proj: Path, tmp_path: Path) -> None:
    members, _ = _project(tmp_path / "again")
    with Project.open(proj) as p:
        p.store.blacklist.add(
            [BlacklistEvent(members[k], "drawing", "me") for k in (1, 4, 5, 6)]
        )
    line = _refused(
        proj, "export", "r-0", "--out", str(tmp_path / "o"), match="no longer eligible"
    )
    assert line.count("blacklisted") == 3 and "4 of 10 members" in line
    assert members[1] in line
    code, text = _run(proj, "export", "r-0", "--out", str(tmp_path / "o"), "--force")
    assert code == 0, text


def test_parquet_without_pyarrow_is_one_line(
    proj: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the [parquet] extra, the export says what to install (exit 2,
    nothing written) instead of failing half-way with a traceback."""
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError
    out = tmp_path / "pq"
    line = _refused(
        proj,
        "export",
        "r-0",
        "--format",
        "parquet",
        "--out",
        str(out),
        match="pip install 'retest[parquet]'",
        code=2,  # an option value this installation cannot serve
    )
    assert "--format" in line
    assert not out.exists()
