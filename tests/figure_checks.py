"""Checks that a written figure is a real picture, not merely a file.

A PNG must decode (Pillow), be at least ``min_side`` pixels on each side and show
something: more than one colour with spread (a blank canvas has one). A PDF must
have its header and end-of-file marker and the expected number of pages.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from PIL import Image

__all__ = ["assert_pdf", "assert_png"]


def assert_png(path: Path, *, min_side: int = 64, min_colours: int = 8) -> np.ndarray:
    """Decode ``path`` as PNG and check it is not blank; returns its RGB pixels."""
    with Image.open(path) as im:
        assert im.format == "PNG", f"{path}: {im.format}, not PNG"
        im.load()  # decodes every byte: a truncated file fails here
        rgb = np.asarray(im.convert("RGB"))
    h, w = rgb.shape[:2]
    assert min(h, w) >= min_side, f"{path}: {w}x{h} pixels"
    colours = np.unique(rgb.reshape(-1, 3), axis=0)
    assert len(colours) >= min_colours, f"{path}: only {len(colours)} colours"
    assert float(rgb.std()) > 1.0, f"{path}: (nearly) uniform"
    return rgb


def assert_pdf(path: Path, *, pages: int = 1) -> None:
    """``path`` is a complete PDF with ``pages`` pages."""
    data = path.read_bytes()
    assert data.startswith(b"%PDF-"), f"{path}: no %PDF header"
    assert data.rstrip().endswith(b"%%EOF"), f"{path}: no %%EOF (truncated?)"
    found = len(re.findall(rb"/Type\s*/Page(?![s\w])", data))
    assert found == pages, f"{path}: {found} pages, expected {pages}"
