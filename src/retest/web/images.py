"""Item pixels → PNG bytes for the web app, with a thumbnail cache.

Item ids are looked up in the store and never used as paths; a stored file path
must resolve inside the project, so no request can read outside it.
"""

from __future__ import annotations

import io
import os
import threading
from collections import OrderedDict

import numpy as np
from PIL import Image

from retest.errors import NotFoundError
from retest.pipeline.project import Project
from retest.store.rows import split_reference_id

__all__ = ["ItemImages"]


class ItemImages:
    """Renders any candidate or reference image as PNG, cached under ``.cache/``
    and the latest ``keep`` in memory (a grid task shows 48 at once)."""

    def __init__(
        self, project: Project, *, scale_to: int = 96, keep: int = 8192
    ) -> None:
        self.project = project
        self.root = project.root.resolve()
        self.scale_to = scale_to
        self.cache = self.root / ".cache" / "thumbs"
        self.keep = keep
        self._memory: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def _check_inside(self, item_id: str, project: Project) -> None:
        if split_reference_id(item_id) is not None:
            return
        rel = project.store.candidates.get(item_id).file_path
        if rel is not None and not (self.root / rel).resolve().is_relative_to(
            self.root
        ):
            raise NotFoundError(f"image of {item_id} lies outside the project.")

    def png(self, item_id: str, project: Project | None = None) -> bytes:
        """PNG bytes, upscaled with nearest neighbour so small images stay crisp.

        ``project``: the project on another store to read rows from (the web
        app passes its per-thread read-only one: no wait behind writes).
        """
        with self._lock:
            data = self._memory.get(item_id)
            if data is not None:
                self._memory.move_to_end(item_id)
                return data
        data = self._render(item_id, project or self.project)
        with self._lock:
            self._memory[item_id] = data
            while len(self._memory) > self.keep:
                self._memory.popitem(last=False)
        return data

    def _render(self, item_id: str, project: Project) -> bytes:
        self._check_inside(item_id, project)
        cached = self.cache / f"{item_id.replace(':', '_')}.png"
        if cached.is_file():
            return cached.read_bytes()
        img = Image.fromarray(np.squeeze(project.pixels([item_id])[0]))
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
