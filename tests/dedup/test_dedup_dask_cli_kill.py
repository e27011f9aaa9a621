"""``retest dedup --cluster`` against a real scheduler and workers started with
Dask's own commands (separate processes): a worker SIGKILLed mid-run is replaced
and the stored neighbours equal the local engine's; shards reach workers that
cannot read the shared file.

Every process is started by the test and killed in a ``finally``; every wait has
a deadline, so a hang fails the test instead of blocking the suite.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from checkout_cli import DASK, RETEST  # type: ignore[import-not-found]
from retest.cluster import ClusterReferences
from retest.dedup.knn import knn
from retest.errors import StageError
from retest.project import Project
from retest.store.artifacts import PixelArray
from retest.store.rows import CandidateRow, ReferenceRow, content_id

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None,
    reason="dask.distributed (the `dask scheduler` command) is not installed",
)

N_REF, N_CAND, SHAPE, CHUNK = 24_000, 360, (32, 32, 3), 30
DEADLINE = 100.0  # seconds for one whole CLI run


class DaskProcesses:
    """A scheduler and workers as child processes; everything is killed on exit."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.file = tmp / "scheduler.json"
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._spawn(
            "scheduler",
            [
                *("scheduler", "--host", "127.0.0.1", "--port", "0"),
                *("--dashboard-address", ":0", "--scheduler-file", str(self.file)),
            ],
        )
        deadline = time.monotonic() + 60
        while not self.file.exists() or not self.file.read_text().strip():
            self._alive_or_fail("scheduler", deadline)
            time.sleep(0.1)
        self.address = json.loads(self.file.read_text())["address"]

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{name}.log", "wb")  # closed once the child has it
        proc = subprocess.Popen(
            [*DASK, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def _alive_or_fail(self, name: str, deadline: float) -> None:
        if time.monotonic() > deadline:
            pytest.fail(f"{name} not ready in time:\n{self.log(name)}")

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def start_worker(self, name: str) -> None:
        self.workers[name] = self._spawn(
            name,
            [
                *("worker", "--scheduler-file", str(self.file), "--name", name),
                *("--nworkers", "1", "--nthreads", "1", "--no-nanny"),
                *("--host", "127.0.0.1", "--no-dashboard"),
            ],
        )

    def kill(self, name: str) -> None:
        proc = self.workers.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:  # pragma: no cover - raced with exit
                    pass
            proc.wait(timeout=10)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[DaskProcesses, object]]:
    from dask.distributed import Client

    procs = DaskProcesses(tmp_path)
    client = None
    try:
        procs.start_worker("a")
        procs.start_worker("b")
        client = Client(procs.address, timeout="30s")
        client.wait_for_workers(2, timeout=60)
        yield procs, client
    finally:
        if client is not None:
            client.close()
        procs.close()


def _worker_address(client: object, name: str) -> str | None:
    info = client.scheduler_info()["workers"]  # type: ignore[attr-defined]
    return next((a for a, w in info.items() if w.get("name") == name), None)


def _make_project(root: Path) -> Project:
    """Random colour references and candidates, a third planted near-copies."""
    rng = np.random.default_rng(17)
    refs = rng.integers(0, 256, size=(N_REF, *SHAPE), dtype=np.uint8)
    cands = rng.integers(0, 256, size=(N_CAND, *SHAPE), dtype=np.uint8)
    src = rng.choice(N_REF, N_CAND // 3, replace=False)
    noise = rng.integers(-3, 4, size=(len(src), *SHAPE))
    cands[: len(src)] = np.clip(refs[src].astype(int) + noise, 0, 255)
    p = Project.init(root, name="dask", classes=["a", "b"])
    px = PixelArray.create(p.arrays_dir, "px", shape=SHAPE)
    rows = px.append(refs)
    p.store.references.add(
        ReferenceRow(
            "train", i, i % 2, content_id(refs[i]), array_name="px", array_row=r
        )
        for i, r in enumerate(rows)
    )
    crow = px.append(cands)
    p.store.candidates.add(
        CandidateRow(
            content_id(img),
            "rand",
            str(i),
            class_id=i % 2,
            array_name="px",
            array_row=r,
        )
        for i, (img, r) in enumerate(zip(cands, crow, strict=True))
    )
    return p


def _dedup_cmd(root: Path, *extra: str) -> list[str]:
    return [
        *RETEST, "dedup", "--project", str(root),
        "--metrics", "l2", "--against", "original-train", "--k", "10",
        "--chunk-size", str(CHUNK), "--memory-gib", "0.25", *extra,
    ]  # fmt: skip


def _checkpoints(root: Path) -> int:
    con = sqlite3.connect(f"file:{root / 'retest.db'}?mode=ro", uri=True, timeout=5)
    try:
        return int(
            con.execute(
                "SELECT count(*) FROM stages WHERE stage LIKE 'dedup:%'"
            ).fetchone()[0]
        )
    except sqlite3.OperationalError:  # schema not readable yet
        return 0
    finally:
        con.close()


def _neighbours(root: Path) -> list[tuple[str, tuple[str, ...], tuple[float, ...]]]:
    with Project.open(root) as p:
        return sorted(
            (n.candidate_id, n.ref_ids, n.distances)
            for n in p.store.neardup.iter_neighbours(metric="l2")
        )


@pytest.mark.parametrize("shards", ["auto", "send"])
def test_cli_dedup_survives_a_killed_worker(
    cluster: tuple[DaskProcesses, object], tmp_path: Path, shards: str
) -> None:
    procs, client = cluster
    remote_root, local_root = tmp_path / "remote", tmp_path / "local"
    _make_project(remote_root).close()
    shutil.copytree(remote_root, local_root)
    n_chunks = -(-N_CAND // CHUNK)

    run = subprocess.Popen(
        _dedup_cmd(remote_root, "--cluster", procs.address, "--shards", shards),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        victim = None
        deadline = time.monotonic() + DEADLINE
        # kill worker "a" while it runs a shard task and the run is part-way
        while time.monotonic() < deadline and run.poll() is None:
            addr = _worker_address(client, "a")
            busy = addr and client.processing().get(addr)  # type: ignore[attr-defined]
            if busy and _checkpoints(remote_root) >= 1:
                victim = addr
                procs.kill("a")
                break
            time.sleep(0.05)
        assert victim is not None, "the run ended before a worker could be killed"
        done_at_kill = _checkpoints(remote_root)
        assert run.poll() is None and done_at_kill < n_chunks
        procs.start_worker("c")
        _, err = run.communicate(timeout=max(5.0, deadline - time.monotonic()))
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, err.decode()[-2000:]
    assert _worker_address(client, "a") is None  # really gone
    text = err.decode()
    assert "knn shards" in text  # shards done/total bar (with its ETA column)

    local = subprocess.run(
        _dedup_cmd(local_root), capture_output=True, timeout=DEADLINE, check=False
    )
    assert local.returncode == 0, local.stderr.decode()[-2000:]
    remote_lists, local_lists = _neighbours(remote_root), _neighbours(local_root)
    assert len(remote_lists) == N_CAND
    assert remote_lists == local_lists  # ids and float distances, exactly
    # planted near-copies (|noise| <= 3 per value) come first, far below random
    # pairs (~1e7): the comparison covers real neighbours, not only noise
    close = sum(d[0] <= 9 * 32 * 32 * 3 for _, _, d in remote_lists)
    assert close == N_CAND // 3


def _refs_file(tmp_path: Path, seed: int) -> tuple[np.ndarray, np.ndarray, Path]:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=(3000, 192), dtype=np.uint8)
    path = tmp_path / f"refs{seed}.npy"
    np.save(path, data)
    q = rng.integers(0, 256, size=(40, 192), dtype=np.uint8)
    return np.load(path, mmap_mode="r"), q, path


def test_workers_that_cannot_read_the_file_are_sent_shards(
    cluster: tuple[DaskProcesses, object], tmp_path: Path
) -> None:
    _, client = cluster
    refs, q, path = _refs_file(tmp_path, 1)
    local = knn(q, refs, 7)
    shards = ClusterReferences(client, refs, n_shards=4)
    first = shards.knn(q, 7)
    assert shards.shards_sent == 0  # shared path: nothing sent
    path.unlink()  # the client still maps the data; workers cannot open it now
    gone = ClusterReferences(client, refs, n_shards=4)
    second = gone.knn(q, 7)
    assert gone.shards_sent == 4  # every shard fell back to being sent
    for res in (first, second):
        np.testing.assert_array_equal(res.indices, local.indices)
        np.testing.assert_array_equal(res.distances, local.distances)


def test_a_different_file_at_the_path_is_never_read(
    cluster: tuple[DaskProcesses, object], tmp_path: Path
) -> None:
    _, client = cluster
    refs, q, path = _refs_file(tmp_path, 2)
    local = knn(q, refs, 5)
    auto = ClusterReferences(client, refs, n_shards=3)
    other = tmp_path / "other.npy"
    np.save(other, np.zeros((3000, 192), np.uint8))  # same size, other content
    os.replace(other, path)  # the client's mapping keeps the old data
    res = auto.knn(q, 5)
    assert auto.shards_sent == 3
    np.testing.assert_array_equal(res.indices, local.indices)
    np.testing.assert_array_equal(res.distances, local.distances)
    strict = ClusterReferences(client, refs, n_shards=3, transfer="path")
    with pytest.raises(StageError, match="differs from the client's"):
        strict.knn(q, 5)
