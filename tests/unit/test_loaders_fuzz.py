"""Property test of the file loaders against damaged input.

For every loader (``.npy``/``.npz`` arrays, IDX, CIFAR pickle batches, prediction
folders, MTurk results CSV) and every mutation of a file it wrote (truncation,
byte replacement, wrong dtype, wrong shape, empty, a directory instead of the
file, non-UTF-8 bytes) the loader must either

* load correctly: the data written, except for the one element the replaced byte
  sits in (formats without checksums cannot notice that; anything more — fewer
  rows, another shape, another dtype — is a silent change), or
* raise a :class:`~retest.errors.RetestError` whose message is one line,

and never raise anything else. For the MTurk import a failure must leave the
project database unchanged.
"""

from __future__ import annotations

import csv
import io
import json
import pickle
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retest.datasets.cifar10 import write_cifar_batch
from retest.datasets.idx import write_idx
from retest.errors import RetestError
from retest.labeling.tasks import image_token
from retest.models.prediction_files import runners_from_folders
from retest.project import Project
from retest.sources.arrays import ArraySource, CifarSource, IdxSource
from retest.stages.crowd import create_tasks, import_mturk
from retest.store import open_store
from retest.store.rows import CandidateRow, ClassRow, ReferenceRow

FUZZ = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# A mutation: (kind, a, b) with a, b in [0, 1) locating it in the file.
MUTATIONS = st.tuples(
    st.sampled_from(["none", "truncate", "flip", "empty", "dir", "non_utf8"]),
    st.floats(0, 1, exclude_max=True),
    st.integers(1, 255),
)


def _mutate(path: Path, mutation: tuple[str, float, int]) -> str:
    """Damage ``path`` in place; return a description for failure messages."""
    kind, where, byte = mutation
    data = path.read_bytes()
    pos = int(where * len(data))
    if kind == "truncate":
        path.write_bytes(data[:pos])
    elif kind == "flip":
        b = bytearray(data)
        b[pos] = b[pos] ^ byte  # always a different byte
        path.write_bytes(bytes(b))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "dir":
        path.unlink()
        path.mkdir()
        (path / "inner").write_bytes(data)
    elif kind == "non_utf8":
        path.write_bytes(data[:pos] + b"\xff\xfe\xc3(" + data[pos + 4 :])
    return f"{kind} at byte {pos}"


def _allowed(mutation: tuple[str, float, int]) -> int:
    """Elements a mutation may change in a format without checksums: the bytes it
    replaced (1 for a flip, 4 for the non-UTF-8 run), nothing for the others."""
    return {"flip": 1, "non_utf8": 4}.get(mutation[0], 0)


