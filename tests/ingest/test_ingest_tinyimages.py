"""TinyImages files in the real layout: decoding, keyword index, integrity errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retest.datasets.tinyimages import (
    KeywordIndex,
    TinyImages,
    build_keyword_index,
    decode_records,
    encode_images,
    write_tinyimages,
)
from retest.errors import DataIntegrityError

KEYWORDS = (
    ["Alley_Cat"] * 40
    + ["alley_cat"] * 10
    + ["bird"] * 120
    + ["Dog"] * 90
    + ["zebra"] * 40
)


@pytest.fixture
def ti_pair(
    tmp_path: Path, rng: np.random.Generator
) -> tuple[Path, np.ndarray, list[str]]:
    images = rng.integers(0, 256, size=(len(KEYWORDS), 32, 32, 3), dtype=np.uint8)
    write_tinyimages(tmp_path, images, KEYWORDS)
    return tmp_path, images, KEYWORDS


def _reference_record(img: np.ndarray) -> bytes:
    """Independent MATLAB column-major encoding: byte r + 32c + 1024ch."""
    out = bytearray(3072)
    for r in range(32):
        for c in range(32):
            for ch in range(3):
                out[r + 32 * c + 1024 * ch] = int(img[r, c, ch])
    return bytes(out)


def test_written_bytes_follow_the_matlab_layout(ti_pair) -> None:
    root, images, _ = ti_pair
    raw = (root / "tiny_images.bin").read_bytes()
    assert len(raw) == 3072 * len(images)
    for i in (0, 1, 137, len(images) - 1):
        assert raw[i * 3072 : (i + 1) * 3072] == _reference_record(images[i])
    assert (root / "tiny_metadata.bin").stat().st_size == 768 * len(images)


def test_decoded_record_equals_the_written_array(ti_pair) -> None:
    root, images, _ = ti_pair
    ti = TinyImages(root)
    assert len(ti) == len(images)
    np.testing.assert_array_equal(ti.images(np.arange(len(images))), images)
    np.testing.assert_array_equal(ti.image(137), images[137])
    np.testing.assert_array_equal(ti.image_range(5, 9), images[5:9])
    # canonical single-record decode of docs/algorithms.md#tinyimages
    rec = np.frombuffer(
        (root / "tiny_images.bin").read_bytes()[3072 * 7 : 3072 * 8], np.uint8
    )
    np.testing.assert_array_equal(rec.reshape(32, 32, 3, order="F"), images[7])
    np.testing.assert_array_equal(decode_records(encode_images(images)), images)


def test_zero_based_indices_for_both_files(ti_pair) -> None:
    root, images, _kws = ti_pair
    ti = TinyImages(root)
    # record 49 is the last alley_cat, 50 the first bird: an off-by-one would swap them
    assert ti.keyword(49) == "alley_cat" and ti.keyword(50) == "bird"
    np.testing.assert_array_equal(ti.image(50), images[50])
    meta = ti.metadata(50)
    assert meta["filename"] == "bird_000050.png"


def test_keyword_index_is_correct(ti_pair) -> None:
    root, _, kws = ti_pair
    index = build_keyword_index(root / "tiny_metadata.bin")
    assert index.n_records == len(kws) and index.sorted_by_keyword
    # independent oracle: positions of each lower-cased keyword
    lowered = np.array([k.lower() for k in kws])
    for kw in set(lowered):
        np.testing.assert_array_equal(index.indices(kw), np.flatnonzero(lowered == kw))
    assert index.ranges["alley_cat"] == [(0, 50)]
    assert index.indices("ALLEY_CAT").size == 50
    assert index.indices("unicorn").size == 0
    assert "Dog" in index and "unicorn" not in index
    assert KeywordIndex.from_json(index.to_json()) == index


def test_keyword_index_scans_in_chunks(ti_pair, monkeypatch) -> None:
    import retest.datasets.tinyimages as mod

    root, _, _kws = ti_pair
    full = build_keyword_index(root / "tiny_metadata.bin")
    for chunk in (1, 7, 50, 51):  # run boundaries on and off chunk edges
        monkeypatch.setattr(mod, "_SCAN_CHUNK", chunk)
        assert build_keyword_index(root / "tiny_metadata.bin") == full


def test_unsorted_file_gives_several_ranges(tmp_path: Path, rng) -> None:
    kws = ["a", "a", "b", "a", "c"]
    write_tinyimages(
        tmp_path, rng.integers(0, 256, (5, 32, 32, 3), dtype=np.uint8), kws
    )
    index = build_keyword_index(tmp_path / "tiny_metadata.bin")
    assert not index.sorted_by_keyword
    assert index.indices("a").tolist() == [0, 1, 3]


@pytest.mark.parametrize(
    "name,record", [("tiny_images.bin", 3072), ("tiny_metadata.bin", 768)]
)
def test_wrong_file_size_is_a_clear_error(ti_pair, name: str, record: int) -> None:
    root, _, _ = ti_pair
    with (root / name).open("ab") as fh:
        fh.write(b"\0" * 100)
    with pytest.raises(
        DataIntegrityError, match=rf"{name}.*not a multiple of the {record}-byte"
    ):
        TinyImages(root)


def test_record_counts_must_agree(ti_pair) -> None:
    root, _, _ = ti_pair
    with (root / "tiny_metadata.bin").open("ab") as fh:
        fh.write(b" " * 768)
    with pytest.raises(DataIntegrityError, match="disagree"):
        TinyImages(root)


def test_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(DataIntegrityError, match=r"tiny_images\.bin is missing"):
        TinyImages(tmp_path)


def test_decode_across_chunk_boundaries(rng: np.random.Generator) -> None:
    recs = rng.integers(0, 256, size=(1300, 3072), dtype=np.uint8)
    want = np.stack([r.reshape(32, 32, 3, order="F") for r in recs])
    np.testing.assert_array_equal(decode_records(recs), want)
