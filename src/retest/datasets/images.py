"""Image file helpers shared by image ingest, the Flickr downloader and the
ImageNetV2 loader (the file format, below the sources that read it).

See docs/algorithms.md#image-decoding.

Decode bytes with Pillow, apply the EXIF orientation, convert to RGB, and derive
the two published sizes: ``scaled_256`` (256×256, aspect ratio **not**
preserved; used for pixel near-duplicates and review) and ``scaled_500`` (longer
side 500 px, aspect preserved; shown to labelers and used for evaluation). All
three stored files are JPEG quality 90. A file's canonical content id is the
sha256 of its bytes.

EXIF orientation (tag 274). The published code rotates only 3 → 180°,
6 → ``ROTATE_270``, 8 → ``ROTATE_90`` and leaves the mirrored values 2, 4, 5, 7
untouched. We apply the full EXIF table, which for 3, 6 and 8 is exactly the same
operation (it is the table :func:`PIL.ImageOps.exif_transpose` uses), and also
un-mirrors 2, 4, 5 and 7 so that every image is stored upright. Pass
``mirrored=False`` to reproduce the published behaviour bit for bit.
"""

from __future__ import annotations

import hashlib
import io
import struct
import warnings
from typing import Final

import numpy as np
from numpy.typing import NDArray
from PIL import Image, UnidentifiedImageError

from retest.errors import InputValidationError

__all__ = [
    "EXIF_ORIENTATION_TAG",
    "IMAGE_MODES",
    "JPEG_QUALITY",
    "SIZE_256",
    "SIZE_500",
    "apply_exif_orientation",
    "content_id",
    "decode_image",
    "derive_sizes",
    "encode_jpeg",
    "image_to_array",
    "image_to_mode_array",
    "resize_exact",
    "resize_longer_side",
    "to_rgb",
]

EXIF_ORIENTATION_TAG: Final = 274
JPEG_QUALITY: Final = 90
SIZE_256: Final = (256, 256)
SIZE_500: Final = 500

_T = Image.Transpose
# EXIF orientation value -> transposes to apply, in order.
_ORIENTATION_OPS: dict[int, tuple[Image.Transpose, ...]] = {
    2: (_T.FLIP_LEFT_RIGHT,),
    3: (_T.ROTATE_180,),
    4: (_T.FLIP_TOP_BOTTOM,),
    5: (_T.TRANSPOSE,),
    6: (_T.ROTATE_270,),
    7: (_T.TRANSVERSE,),
    8: (_T.ROTATE_90,),
}
_ROTATIONS_ONLY = (3, 6, 8)


class ImageDecodeError(InputValidationError):
    """Bytes that are not a decodable image (or one too large to decode)."""


def content_id(data: bytes) -> str:
    """Canonical id of an image file: hex sha256 of its bytes."""
    return hashlib.sha256(data).hexdigest()


def apply_exif_orientation(img: Image.Image, *, mirrored: bool = True) -> Image.Image:
    """Return ``img`` turned upright according to its EXIF orientation tag.

    ``mirrored=False`` handles only the rotations 3, 6, 8 (the published code).
    """
    try:
        orientation = int(img.getexif().get(EXIF_ORIENTATION_TAG, 1))
    except (TypeError, ValueError, OSError):
        return img
    if not mirrored and orientation not in _ROTATIONS_ONLY:
        return img
    for op in _ORIENTATION_OPS.get(orientation, ()):
        img = img.transpose(op)
    return img


def to_rgb(img: Image.Image) -> Image.Image:
    """RGB with alpha dropped and grayscale stacked ×3 (``make_rgb``).

    Palette images are expanded first; alpha is dropped, not composited, as the
    published ``make_rgb`` did.
    """
    if img.mode == "RGB":
        return img
    if img.mode in ("P", "PA"):
        img = img.convert("RGBA")
    if img.mode in ("I;16", "I;16B", "I;16L", "I"):
        arr = np.asarray(img, dtype=np.float64)
        top = max(float(arr.max()), 1.0)
        img = Image.fromarray((arr * (255.0 / top)).round().astype(np.uint8), "L")
    return img.convert("RGB")