def _reset(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def _expect_one_line_error(err: BaseException, what: str) -> None:
    assert isinstance(err, RetestError), f"{what}: {type(err).__name__}: {err}"
    msg = str(err)
    assert msg and "\n" not in msg, f"{what}: message is not one line: {msg!r}"


def _n_diff(a: np.ndarray, b: np.ndarray) -> int:
    assert a.shape == b.shape, f"shape changed silently: {b.shape} -> {a.shape}"
    return int((np.asarray(a) != np.asarray(b)).sum())


def _run(load: Callable[[], Any], check: Callable[[Any], None], what: str) -> str:
    try:
        got = load()
    except Exception as err:  # the property: only one-line RetestErrors
        _expect_one_line_error(err, what)
        return "error"
    check(got)
    return "loaded"


# ------------------------------------------------------------------ .npy / .npz


@FUZZ
@given(
    shape=st.tuples(st.integers(1, 5), st.integers(1, 4), st.integers(1, 4)),
    channels=st.sampled_from([None, 1, 3]),
    variant=st.sampled_from(
        ["npy", "npz", "wrong_dtype", "wrong_shape", "float_labels"]
    ),
    mutation=MUTATIONS,
    seed=st.integers(0, 2**16),
)
def test_array_files(
    tmp_path: Path,
    shape: tuple[int, int, int],
    channels: int | None,
    variant: str,
    mutation: tuple[str, float, int],
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    full = shape if channels is None else (*shape, channels)
    images = rng.integers(0, 256, size=full, dtype=np.uint8)
    labels = rng.integers(0, 3, size=shape[0])
    path = tmp_path / ("a.npz" if variant in ("npz", "float_labels") else "a.npy")
    _reset(path)
    bad_content = variant in ("wrong_dtype", "wrong_shape")
    if variant == "npy":
        np.save(path, images)
    elif variant == "wrong_dtype":
        np.save(path, images.astype(np.float32))
    elif variant == "wrong_shape":
        np.save(path, images.reshape(shape[0], -1))
    elif variant == "npz":
        np.savez_compressed(path, images=images, labels=labels)
    else:  # labels saved as floats: whole values are fine, 0.5 is refused
        frac = labels + (0.5 if seed % 2 else 0.0)
        bad_content = bool(seed % 2)
        np.savez(path, images=images, labels=frac)
    what = f"{variant} {_mutate(path, mutation)}"

    def check(src: ArraySource) -> None:
        assert not bad_content, f"{what}: wrong content was accepted"
        assert src.images.dtype == np.uint8, what
        diff = _n_diff(np.asarray(src.images), images)
        if src.labels is not None:
            assert src.labels.dtype == np.int64
            diff += _n_diff(src.labels, labels)
        else:
            assert path.suffix == ".npy", f"{what}: labels vanished"
        assert diff <= _allowed(mutation), f"{what}: {diff} changed"

    _run(lambda: ArraySource(path), check, what)


# ------------------------------------------------------------------ IDX


@FUZZ
@given(
    n=st.integers(1, 6),
    gz=st.booleans(),
    target=st.sampled_from(["images", "labels"]),
    variant=st.sampled_from(["ok", "wrong_dtype", "wrong_shape"]),
    mutation=MUTATIONS,
    seed=st.integers(0, 2**16),
)
def test_idx_files(
    tmp_path: Path,
    n: int,
    gz: bool,
    target: str,
    variant: str,
    mutation: tuple[str, float, int],
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 4, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n).astype(np.uint8)
    ext = ".gz" if gz else ""
    ip, lp = (
        tmp_path / f"x-images-idx3-ubyte{ext}",
        tmp_path / f"x-labels-idx1-ubyte{ext}",
    )
    _reset(ip)
    _reset(lp)
    write_idx(ip, images)
    write_idx(lp, labels)
    if variant == "wrong_dtype":  # float pixels / labels that are not whole numbers
        if target == "images":
            write_idx(ip, images.astype(np.float32))
        else:
            write_idx(lp, labels.astype(np.float32) + 0.25)
    elif variant == "wrong_shape":
        if target == "images":
            write_idx(ip, images.reshape(n, -1))
        else:
            write_idx(lp, np.stack([labels, labels], axis=1))
    what = f"{target} {variant} gz={gz} {_mutate(ip if target == 'images' else lp, mutation)}"

    def check(src: IdxSource) -> None:
        assert variant == "ok", f"{what}: wrong content was accepted"
        assert src.labels is not None
        diff = _n_diff(np.asarray(src.images), images) + _n_diff(src.labels, labels)
        assert diff <= _allowed(mutation), f"{what}: {diff} changed"

    _run(lambda: IdxSource(ip, labels_path=lp), check, what)


# ------------------------------------------------------------------ CIFAR batches


@FUZZ
@given(
    n=st.integers(1, 3),
    variant=st.sampled_from(["ok", "float_labels", "wrong_dtype", "wrong_shape"]),
    mutation=MUTATIONS,
    seed=st.integers(0, 2**16),
)
def test_cifar_batches(
    tmp_path: Path,
    n: int,
    variant: str,
    mutation: tuple[str, float, int],
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n)
    path = tmp_path / "data_batch_1"
    _reset(path)
    write_cifar_batch(path, images, labels)
    if variant != "ok":
        d = pickle.loads(path.read_bytes())
        if variant == "float_labels":
            d[b"labels"] = [float(v) + 0.5 for v in labels]
        elif variant == "wrong_dtype":
            d[b"data"] = d[b"data"].astype(np.int16)
        else:
            d[b"data"] = d[b"data"][:, :-1]
        path.write_bytes(pickle.dumps(d, protocol=4))
    what = f"{variant} {_mutate(path, mutation)}"

    def check(src: CifarSource) -> None:
        assert variant == "ok", f"{what}: wrong content was accepted"
        assert src.labels is not None
        diff = _n_diff(np.asarray(src.images), images) + _n_diff(src.labels, labels)
        assert diff <= _allowed(mutation), f"{what}: {diff} changed"

    _run(lambda: CifarSource(path), check, what)


# ------------------------------------------------------------------ prediction folders

K = 10


def _write_testbed(d: Path, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Four models, one per format; returns each model's top-1 as written."""
    top1 = {m: rng.integers(0, K, size=n) for m in ("js", "npy", "csv", "probs")}
    (d / "js_predictions.json").write_text(json.dumps(top1["js"].tolist()))
    np.save(d / "npy.npy", top1["npy"])
    (d / "csv.csv").write_text("prediction\n" + "\n".join(map(str, top1["csv"])) + "\n")
    p = rng.dirichlet(np.ones(K), size=n) * 0.5 + 0.5 * np.eye(K)[top1["probs"]]
    np.save(d / "probs.npy", p.astype(np.float32))
    return top1


@FUZZ
@given(
    n=st.integers(2, 12),
    target=st.sampled_from(["js_predictions.json", "npy.npy", "csv.csv", "probs.npy"]),
    variant=st.sampled_from(["ok", "float_ids", "wrong_shape"]),
    mutation=MUTATIONS,
    seed=st.integers(0, 2**16),
)
def test_prediction_folders(
    tmp_path: Path,
    n: int,
    target: str,
    variant: str,
    mutation: tuple[str, float, int],
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    d = tmp_path / "testbed"
    _reset(d)
    d.mkdir()
    top1 = _write_testbed(d, rng, n)
    path = d / target
    model = target.split(".")[0].removesuffix("_predictions")
    if variant == "float_ids":  # non-integer class ids
        vals = (top1[model] + 0.5).tolist()
        if target.endswith(".json"):
            path.write_text(json.dumps(vals))
        elif target.endswith(".csv"):
            path.write_text("prediction\n" + "\n".join(map(str, vals)) + "\n")
        else:
            np.save(path, np.asarray(vals)[:, None].repeat(2, axis=1) * [1, -1])
    elif variant == "wrong_shape":  # one row short: must not pass for n images
        if target.endswith(".json"):
            path.write_text(json.dumps(top1[model][:-1].tolist()))
        elif target.endswith(".csv"):
            path.write_text("prediction\n" + "\n".join(map(str, top1[model][:-1])))
        else:
            np.save(path, np.load(path)[:-1])
    what = f"{target} {variant} {_mutate(path, mutation)}"

    def load() -> dict[str, np.ndarray]:
        runners = runners_from_folders({"ds": d}, n_classes=K)
        images = np.zeros((n, 1), dtype=np.uint8)
        return {r.name: r.predict(images, dataset="ds").top1 for r in runners}

    def check(got: dict[str, np.ndarray]) -> None:
        assert variant == "ok", f"{what}: wrong content was accepted"
        assert set(got) == set(top1), f"{what}: models changed: {sorted(got)}"
        for m, want in top1.items():
            diff = _n_diff(got[m], want)
            allowed = min(2, _allowed(mutation)) if m == model else 0
            assert diff <= allowed, f"{what}: {m} has {diff} changed predictions"

    _run(load, check, what)


# ------------------------------------------------------------------ MTurk results CSV

SECRET = b"0123456789abcdef0123456789abcdef"
COLUMNS = [
    "HITId", "AssignmentId", "WorkerId", "AssignmentStatus", "AcceptTime",
    "SubmitTime", "Input.task_id", "Answer.selected", "Approve", "Reject",
]  # fmt: skip


@pytest.fixture(scope="module")
def crowd_project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """A store with two grid tasks, and a valid results CSV answering both."""
    root = tmp_path_factory.mktemp("crowd")
    s = open_store(root / "retest.db")
    s.classes.put([ClassRow(0, "cat"), ClassRow(1, "dog")])
    s.references.add(ReferenceRow("test", i, i % 2, f"ref{i}") for i in range(40))
    s.candidates.add(
        CandidateRow(id=f"cand{c}_{i}", source="arrays", source_ref=str(i), class_id=c)
        for c in range(2)
        for i in range(10)
    )
    tasks = create_tasks(
        Project.from_store(root, s),
        images_per_task=16,
        pos_controls=3,
        neg_controls=3,
        seed=4,
    )
    s.close()
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for i, t in enumerate(tasks):
        chosen = t.items[: 5 + i]
        w.writerow(
            {
                "HITId": f"H{i}", "AssignmentId": f"A{i}", "WorkerId": f"W{i}",
                "AssignmentStatus": "Submitted", "AcceptTime": "Wed Mar 04 10:10:01 PST 2026",
                "SubmitTime": "Wed Mar 04 10:12:31 PST 2026",
                "Input.task_id": t.id,
                "Answer.selected": "|".join(
                    image_token(f"{t.id}|{item}", SECRET) for item in chosen
                ),
                "Approve": "", "Reject": "",
            }
        )  # fmt: skip
    return root / "retest.db", buf.getvalue().encode()


def _dump(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return list(con.iterdump())
    finally:
        con.close()


@FUZZ
@given(mutation=MUTATIONS)
def test_mturk_results_csv(
    tmp_path: Path, crowd_project: tuple[Path, bytes], mutation: tuple[str, float, int]
) -> None:
    pristine, results = crowd_project
    work = tmp_path / "work"
    _reset(work)
    work.mkdir()
    db = work / "retest.db"
    shutil.copy(pristine, db)
    path = work / "results.csv"
    path.write_bytes(results)
    what = _mutate(path, mutation)
    before = _dump(db)
    store = open_store(db)
    try:
        try:
            import_mturk(Project.from_store(work, store), path, secret=SECRET)
        except Exception as err:
            _expect_one_line_error(err, what)
            store.close()
            assert _dump(db) == before, f"{what}: a failed import changed the database"
            return
        stored = {e.assignment_id for e in store.annotations.list(kind="task")}
    finally:
        store.close()
    if mutation[0] == "none":
        assert stored == {"A0", "A1"}, f"{what}: imported {sorted(stored)}"
    else:
        assert stored <= {"A0", "A1"}, f"{what}: invented {sorted(stored)}"
