"""Dataset sources: fake files in the real formats, served from 127.0.0.1."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from retest.datasets.base import DATASETS, get_dataset, load_dataset
from retest.datasets.cifar10 import (
    CIFAR10,
    CIFAR10_CLASSES,
    read_cifar_batch,
    write_cifar10_archive,
    write_cifar_batch,
)
from retest.datasets.cifar10_1 import CIFAR10_1
from retest.datasets.download import DownloadError, download_url, extract_archive
from retest.datasets.fashion_mnist import FashionMNIST
from retest.datasets.idx import write_idx
from retest.datasets.imagenet_v2 import ImageNetV2
from retest.errors import ConfigError, DataIntegrityError, UnknownNameError

sha = lambda b: hashlib.sha256(b).hexdigest()  # noqa: E731


def _cifar_data(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return (
        rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8),
        rng.integers(0, 10, n),
    )


# ----------------------------------------------------------------------------- CIFAR-10


def test_cifar_batch_layout_is_channel_planar(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    imgs, labels = _cifar_data(rng, 7)
    write_cifar_batch(tmp_path / "b", imgs, labels)
    with open(tmp_path / "b", "rb") as f:
        raw = pickle.load(f, encoding="bytes")
    data = raw[b"data"]
    # independent oracle: byte c*1024 + r*32 + col of row i is pixel (r, col) of channel c
    i, r, col, c = 3, 5, 17, 2
    assert data[i, c * 1024 + r * 32 + col] == imgs[i, r, col, c]
    assert raw[b"labels"] == labels.tolist()
    back, back_labels, names = read_cifar_batch(tmp_path / "b")
    np.testing.assert_array_equal(back, imgs)
    np.testing.assert_array_equal(back_labels, labels)
    assert len(names) == 7


def test_cifar_batch_refuses_code_in_pickle(tmp_path: Path) -> None:
    class Evil:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, ("echo pwned",))

    (tmp_path / "evil").write_bytes(pickle.dumps({b"data": Evil()}, protocol=2))
    with pytest.raises(DataIntegrityError, match="not allowed"):
        read_cifar_batch(tmp_path / "evil")


@pytest.fixture
def cifar_server(http_server, tmp_path: Path, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    train = _cifar_data(rng, 50)
    test = _cifar_data(rng, 10)
    archive = tmp_path / "src" / "cifar-10-python.tar.gz"
    write_cifar10_archive(archive, train, test)
    body = archive.read_bytes()
    write_cifar10_archive(tmp_path / "again.tar.gz", train, test)
    assert (tmp_path / "again.tar.gz").read_bytes() == body  # deterministic bytes
    http_server.add("/cifar-10-python.tar.gz", body)
    return http_server, train, test, sha(body)


def test_cifar10_fetch_verify_load_and_idempotence(
    cifar_server, tmp_path: Path, no_sleep
) -> None:  # type: ignore[no-untyped-def]
    server, (tr_x, tr_y), (te_x, _), digest = cifar_server
    root = tmp_path / "data"
    opts = {"mirror": server.url, "checksums": {"cifar-10-python.tar.gz": digest}}
    src = CIFAR10(root, sleep=no_sleep.append, **opts)  # type: ignore[arg-type]
    assert not src.is_ready()
    src.fetch()
    assert server.total == 1
    train, test = src.load("train"), src.load("test")
    np.testing.assert_array_equal(train.images, tr_x)  # batches 1..5 in order
    np.testing.assert_array_equal(train.labels, tr_y)
    np.testing.assert_array_equal(test.images, te_x)
    assert test.class_names == CIFAR10_CLASSES
    # a second fetch, even by a fresh instance, makes no request
    CIFAR10(root, **opts).fetch()  # type: ignore[arg-type]
    assert server.total == 1
    info = CIFAR10(root, **opts).info()  # type: ignore[arg-type]
    assert info["counts"]["train"]["n"] == 50
    assert info["files"][0]["status"] == "ok"


def test_cifar10_corrupt_batch_is_named_and_refetch_repairs(
    cifar_server, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    server, _, (te_x, _), digest = cifar_server
    root = tmp_path / "data"
    opts = {"mirror": server.url, "checksums": {"cifar-10-python.tar.gz": digest}}
    CIFAR10(root, **opts).fetch()  # type: ignore[arg-type]
    batch = root / "cifar-10-batches-py" / "test_batch"
    data = bytearray(batch.read_bytes())
    data[5000] ^= 0xFF  # same size: caught by the hash recorded at extraction
    batch.write_bytes(bytes(data))
    st = batch.stat()
    os.utime(batch, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    with pytest.raises(
        DataIntegrityError,
        match=r"test_batch: sha256 mismatch.*retest datasets fetch cifar10 --root",
    ):
        CIFAR10(root, **opts).load("test")  # type: ignore[arg-type]
    CIFAR10(root, **opts).fetch()  # re-extracts from the verified archive  # type: ignore[arg-type]
    assert server.total == 1
    np.testing.assert_array_equal(CIFAR10(root, **opts).load("test").images, te_x)  # type: ignore[arg-type]


def test_cifar10_wrong_checksum_download_is_refused(
    cifar_server, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    server, *_ = cifar_server
    root = tmp_path / "data"
    src = CIFAR10(
        root, mirror=server.url, checksums={"cifar-10-python.tar.gz": "0" * 64}
    )
    with pytest.raises(
        DataIntegrityError, match=r"cifar-10-python.tar.gz .* has sha256"
    ):
        src.fetch()
    assert not (root / "cifar-10-python.tar.gz").exists()
    assert not list(root.glob("*.part"))


def test_missing_files_message_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(
        DataIntegrityError,
        match=r"cifar10_1.*missing.*retest datasets fetch cifar10_1 --root .* --version v4",
    ):
        CIFAR10_1(tmp_path, version="v4").load()


# ---------------------------------------------------------------------------- CIFAR-10.1


@pytest.mark.parametrize("version", ["v4", "v6"])
def test_cifar10_1_npy_pair(
    http_server, tmp_path: Path, rng: np.random.Generator, version: str
) -> None:  # type: ignore[no-untyped-def]
    x, y = _cifar_data(rng, 21)
    bufs = {}
    for kind, arr in (("data", x), ("labels", y.astype(np.int32))):
        b = io.BytesIO()
        np.save(b, arr)
        name = f"cifar10.1_{version}_{kind}.npy"
        bufs[name] = b.getvalue()
        http_server.add("/" + name, b.getvalue())
    src = CIFAR10_1(
        tmp_path, version=version, mirror=http_server.url,
        checksums={k: sha(v) for k, v in bufs.items()},
    )  # fmt: skip
    src.fetch()
    ls = load_dataset(
        "cifar10_1", "test", root=tmp_path, version=version,
        checksums={k: sha(v) for k, v in bufs.items()},
    )  # fmt: skip
    assert ls.name == f"cifar10_1-{version}"
    np.testing.assert_array_equal(ls.images, x)
    np.testing.assert_array_equal(ls.labels, y)
    assert ls.labels.dtype == np.int64
    # corrupt the labels file (truncate): named, with the command to run
    p = tmp_path / f"cifar10.1_{version}_labels.npy"
    p.write_bytes(p.read_bytes()[:-8])
    with pytest.raises(
        DataIntegrityError,
        match=rf"cifar10.1_{version}_labels.npy: sha256 mismatch.*--version {version}",
    ):
        src.load("test")


def test_registry_and_bad_options(tmp_path: Path) -> None:
    assert DATASETS.names() == ["cifar10", "cifar10_1", "fashion_mnist", "imagenet_v2"]
    with pytest.raises(UnknownNameError, match="cifar10_1"):
        get_dataset("cifar10.1")
    with pytest.raises(ConfigError, match="available versions: v4, v6"):
        get_dataset("cifar10_1", version="v7")
    with pytest.raises(ConfigError, match="no split 'train'"):
        CIFAR10_1(tmp_path).load("train")
    with pytest.raises(ConfigError):
        get_dataset("cifar10", colour="blue")


# ---------------------------------------------------------------------------- ImageNetV2


def _jpeg(value: int) -> bytes:
    b = io.BytesIO()
    Image.new("RGB", (12, 9), (value, value, value)).save(b, format="JPEG", quality=95)
    return b.getvalue()


def _imagenet_tarball(folder: str, classes: range) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for c in classes:
            for k in range(2):
                data = _jpeg(20 * c)  # pixel value encodes the true class
                info = tarfile.TarInfo(f"{folder}/{c}/{k}abc.jpeg")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_imagenet_v2_labels_are_int_folder_names(http_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    variant = "threshold0.7"
    body = _imagenet_tarball(f"imagenetv2-{variant}-format-val", range(12))
    http_server.add(f"/imagenetv2-{variant}.tar.gz", body)
    src = ImageNetV2(
        tmp_path, version=variant, mirror=http_server.url,
        checksums={f"imagenetv2-{variant}.tar.gz": sha(body)},
    )  # fmt: skip
    src.fetch()
    ls = src.load(image_size=8)
    assert ls.n == 24 and ls.images is not None and ls.images.shape == (24, 8, 8, 3)
    # oracle independent of folder names: the pixel value says the class
    decoded = np.round(ls.images.reshape(24, -1).mean(axis=1) / 20).astype(int)
    np.testing.assert_array_equal(ls.labels, decoded)
    # lexicographic folder order would put "10", "11" right after "1": a different labelling
    lex = sorted(str(c) for c in range(12))
    assert lex.index("10") != 10
    assert ls.ids is not None and ls.ids[0].endswith("/0/0abc.jpeg")
    assert [ls.labels[i] for i, p in enumerate(ls.ids) if "/10/" in p] == [10, 10]
    ImageNetV2(tmp_path, version=variant, mirror=http_server.url).fetch()
    assert http_server.total == 1


def test_imagenet_v2_rejects_non_numeric_folder(tmp_path: Path) -> None:
    folder = tmp_path / "imagenetv2-top-images-format-val" / "n01440764"
    folder.mkdir(parents=True)
    (folder / "a.jpeg").write_bytes(_jpeg(0))
    with pytest.raises(DataIntegrityError, match="n01440764"):
        ImageNetV2(tmp_path, version="top-images").load()


# ---------------------------------------------------------------------------- downloads


def test_download_retries_transient_errors_then_gives_up(
    http_server, tmp_path: Path, no_sleep
) -> None:  # type: ignore[no-untyped-def]
    url = http_server.add("/f.bin", b"payload", fail_first=2)
    p = download_url(
        url, tmp_path, sha256=sha(b"payload"), sleep=no_sleep.append, backoff=1.0
    )
    assert p.read_bytes() == b"payload" and no_sleep == [1.0, 2.0]
    url404 = http_server.add("/gone", b"", status=404)
    with pytest.raises(DownloadError, match="HTTP 404"):
        download_url(url404, tmp_path, sleep=no_sleep.append)
    assert http_server.hits["/gone"] == 1  # a 404 is not retried
    http_server.add("/down", b"x", fail_first=10)
    with pytest.raises(DownloadError, match="HTTP 500"):
        download_url(
            http_server.url + "/down", tmp_path, retries=2, sleep=no_sleep.append
        )
    assert http_server.hits["/down"] == 3


def test_extract_archive_refuses_path_traversal(tmp_path: Path) -> None:
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tf:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 2
        tf.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(DataIntegrityError, match="outside"):
        extract_archive(evil, tmp_path / "out")
    assert not (tmp_path / "escaped.txt").exists()
    evil_zip = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil_zip, "w") as zf:
        zf.writestr("ok/a.txt", b"a")
        zf.writestr("../../escaped_zip.txt", b"x")
    with pytest.raises(DataIntegrityError, match=r"escaped_zip\.txt"):
        extract_archive(evil_zip, tmp_path / "out2")
    assert not (tmp_path / "out2" / "ok" / "a.txt").exists()  # checked before writing
    with pytest.raises(ConfigError, match=r"\.tar\.gz.*\.zip"):
        extract_archive(tmp_path / "x.rar")


# ---------------------------------------------------------------------------- Fashion-MNIST


def test_fashion_mnist_from_mirror(
    http_server, tmp_path: Path, rng: np.random.Generator
) -> None:  # type: ignore[no-untyped-def]
    fake = tmp_path / "fake"
    arrays = {
        "train-images-idx3-ubyte.gz": rng.integers(
            0, 256, (30, 28, 28), dtype=np.uint8
        ),
        "train-labels-idx1-ubyte.gz": (np.arange(30) % 10).astype(np.uint8),
        "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (10, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte.gz": np.arange(10, dtype=np.uint8),
    }
    sums = {}
    for name, arr in arrays.items():
        write_idx(fake / name, arr)
        sums[name] = sha((fake / name).read_bytes())
        http_server.add("/" + name, (fake / name).read_bytes())
    src = FashionMNIST(tmp_path / "fm", mirror=http_server.url, checksums=sums)
    src.fetch()
    train = src.load("train")
    np.testing.assert_array_equal(train.images, arrays["train-images-idx3-ubyte.gz"])
    assert train.class_names is not None and train.class_names[9] == "Ankle boot"
    assert http_server.total == 4
    src.fetch()
    assert http_server.total == 4


@pytest.mark.slow
def test_real_fashion_mnist(fashion_mnist_dir: Path) -> None:
    src = FashionMNIST(fashion_mnist_dir)
    assert set(src.status().values()) == {"ok"}  # Debian copy's sha256 is known
    assert src.fetch() == fashion_mnist_dir  # nothing to download
    train, test = src.load("train"), src.load("test")
    assert train.images is not None and test.images is not None
    assert train.images.shape == (60000, 28, 28) and test.images.shape == (
        10000,
        28,
        28,
    )
    assert np.bincount(train.labels).tolist() == [6000] * 10
    assert np.bincount(test.labels).tolist() == [1000] * 10
