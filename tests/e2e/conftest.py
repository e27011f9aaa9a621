"""Real Fashion-MNIST inputs with planted copies, and a runner for the real CLI.

Nothing here imports retest: the CLI-only tests use the CLI only, the one of the
interpreter running the tests (``checkout_cli``), never one found on PATH.

The pool is what a careless collection would bring back: other training images
plus exact, 1-px shifted and brightened copies of original training and test
images, and small groups of near-identical pool images. Every choice is seeded.
"""

from __future__ import annotations

import gzip
import os
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from checkout_cli import RETEST  # type: ignore[import-not-found]

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
N_TRAIN, N_TEST = 3000, 1000
PER_CLASS_POOL = (
    24  # candidates per class: exactly one 64-image grid with 20+20 controls
)
N_PER_KIND = 5  # planted copies per (kind, split)
BRIGHTNESS = 12
SEED = 20261124


def _idx(path: Path, header: int) -> np.ndarray:
    return np.frombuffer(gzip.decompress(path.read_bytes()), np.uint8, offset=header)


def load_fashion_mnist() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train images, train labels, test images, test labels); skips when absent."""
    names = [f"{s}-{k}-ubyte.gz" for s in ("train", "t10k") for k in ("images-idx3", "labels-idx1")]  # fmt: skip
    missing = [n for n in names if not (FASHION_MNIST_DIR / n).is_file()]
    if missing:
        pytest.skip(
            f"Fashion-MNIST is absent ({FASHION_MNIST_DIR}/{missing[0]}): "
            "apt-get install dataset-fashion-mnist"
        )
    d = FASHION_MNIST_DIR
    xtr = _idx(d / names[0], 16).reshape(-1, 28, 28)
    ytr = _idx(d / names[1], 8).astype(np.int64)
    xte = _idx(d / names[2], 16).reshape(-1, 28, 28)
    yte = _idx(d / names[3], 8).astype(np.int64)
    return xtr, ytr, xte, yte


def shift(img: np.ndarray, axis: int) -> np.ndarray:
    """A true 1-px translation (zeros come in, the far row or column drops out)."""
    out = np.zeros_like(img)
    if axis == 1:
        out[:, 1:] = img[:, :-1]
    else:
        out[1:, :] = img[:-1, :]
    return out


def brighten(img: np.ndarray) -> np.ndarray:
    return np.clip(img.astype(np.int16) + BRIGHTNESS, 0, 255).astype(np.uint8)


@dataclass
class Planted:
    """One planted pool image: what it is a copy of and how it was made."""

    pixels: np.ndarray
    label: int
    kind: str  # exact | shift | bright | group
    of: str  # "train:ROW" / "test:ROW" (row in the reference file) or "group:G"


@dataclass
class Inputs:
    """The files to register and what was planted in the pool."""

    train_file: Path
    test_file: Path
    pool_file: Path
    more_file: Path
    train: np.ndarray
    train_labels: np.ndarray
    test: np.ndarray
    test_labels: np.ndarray
    pool: np.ndarray
    pool_labels: np.ndarray
    planted: list[Planted] = field(default_factory=list)
    groups: list[list[bytes]] = field(default_factory=list)


def write_idx(path: Path, array: np.ndarray) -> None:
    """A gzipped IDX file of uint8 ``array`` (magic 0x08, big-endian sizes), written
    here so that these inputs need nothing of retest."""
    assert array.dtype == np.uint8
    header = struct.pack(">HBB", 0, 0x08, array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(gzip.compress(header + np.ascontiguousarray(array).tobytes()))


def build_inputs(out: Path) -> Inputs:
    """Write the reference splits (IDX) and the candidate pool (npz) under ``out``."""
    xtr, ytr, xte, yte = load_fashion_mnist()
    rng = np.random.default_rng(SEED)
    perm = rng.permutation(len(xtr))
    ref_tr, free = perm[:N_TRAIN], perm[N_TRAIN:]
    ref_te = rng.permutation(len(xte))[:N_TEST]
    train, train_labels = xtr[ref_tr], ytr[ref_tr]
    test, test_labels = xte[ref_te], yte[ref_te]

    planted: list[Planted] = []
    for split, imgs, labels in (("train", train, train_labels), ("test", test, test_labels)):  # fmt: skip
        rows = rng.choice(len(imgs), 3 * N_PER_KIND, replace=False)
        for k, row in enumerate(rows):
            kind = ("exact", "shift", "bright")[k // N_PER_KIND]
            img = imgs[row]
            px = {"exact": img, "shift": shift(img, 1), "bright": brighten(img)}[kind]
            planted.append(Planted(px.copy(), int(labels[row]), kind, f"{split}:{row}"))

    # within-pool groups: a pool image with a shifted and/or a brightened copy
    seen = {x.tobytes() for x in (*train, *test)}
    fillers = [i for i in free if xtr[i].tobytes() not in seen]
    groups: list[list[bytes]] = []
    for g in range(6):  # four groups of three, two pairs
        i = fillers.pop()
        base = xtr[i]
        members = [base, shift(base, 0), brighten(base)]
        members = members if g < 4 else [base, members[1 + g % 2]]
        groups.append([m.tobytes() for m in members])
        planted += [
            Planted(m.copy(), int(ytr[i]), "group", f"group:{g}") for m in members
        ]

    # fill every class to PER_CLASS_POOL with other training images
    counts = np.bincount([p.label for p in planted], minlength=10)
    assert counts.max() <= PER_CLASS_POOL, counts
    used = {p.pixels.tobytes() for p in planted}
    pool = [p.pixels for p in planted]
    pool_labels = [p.label for p in planted]
    for c in range(10):
        need = PER_CLASS_POOL - counts[c]
        for i in fillers:
            if need == 0:
                break
            b = xtr[i].tobytes()
            if ytr[i] == c and b not in used:
                used.add(b)
                pool.append(xtr[i])
                pool_labels.append(c)
                need -= 1
    pool_arr = np.stack(pool).astype(np.uint8)
    labels_arr = np.asarray(pool_labels, np.int64)
    order = rng.permutation(len(pool_arr))  # planted copies not all at the front
    pool_arr, labels_arr = pool_arr[order], labels_arr[order]

    # a few more images for the stale-state refusal (never deduplicated)
    more_idx = [i for i in fillers if xtr[i].tobytes() not in used][:4]

    out.mkdir(parents=True, exist_ok=True)
    write_idx(out / "train-images-idx3-ubyte.gz", train)
    write_idx(out / "train-labels-idx1-ubyte.gz", train_labels.astype(np.uint8))
    write_idx(out / "t10k-images-idx3-ubyte.gz", test)
    write_idx(out / "t10k-labels-idx1-ubyte.gz", test_labels.astype(np.uint8))
    np.savez(out / "pool.npz", images=pool_arr, labels=labels_arr)
    np.savez(out / "more.npz", images=xtr[more_idx], labels=ytr[more_idx])
    return Inputs(
        out / "train-images-idx3-ubyte.gz",
        out / "t10k-images-idx3-ubyte.gz",
        out / "pool.npz",
        out / "more.npz",
        train,
        train_labels,
        test,
        test_labels,
        pool_arr,
        labels_arr,
        planted,
        groups,
    )


@dataclass
class Run:
    """One finished CLI call."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def describe(self) -> str:
        return (
            f"`retest {' '.join(self.args)}` exited {self.returncode} after "
            f"{self.seconds:.1f} s\nstdout:\n{self.stdout[-3000:]}\n"
            f"stderr:\n{self.stderr[-3000:]}"
        )


def run_cli(
    *args: str, cwd: Path, timeout: float = 600, env: dict[str, str] | None = None,
    kill_ingest_after: int | None = None,
) -> Run:  # fmt: skip
    """Run ``retest ARGS`` in a subprocess, as a user would (``env``: variables to
    set on top of this process's; ``kill_ingest_after``: SIGKILL it right after
    that batch's rows are inserted)."""
    import time

    from ingest_kill import INSERTED, python  # type: ignore[import-not-found]

    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    env.pop("RETEST_PROJECT", None)
    t0 = time.perf_counter()
    p = subprocess.run(
        [*RETEST, *args]
        if kill_ingest_after is None
        else [*python(INSERTED, kill_ingest_after), "-m", "retest", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Run(list(args), p.returncode, p.stdout, p.stderr, time.perf_counter() - t0)


@pytest.fixture(scope="module")
def fm_inputs(tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    """The reference splits and the planted pool, written once per test module."""
    return build_inputs(tmp_path_factory.mktemp("inputs"))


@pytest.fixture(scope="session")
def retest_cli():
    """``retest_cli(*args, cwd=DIR)`` runs this checkout's CLI in a subprocess."""
    return run_cli
