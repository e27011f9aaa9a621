"""``retest crowd tasks`` pays no worker to label a copy of an original image.

A real project (SQLite, pixel arrays) built through the CLI on real Fashion-MNIST:
500 training and 300 test originals, and a pool of other training images with
planted exact, 1-px shifted and brightened copies of originals and a group of two
near-identical pool images. Candidates that the eligibility decision of ``retest
sample`` excludes as copies of originals get no task; pool groups and pairs not
yet reviewed do; before ``retest dedup`` every candidate gets one, with a warning.
"""

from __future__ import annotations

import gzip
import re
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from retest.cli.main import app
from retest.project import REASONS, Project
from retest.stages.crowd import COPY_REASONS, task_from_row
from retest.store.rows import content_id

FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
GRID = ("--images-per-task", "24", "--controls", "3", "--seed", "5")
LINE = re.compile(
    r"left out (\d+) candidates already excluded as copies of original images \((.*?);"
)
runner = CliRunner()


def cli(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def ok(*args: object):
    r = cli(*args)
    assert r.exit_code == 0, (args, r.output, r.exception)
    return r


def _idx(name: str, header: int) -> np.ndarray:
    path = FASHION_MNIST / name
    if not path.is_file():
        pytest.skip(f"Fashion-MNIST is absent ({path})")
    return np.frombuffer(gzip.decompress(path.read_bytes()), np.uint8, offset=header)


def _write_idx(path: Path, array: np.ndarray) -> Path:
    header = struct.pack(">HBB", 0, 0x08, array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(gzip.compress(header + np.ascontiguousarray(array).tobytes()))
    return path


def _shift(img: np.ndarray) -> np.ndarray:
    """A true 1-px translation to the right (the last column drops out)."""
    out = np.zeros_like(img)
    out[:, 1:] = img[:, :-1]
    return out


def _brighten(img: np.ndarray) -> np.ndarray:
    return np.clip(img.astype(np.int16) + 12, 0, 255).astype(np.uint8)


@dataclass
class Built:
    root: Path
    fresh: Path  # references and pool registered, no dedup run
    deduped: Path  # the same after `retest dedup`
    pool: np.ndarray
    labels: np.ndarray
    planted: dict[str, str]  # candidate id → "exact of test:3", ...
    group: list[str]  # two near-identical pool images
    more: np.ndarray  # images added after dedup: a test original and new ones
    more_labels: np.ndarray


def _project(root: Path, name: str, pool: np.ndarray, labels: np.ndarray) -> Path:
    """A project with the originals of ``root`` and ``pool`` as candidates."""
    proj = root / name
    np.savez(root / f"{name}.npz", images=pool, labels=labels)
    ok("init", proj, "--classes-from", "fashion-mnist")
    for split, x, y in (("train", "tr", "trl"), ("test", "te", "tel")):
        ok("reference", "add", "idx", root / f"{x}.gz", "--labels",
           root / f"{y}.gz", "--split", split, "--project", proj)  # fmt: skip
    ok("source", "add", "arrays", root / f"{name}.npz", "--project", proj)
    return proj


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    xtr = _idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
    ytr = _idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64)
    xte = _idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
    yte = _idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64)
    rng = np.random.default_rng(20261124)
    perm = rng.permutation(len(xtr))
    tr, free = perm[:500], perm[500:]
    te = rng.permutation(len(xte))[:300]
    root = tmp_path_factory.mktemp("skip-copies")
    _write_idx(root / "tr.gz", xtr[tr])
    _write_idx(root / "trl.gz", ytr[tr].astype(np.uint8))
    _write_idx(root / "te.gz", xte[te])
    _write_idx(root / "tel.gz", yte[te].astype(np.uint8))

    images: list[np.ndarray] = []
    labels: list[int] = []
    planted: dict[str, str] = {}
    picked: set[int] = set()
    for split, rows, x, y in (("test", te, xte, yte), ("train", tr, xtr, ytr)):
        picks = rng.choice(len(rows), 9, replace=False)
        picked |= {int(rows[p]) for p in picks} if split == "test" else set()
        for k, row in enumerate(picks):
            kind = ("exact", "shift", "bright")[k // 3]
            img = x[rows[row]]
            px = {"exact": img, "shift": _shift(img), "bright": _brighten(img)}[kind]
            images.append(px)
            labels.append(int(y[rows[row]]))
            planted[content_id(px)] = f"{kind} of {split}:{row}"
    base = xtr[free[0]]
    group = [base, _shift(base)]
    images += group
    labels += [int(ytr[free[0]])] * 2
    seen = {x.tobytes() for x in images} | {xtr[i].tobytes() for i in tr}
    fill = [i for i in free[1:] if xtr[i].tobytes() not in seen][:60]
    images += [xtr[i] for i in fill]
    labels += [int(ytr[i]) for i in fill]
    order = rng.permutation(len(images))
    pool = np.stack(images)[order]
    pool_labels = np.asarray(labels, np.int64)[order]

    fresh = _project(root, "fresh", pool, pool_labels)
    deduped = root / "deduped"
    shutil.copytree(fresh, deduped)
    ok("dedup", "--project", deduped)
    # added after dedup: a test original no candidate copies yet, and new images
    orig = next(int(i) for i in te if int(i) not in picked)
    new = [i for i in free[1:] if i not in set(fill)][:3]
    more = np.stack([xte[orig], *(xtr[i] for i in new)])
    more_labels = np.asarray([yte[orig], *(ytr[i] for i in new)], np.int64)
    return Built(
        root, fresh, deduped, pool, pool_labels, planted,
        [content_id(g) for g in group], more, more_labels,
    )  # fmt: skip


def _copy(built: Built, src: Path, name: str) -> Path:
    dst = built.root / name
    shutil.copytree(src, dst)
    return dst


def _tasks(proj: Path) -> list[tuple[str, tuple[str, ...], dict]]:
    with Project.open(proj) as p:
        return [(t.id, tuple(t.items), dict(t.controls)) for t in p.store.tasks.list()]


def _shown(proj: Path) -> set[str]:
    """Candidates in the project's stored tasks (controls are not candidates)."""
    with Project.open(proj) as p:
        return {c for t in p.store.tasks.list() for c in task_from_row(t).candidates}


def _copy_counts(proj: Path) -> dict[str, int]:
    """What `retest status --json` counts under each copy reason."""
    import json

    status = json.loads(ok("status", "--json", "--project", proj).stdout)
    return {r: status["eligibility"]["counts"][r] for r in COPY_REASONS}


def _queued(proj: Path) -> list[dict]:
    import json

    return json.loads(ok("dedup-queue", "--json", "--project", proj).stdout)


def test_copy_reasons_are_eligibility_reasons() -> None:
    assert set(COPY_REASONS) <= set(REASONS)
    assert not {"pool_duplicate", "unreviewed", "blacklisted"} & set(COPY_REASONS)


def test_no_task_shows_a_copy_of_an_original(built: Built) -> None:
    proj = _copy(built, built.deduped, "after-dedup")
    r = ok("crowd", "tasks", *GRID, "--project", proj)
    assert "warning" not in r.stderr, r.stderr
    shown = _shown(proj)
    everyone = {content_id(x) for x in built.pool}
    leaked = sorted(built.planted[c] for c in shown if c in built.planted)
    assert not leaked, f"tasks show {len(leaked)} planted copies: {leaked}"
    # the line counts what `status` excludes as copies, and says of which kind
    m = LINE.search(r.stdout)
    assert m, r.stdout
    counts = _copy_counts(proj)
    assert int(m[1]) == sum(counts.values()) >= len(built.planted)
    assert f"{counts['exact_copy']} exact copies" in m[2]
    assert len(shown) + int(m[1]) == len(everyone)  # every other candidate is shown
    # both members of a pool group and candidates with pending pairs get tasks
    assert set(built.group) <= shown
    pending = {q["candidate"] for q in _queued(proj)}
    assert pending <= shown and pending - set(built.planted), pending


def test_remaining_candidates_get_the_tasks_a_pool_without_copies_gets(
    built: Built,
) -> None:
    proj = _copy(built, built.deduped, "same-tasks")
    ok("crowd", "tasks", *GRID, "--project", proj)
    shown = _shown(proj)
    keep = [i for i, x in enumerate(built.pool) if content_id(x) in shown]
    assert len(keep) < len(built.pool)
    lean = _project(built.root, "without-copies", built.pool[keep], built.labels[keep])
    ok("crowd", "tasks", *GRID, "--project", lean)
    assert _tasks(lean) == _tasks(proj)


def test_include_copies_and_a_run_before_dedup_give_every_candidate_a_task(
    built: Built,
) -> None:
    everyone = {content_id(x) for x in built.pool}
    before = _copy(built, built.fresh, "before-dedup")
    r = ok("crowd", "tasks", *GRID, "--project", before)
    warnings = [x for x in r.stderr.splitlines() if x.startswith("warning:")]
    assert len(warnings) == 1, r.stderr
    assert "dedup has not run" in r.stderr and "`retest dedup`" in r.stderr
    assert "left out" not in r.stdout
    assert _shown(before) == everyone

    proj = _copy(built, built.deduped, "include-copies")
    r = ok("crowd", "tasks", *GRID, "--include-copies", "--project", proj)
    assert r.stderr == "" and "left out" not in r.stdout, r.output
    assert _shown(proj) == everyone
    assert _tasks(proj) == _tasks(before)  # the behaviour without this check
    assert "--include-copies" in ok("crowd", "tasks", "--help").stdout


def test_a_confirmed_pair_with_an_original_is_left_out(built: Built) -> None:
    proj = _copy(built, built.deduped, "confirmed")
    originals = ("train:", "test:")
    queue = _queued(proj)
    item = next((q for q in queue if q["references"][0].startswith(originals)), None)
    assert item is not None, f"no queued pair with an original: {queue}"
    cand, refs = item["candidate"], item["references"]
    orig = refs[0]
    ok("dedup-verdict", cand, item["metric"], "--shown", ",".join(refs),
       "--duplicates", orig, "--who", "ann", "--project", proj)  # fmt: skip
    r = ok("crowd", "tasks", *GRID, "--project", proj)
    assert cand not in _shown(proj)
    assert "1 in a near-duplicate group with an original" in r.stdout, r.stdout
    assert _copy_counts(proj)["near_duplicate"] == 1


def test_candidates_added_after_dedup_are_flagged_and_exact_copies_still_left_out(
    built: Built,
) -> None:
    import json

    proj = _copy(built, built.deduped, "stale")
    np.savez(built.root / "more.npz", images=built.more, labels=built.more_labels)
    ok("source", "add", "arrays", built.root / "more.npz", "--name", "more",
       "--project", proj)  # fmt: skip
    r = ok("crowd", "tasks", *GRID, "--json", "--project", proj)
    out = json.loads(r.stdout)
    new = len(built.more) - 1  # the test original is an exact copy, known by hash
    assert f"warning: {new} candidates added after the last dedup run" in r.stderr
    assert out["unchecked"] == new and out["copies_checked"] is True
    assert out["left_out"] == {
        k: v for k, v in _copy_counts(proj).items() if v
    }  # the new exact copy among them
    shown = _shown(proj)
    assert content_id(built.more[0]) not in shown
    assert {content_id(x) for x in built.more[1:]} <= shown
