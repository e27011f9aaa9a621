"""Item pixels → PNG bytes for the web app, with a thumbnail cache.

Item ids are looked up in the store and never used as paths; a stored file path
must resolve inside the project, so no request can read outside it.
"""

from __future__ import annotations

import io
import os

import numpy as np
from PIL import Image

from retest.errors import NotFoundError
from retest.pipeline.project import Project
from retest.store.rows import split_reference_id

__all__ = ["ItemImages"]


class ItemImages:
    """Renders any candidate or reference image as PNG, cached under ``.cache/``."""

    def __init__(self, project: Project, *, scale_to: int = 96) -> None:
        self.project = project
        self.root = project.root.resolve()
        self.scale_to = scale_to
        self.cache = self.root / ".cache" / "thumbs"

    def _check_inside(self, item_id: str) -> None:
        if split_reference_id(item_id) is not None:
            return
        rel = self.project.store.candidates.get(item_id).file_path
        if rel is not None and not (self.root / rel).resolve().is_relative_to(
            self.root
        ):
            raise NotFoundError(f"image of {item_id} lies outside the project.")

    def png(self, item_id: str) -> bytes:
        """PNG bytes, upscaled with nearest neighbour so small images stay crisp."""
        self._check_inside(item_id)
        cached = self.cache / f"{item_id.replace(':', '_')}.png"
        if cached.is_file():
            return cached.read_bytes()
        img = Image.fromarray(np.squeeze(self.project.pixels([item_id])[0]))
        factor = max(1, self.scale_to // max(img.size))
        if factor > 1:
            size = (img.width * factor, img.height * factor)
            img = img.resize(size, Image.Resampling.NEAREST)
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        data = buf.getvalue()
        self.cache.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, cached)
        return data
