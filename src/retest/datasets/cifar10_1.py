"""CIFAR-10.1 (Recht et al. 2018), versions v4 and v6.

See docs/algorithms.md#npy-test-sets.

Files from the authors' repository (``modestyachts/CIFAR-10.1``, ``datasets/``):
``cifar10.1_<v>_data.npy`` uint8 (N, 32, 32, 3) HWC RGB — same orientation as
CIFAR-10 after its planar → HWC decode — and ``cifar10.1_<v>_labels.npy`` int32
(N,), values 0..9 in CIFAR-10 class order. N = 2,021 (v4) and 2,000 (v6).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from retest.datasets.base import DatasetSource, RemoteFile
from retest.datasets.cifar10 import CIFAR10_CLASSES
from retest.errors import DataIntegrityError
from retest.records import LabeledSet

__all__ = ["CIFAR10_1"]

_BASE = "https://raw.githubusercontent.com/modestyachts/CIFAR-10.1/master/datasets"

# sha256 and sizes as recorded by tensorflow_datasets (url_checksums/cifar10_1.txt)
# for the same files served through github.com/.../blob/master/...?raw=true.
_FILES: dict[str, tuple[tuple[str, int], tuple[str, int]]] = {
    "v4": (
        ("5aaedc268df8f4cffca2ac0cf9e608ae1897a8cddb630c7a850a2ea8f6558e75", 6_208_640),
        ("1f9544300ded199539b6662364ce7fe6c2e1ea9f87408f06db4b1a6184cffb18", 8_212),
    ),
    "v6": (
        ("2997188e5816f5bd545dc77771b6227828c28146049fcecf3fa10775474cacc6", 6_144_128),
        ("ae40beda001693674edc94d925ee8268cfe68905f8f9aff800c8dcdfcd6c9448", 8_128),
    ),
}


class CIFAR10_1(DatasetSource):
    """CIFAR-10.1 new test set; ``version`` is ``"v6"`` (default) or ``"v4"``."""

    name = "cifar10_1"
    description = (
        "CIFAR-10.1 new CIFAR-10 test set from TinyImages (v4: 2,021, v6: 2,000)"
    )
    homepage = "https://github.com/modestyachts/CIFAR-10.1"
    license = "MIT (code); images from TinyImages"
    citation = (
        "Recht, B., Roelofs, R., Schmidt, L., Shankar, V. (2018). Do CIFAR-10 "
        "Classifiers Generalize to CIFAR-10? arXiv:1806.00451."
    )
    splits = ("test",)
    versions = ("v4", "v6")
    default_version = "v6"

    @property
    def class_names(self) -> tuple[str, ...]:
        return CIFAR10_CLASSES

    @property
    def data_file(self) -> str:
        return f"cifar10.1_{self.version}_data.npy"

    @property
    def labels_file(self) -> str:
        return f"cifar10.1_{self.version}_labels.npy"

    def _remote_files(self) -> list[RemoteFile]:
        (d_sha, d_size), (l_sha, l_size) = _FILES[str(self.version)]
        return [
            RemoteFile(self.data_file, f"{_BASE}/{self.data_file}", d_sha, d_size),
            RemoteFile(self.labels_file, f"{_BASE}/{self.labels_file}", l_sha, l_size),
        ]

    def _load_npy(self, filename: str) -> NDArray[Any]:
        path = self.root / filename
        try:
            arr: NDArray[Any] = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as err:
            raise DataIntegrityError(
                f"{path} is not a readable .npy file ({err}). Run `{self.fetch_hint()}`."
            ) from err
        return arr

    def load(self, split: str = "test") -> LabeledSet:
        self._check_split(split)
        self._require_files()
        data = self._load_npy(self.data_file)
        labels = self._load_npy(self.labels_file)
        if data.dtype != np.uint8 or data.ndim != 4 or data.shape[1:] != (32, 32, 3):
            raise DataIntegrityError(
                f"{self.root / self.data_file}: expected uint8 (N, 32, 32, 3) HWC, "
                f"got {data.dtype} {data.shape}. Run `{self.fetch_hint()}`."
            )
        if labels.shape != (data.shape[0],):
            raise DataIntegrityError(
                f"{self.root / self.labels_file}: expected shape ({data.shape[0]},) to "
                f"match {self.data_file}, got {labels.shape}. Run `{self.fetch_hint()}`."
            )
        return LabeledSet(
            f"{self.name}-{self.version}",
            labels,
            class_names=CIFAR10_CLASSES,
            images=data,
        )
