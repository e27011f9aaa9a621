"""Fashion-MNIST (Xiao et al. 2017): 60,000 train + 10,000 test 28×28 grayscale.

Four IDX ``.gz`` files. When Debian's ``dataset-fashion-mnist`` package is
installed they are used in place from ``/usr/share/datasets/fashion-mnist/`` (no
download); elsewhere they come from the Zalando S3 bucket. Debian re-compressed the
files (same pixels, different gzip bytes), so both copies' sha256 are accepted.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retest.datasets.base import DatasetSource, RemoteFile
from retest.datasets.idx import read_idx
from retest.errors import DataIntegrityError
from retest.records import LabeledSet

__all__ = ["DEBIAN_DIR", "FASHION_MNIST_CLASSES", "FashionMNIST"]

DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
_BASE = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com"
# (upstream sha256 and size as recorded by tensorflow_datasets url_checksums,
#  sha256 of Debian's dataset-fashion-mnist copy as installed on this machine)
_FILES = {
    "train-images-idx3-ubyte.gz": (
        "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
        26_421_880,
        "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
    ),
    "train-labels-idx1-ubyte.gz": (
        "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
        29_515,
        "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
    ),
    "t10k-images-idx3-ubyte.gz": (
        "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
        4_422_102,
        "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
    ),
    "t10k-labels-idx1-ubyte.gz": (
        "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
        5_148,
        "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
    ),
}
_SPLIT_PREFIX = {"train": "train", "test": "t10k"}


class FashionMNIST(DatasetSource):
    """Fashion-MNIST; images uint8 (N, 28, 28), labels 0..9."""

    name = "fashion_mnist"
    description = "Fashion-MNIST (60k train / 10k test, 28×28 grayscale, IDX .gz)"
    homepage = "https://github.com/zalandoresearch/fashion-mnist"
    license = "MIT"
    citation = (
        "Xiao, H., Rasul, K., Vollgraf, R. (2017). Fashion-MNIST: a Novel Image "
        "Dataset for Benchmarking Machine Learning Algorithms. arXiv:1708.07747."
    )
    splits = ("train", "test")

    @property
    def class_names(self) -> tuple[str, ...]:
        return FASHION_MNIST_CLASSES

    def _default_root(self) -> Path:
        if all((DEBIAN_DIR / f).is_file() for f in _FILES):
            return DEBIAN_DIR
        return super()._default_root()

    def _remote_files(self) -> list[RemoteFile]:
        return [
            RemoteFile(name, f"{_BASE}/{name}", sha, size, alt_sha256=(debian,))
            for name, (sha, size, debian) in _FILES.items()
        ]

    def load(self, split: str = "test") -> LabeledSet:
        self._check_split(split)
        prefix = _SPLIT_PREFIX[split]
        img_name, lab_name = (
            f"{prefix}-images-idx3-ubyte.gz",
            f"{prefix}-labels-idx1-ubyte.gz",
        )
        self._require_files([img_name, lab_name])
        try:
            images = read_idx(self.root / img_name)
            labels = read_idx(self.root / lab_name)
        except DataIntegrityError as err:
            raise DataIntegrityError(f"{err} Run `{self.fetch_hint()}`.") from err
        if (
            images.dtype != np.uint8
            or images.ndim != 3
            or labels.shape != images.shape[:1]
        ):
            raise DataIntegrityError(
                f"{self.root / img_name}: expected uint8 (N, 28, 28) images with N "
                f"labels; got {images.dtype} {images.shape} and labels {labels.shape}. "
                f"Run `{self.fetch_hint()}`."
            )
        return LabeledSet(
            f"{self.name}-{split}",
            labels.astype(np.int64),
            class_names=FASHION_MNIST_CLASSES,
            images=images.astype(np.uint8, copy=False),
        )