def decode_image(
    data: bytes,
    *,
    source: str = "<bytes>",
    mirrored: bool = True,
    max_pixels: int | None = 178_956_970,
) -> Image.Image:
    """Decode bytes into an upright RGB Pillow image.

    Raises
    ------
    ImageDecodeError
        Not an image, truncated, or more than ``max_pixels`` pixels ("too big").
    """
    try:
        with warnings.catch_warnings():
            # Size is policed by max_pixels below; Pillow's own bomb warning would
            # otherwise become an error under warnings-as-errors.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = Image.open(io.BytesIO(data))
        with im:
            w, h = im.size
            if max_pixels is not None and w * h > max_pixels:
                raise ImageDecodeError(
                    f"{source}: image is too big ({w}×{h} = {w * h} pixels, limit "
                    f"{max_pixels})."
                )
            im.load()
            img = apply_exif_orientation(im, mirrored=mirrored)
            return to_rgb(img).copy()
    except ImageDecodeError:
        raise
    except Image.DecompressionBombError as err:
        raise ImageDecodeError(f"{source}: image is too big ({err}).") from err
    except UnidentifiedImageError as err:  # its text names a BytesIO address
        raise ImageDecodeError(
            f"{source}: not a decodable image (no image format Pillow knows)."
        ) from err
    except (OSError, SyntaxError, ValueError) as err:
        raise ImageDecodeError(f"{source}: not a decodable image ({err}).") from err
    except (
        EOFError,
        IndexError,
        KeyError,
        TypeError,
        struct.error,
        ZeroDivisionError,
        MemoryError,
    ) as err:
        # Pillow's decoders raise these on some corrupt files; it is the same problem.
        raise ImageDecodeError(
            f"{source}: not a decodable image ({type(err).__name__}: {err})."
        ) from err


def resize_exact(img: Image.Image, size: tuple[int, int] = SIZE_256) -> Image.Image:
    """Resize to exactly ``size`` = (width, height), aspect ratio not preserved.

    Bilinear with Pillow's area-aware antialiasing when shrinking, close to the
    published ``skimage.transform.resize(order=1, anti_aliasing=True)``.
    """
    return img.resize(size, Image.Resampling.BILINEAR)


def resize_longer_side(img: Image.Image, longer: int = SIZE_500) -> Image.Image:
    """Rescale so the longer side is ``longer`` px (aspect preserved).

    Smaller images are scaled up too, as the published code did.
    """
    w, h = img.size
    scale = longer / max(w, h)
    new = (max(1, round(w * scale)), max(1, round(h * scale)))
    if new == (w, h):
        return img.copy()
    return img.resize(new, Image.Resampling.BILINEAR)


def encode_jpeg(img: Image.Image, *, quality: int = JPEG_QUALITY) -> bytes:
    """JPEG bytes of an RGB image (baseline, no EXIF: pixels are already upright)."""
    buf = io.BytesIO()
    img.convert("RGB").save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def derive_sizes(img: Image.Image, *, quality: int = JPEG_QUALITY) -> dict[str, bytes]:
    """The three stored JPEGs: ``original``, ``scaled_256`` and ``scaled_500``."""
    return {
        "original": encode_jpeg(img, quality=quality),
        "scaled_256": encode_jpeg(resize_exact(img, SIZE_256), quality=quality),
        "scaled_500": encode_jpeg(resize_longer_side(img, SIZE_500), quality=quality),
    }


def image_to_array(img: Image.Image) -> NDArray[np.uint8]:
    """uint8 array (H, W, 3) of an image, converted to RGB."""
    return np.asarray(to_rgb(img), dtype=np.uint8).copy()


IMAGE_MODES: Final = ("L", "RGB")
"""Stored pixel forms: ``L`` (H, W) grayscale, ``RGB`` (H, W, 3)."""


def image_to_mode_array(
    img: Image.Image, mode: str, *, from_colour: bool = False, source: str = "<image>"
) -> NDArray[np.uint8]:
    """uint8 pixels of ``img`` in ``mode``: ``(H, W)`` for ``L``, ``(H, W, 3)`` for RGB.

    Grayscale to RGB stacks the grey value three times and RGB with equal channels
    to ``L`` keeps it: neither loses anything, so both are automatic. A colour
    image becomes ``L`` (Pillow's ITU-R 601-2 luma) only with ``from_colour``;
    otherwise it is refused, since the colour would be silently lost.

    >>> grey = Image.fromarray(np.arange(6, dtype=np.uint8).reshape(2, 3), "L")
    >>> image_to_mode_array(grey, "RGB").shape, image_to_mode_array(grey, "L").shape
    ((2, 3, 3), (2, 3))
    >>> red = Image.new("RGB", (2, 2), (200, 0, 0))
    >>> image_to_mode_array(red, "L")
    Traceback (most recent call last):
    ...
    retest.datasets.images.ImageDecodeError: <image>: colour image, but the project's images are grayscale (L); pass --mode L to convert colour images to grayscale.
    >>> image_to_mode_array(red, "L", from_colour=True)[0, 0]
    np.uint8(60)
    """
    rgb = image_to_array(img)
    if mode == "RGB":
        return rgb
    if mode != "L":
        raise InputValidationError(
            f"image mode must be one of {', '.join(IMAGE_MODES)}. Got {mode!r}."
        )
    if (rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 0] == rgb[..., 2]).all():
        return np.ascontiguousarray(rgb[..., 0])
    if not from_colour:
        raise ImageDecodeError(
            f"{source}: colour image, but the project's images are grayscale (L); "
            "pass --mode L to convert colour images to grayscale."
        )
    return np.asarray(to_rgb(img).convert("L"), dtype=np.uint8).copy()
