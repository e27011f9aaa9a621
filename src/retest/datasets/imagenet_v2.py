"""ImageNetV2 (Recht et al. 2019): three 10,000-image test sets for ImageNet.

Variants (sampling strategies, docs/algorithms.md#samplers): ``matched-frequency``
(default), ``threshold0.7`` and ``top-images``. Each archive unpacks to
``imagenetv2-<variant>-format-val/<class>/<hash>.jpeg``, 10 images per class.

The class of an image is ``int(folder name)`` — the ImageNet class index 0..999 —
**never** the position of the folder in lexicographic order (torchvision's
``ImageFolder`` sorts "0", "1", "10", "100", ..., which silently mislabels 990 of
the 1000 classes). ``load`` returns labels and the image paths (as ``ids``,
relative to ``root``); pixels only when ``image_size`` is given.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from retest._progress import ProgressCallback, report
from retest.datasets.base import DatasetSource, RemoteFile
from retest.datasets.images import decode_image, image_to_array, resize_exact
from retest.errors import DataIntegrityError
from retest.records import LabeledSet

__all__ = ["IMAGENET_N_CLASSES", "ImageNetV2", "imagefolder_labels"]

IMAGENET_N_CLASSES = 1000
_BASE = "https://huggingface.co/datasets/vaishaal/ImageNetV2/resolve/main"
# sha256 and sizes as recorded by tensorflow_datasets (datasets/imagenet_v2/checksums.tsv).
_VARIANTS = {
    "matched-frequency": (
        "f0c37fdf925916b19ea1323cd9a2208cdb6959ba2c32eef2a7fc393835c9ca7c",
        1_264_079_360,
    ),
    "threshold0.7": (
        "32142bfe998f9cfa4141be691f6a80eeb1e27b24bd532a668eb08c26d98897a2",
        1_249_906_176,
    ),
    "top-images": (
        "85e4ace30f3f0d660152062254b8759dda66267b27f7ec0fd8d5768f1073a04b",
        1_245_927_936,
    ),
}
_IMAGE_SUFFIXES = {".jpeg", ".jpg", ".png"}


def _natural(name: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def imagefolder_labels(
    folder: Path, *, n_classes: int = IMAGENET_N_CLASSES
) -> tuple[list[Path], np.ndarray]:
    """Image paths and labels of a ``<class_index>/<file>`` tree.

    Label = ``int(folder name)``; folders are visited in numeric order and files
    in natural order, so the result is deterministic. A folder whose name is not
    an integer in ``[0, n_classes)`` is an error.
    """
    if not folder.is_dir():
        raise DataIntegrityError(f"image folder {folder} does not exist.")
    classes: list[tuple[int, Path]] = []
    for d in folder.iterdir():
        if not d.is_dir():
            continue
        if not d.name.isdigit() or not 0 <= int(d.name) < n_classes:
            raise DataIntegrityError(
                f"{d}: class folders must be named by the class index 0..{n_classes - 1}"
                f"; found {d.name!r}."
            )
        classes.append((int(d.name), d))
    paths: list[Path] = []
    labels: list[int] = []
    for idx, d in sorted(classes):
        files = sorted(
            (p for p in d.iterdir() if p.suffix.lower() in _IMAGE_SUFFIXES),
            key=lambda p: _natural(p.name),
        )
        paths += files
        labels += [idx] * len(files)
    if not paths:
        raise DataIntegrityError(f"image folder {folder} holds no images.")
    return paths, np.asarray(labels, dtype=np.int64)


class ImageNetV2(DatasetSource):
    """ImageNetV2; ``version`` = ``matched-frequency`` | ``threshold0.7`` | ``top-images``."""

    name = "imagenet_v2"
    description = "ImageNetV2 new ImageNet test sets (3 variants × 10,000 images)"
    homepage = "https://github.com/modestyachts/ImageNetV2"
    license = "MIT (code); images from Flickr under their owners' terms"
    citation = (
        "Recht, B., Roelofs, R., Schmidt, L., Shankar, V. (2019). Do ImageNet "
        "Classifiers Generalize to ImageNet? ICML."
    )
    splits = ("test",)
    versions = tuple(_VARIANTS)
    default_version = "matched-frequency"

    @property
    def class_names(self) -> tuple[str, ...]:
        # wnids are not bundled; classes are named by their ImageNet index.
        return tuple(str(i) for i in range(IMAGENET_N_CLASSES))

    @property
    def archive(self) -> str:
        return f"imagenetv2-{self.version}.tar.gz"

    @property
    def folder(self) -> str:
        return f"imagenetv2-{self.version}-format-val"

    def _remote_files(self) -> list[RemoteFile]:
        sha, size = _VARIANTS[str(self.version)]
        return [RemoteFile(self.archive, f"{_BASE}/{self.archive}", sha, size)]

    def _tree_problems(self) -> dict[str, str]:
        # 1.2 GB of JPEGs: loading checks presence only; `status` hashes.
        return self._extracted_problems(self.folder, hash_files=False)

    def is_ready(self) -> bool:
        return not self._tree_problems()

    def status(self) -> dict[str, str]:
        out = super().status()
        bad = self._extracted_problems(self.folder, hash_files=True)
        out[self.folder] = (
            "ok" if not bad else "missing" if self.folder in bad else "corrupt"
        )
        return out

    def _prepare(self, progress: ProgressCallback | None) -> None:
        if self._tree_problems():
            self._require_files()
            self._extract(self.archive, self.folder)

    def paths(self) -> tuple[list[Path], np.ndarray]:
        """Absolute image paths and their labels (``int(folder name)``)."""
        bad = self._tree_problems()
        if bad:
            raise self._integrity_error(bad)
        return imagefolder_labels(self.root / self.folder)

    def load(
        self,
        split: str = "test",
        *,
        image_size: int | tuple[int, int] | None = None,
        progress: ProgressCallback | None = None,
    ) -> LabeledSet:
        """Labels and relative paths (``ids``); pixels resized to ``image_size``.

        ``image_size`` = (width, height) or an int for a square; the resize does
        not preserve the aspect ratio (images are decoded, EXIF-rotated, RGB).
        """
        self._check_split(split)
        paths, labels = self.paths()
        ids = tuple(p.relative_to(self.root).as_posix() for p in paths)
        images = None
        if image_size is not None:
            size = (
                (image_size, image_size) if isinstance(image_size, int) else image_size
            )
            images = np.empty((len(paths), size[1], size[0], 3), dtype=np.uint8)
            for i, p in enumerate(paths):
                img = decode_image(p.read_bytes(), source=str(p))
                images[i] = image_to_array(resize_exact(img, size))
                report(progress, "decode", i + 1, len(paths))
        return LabeledSet(
            f"{self.name}-{self.version}",
            labels,
            class_names=self.class_names,
            images=images,
            ids=ids,
        )
