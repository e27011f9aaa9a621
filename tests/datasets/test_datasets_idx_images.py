"""IDX reader/writer and the image helpers (EXIF orientation, derived sizes)."""

from __future__ import annotations

import gzip
import io
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image

from retest.datasets.idx import read_idx, read_idx_header, write_idx
from retest.datasets.images import (
    EXIF_ORIENTATION_TAG,
    ImageDecodeError,
    content_id,
    decode_image,
    derive_sizes,
)
from retest.errors import DataIntegrityError, InputValidationError

_DTYPES = st.sampled_from(
    [np.uint8, np.int8, np.dtype(">i2"), np.int32, np.float32, np.float64]
)


@settings(max_examples=50, deadline=None)
@given(
    arr=_DTYPES.flatmap(
        lambda dt: hnp.arrays(
            dt,
            hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
            elements={"allow_nan": False} if np.dtype(dt).kind == "f" else None,
        )
    ),
    gz=st.booleans(),
)
def test_idx_round_trip(
    tmp_path_factory: pytest.TempPathFactory, arr: np.ndarray, gz: bool
) -> None:
    p = tmp_path_factory.mktemp("idx") / ("a.idx.gz" if gz else "a.idx")
    write_idx(p, arr)
    assert (p.read_bytes()[:2] == b"\x1f\x8b") == gz
    back = read_idx(p)
    np.testing.assert_array_equal(back, arr)
    assert back.dtype == arr.dtype.newbyteorder("=")


def test_idx_matches_mnist_layout_by_hand(tmp_path: Path) -> None:
    # independent writer: the published layout, byte by byte
    imgs = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    raw = struct.pack(">HBB3I", 0, 8, 3, 2, 3, 4) + imgs.tobytes()
    (tmp_path / "x-idx3-ubyte.gz").write_bytes(gzip.compress(raw))
    np.testing.assert_array_equal(read_idx(tmp_path / "x-idx3-ubyte.gz"), imgs)
    assert read_idx_header(tmp_path / "x-idx3-ubyte.gz") == (
        np.dtype(np.uint8),
        (2, 3, 4),
    )
    write_idx(tmp_path / "y-idx3-ubyte", imgs)
    assert (tmp_path / "y-idx3-ubyte").read_bytes() == raw


def test_idx_truncated_and_bad_files(tmp_path: Path) -> None:
    arr = np.zeros((10, 28, 28), dtype=np.uint8)
    write_idx(tmp_path / "a.gz", arr)
    data = (tmp_path / "a.gz").read_bytes()
    (tmp_path / "cut.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(
        DataIntegrityError, match=r"cut.gz is a truncated or corrupt gzip"
    ):
        read_idx(tmp_path / "cut.gz")
    write_idx(tmp_path / "raw", arr)
    (tmp_path / "short").write_bytes((tmp_path / "raw").read_bytes()[:-100])
    with pytest.raises(
        DataIntegrityError,
        match=r"short is truncated: header declares shape \(10, 28, 28\)",
    ):
        read_idx(tmp_path / "short")
    (tmp_path / "bad").write_bytes(b"\x08\x03\x00\x00" + bytes(16))
    with pytest.raises(DataIntegrityError, match="magic number 0x08030000"):
        read_idx(tmp_path / "bad")
    (tmp_path / "hdr").write_bytes(b"\x00\x00\x08\x03\x00\x00")
    with pytest.raises(DataIntegrityError, match="inside its header"):
        read_idx(tmp_path / "hdr")
    with pytest.raises(InputValidationError, match="int64"):
        write_idx(tmp_path / "z", np.zeros(3, dtype=np.int64))


# ------------------------------------------------------------------------- images


def _marked_jpeg(orientation: int) -> bytes:
    """40 wide × 20 tall, blue, with a red 10×10 block in the stored top-left corner."""
    arr = np.zeros((20, 40, 3), dtype=np.uint8)
    arr[..., 2] = 255
    arr[:10, :10] = (255, 0, 0)
    img = Image.fromarray(arr)
    exif = Image.Exif()
    exif[EXIF_ORIENTATION_TAG] = orientation
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=95, exif=exif)
    return buf.getvalue()


def _is_red(px: np.ndarray) -> bool:
    return bool(px[0] > 200 and px[2] < 60)


def test_exif_orientation_6_rotates_clockwise() -> None:
    out = np.asarray(decode_image(_marked_jpeg(6)))
    # orientation 6: stored image must be turned 90° clockwise to display upright
    assert out.shape == (40, 20, 3)
    assert _is_red(out[2, 17]) and not _is_red(out[2, 2])  # top-left -> top-right
    np.testing.assert_array_equal(out, np.asarray(decode_image(_marked_jpeg(6))))


@pytest.mark.parametrize(
    ("orientation", "shape", "red_at", "mirrored"),
    [
        (1, (20, 40, 3), (2, 2), True),
        (3, (20, 40, 3), (17, 37), True),  # 180°: top-left -> bottom-right
        (8, (40, 20, 3), (37, 2), True),  # 90° counter-clockwise: -> bottom-left
        (2, (20, 40, 3), (2, 37), True),  # mirrored left-right
        (2, (20, 40, 3), (2, 2), False),  # published behaviour: left as stored
    ],
)
def test_exif_orientation_table(
    orientation: int, shape: tuple[int, ...], red_at: tuple[int, int], mirrored: bool
) -> None:
    out = np.asarray(decode_image(_marked_jpeg(orientation), mirrored=mirrored))
    assert out.shape == shape
    assert _is_red(out[red_at])


def test_rgb_conversion_and_derived_sizes() -> None:
    gray = Image.fromarray(np.full((150, 300), 77, dtype=np.uint8), "L")
    rgba = Image.new("RGBA", (300, 150), (10, 20, 30, 0))
    for img in (gray, rgba):
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        dec = decode_image(buf.getvalue())
        assert dec.mode == "RGB" and dec.size == (300, 150)
    sizes = {k: Image.open(io.BytesIO(v)) for k, v in derive_sizes(dec).items()}
    assert sizes["original"].size == (300, 150)
    assert sizes["scaled_256"].size == (256, 256)  # aspect ratio not preserved
    assert sizes["scaled_500"].size == (500, 250)  # longer side 500
    assert all(im.format == "JPEG" for im in sizes.values())
    assert np.abs(np.asarray(sizes["scaled_256"], dtype=int) - (10, 20, 30)).max() <= 3
    assert (
        content_id(b"abc")
        == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


def test_decode_errors() -> None:
    with pytest.raises(ImageDecodeError, match="not a decodable image"):
        decode_image(b"<html>404</html>", source="u")
    big = io.BytesIO()
    Image.new("RGB", (100, 100)).save(big, format="PNG")
    with pytest.raises(ImageDecodeError, match="too big"):
        decode_image(big.getvalue(), max_pixels=5000)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_orientation_agrees_with_pillow_exif_transpose(orientation: int) -> None:
    from PIL import ImageOps

    data = _marked_jpeg(orientation)
    expected = ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB")
    np.testing.assert_array_equal(np.asarray(decode_image(data)), np.asarray(expected))
