"""Item pixels → PNG bytes for the web app, with a thumbnail cache.

Item ids are looked up in the store and never used as paths; a stored file path
must resolve inside the project, so no request can read outside it.
"""

from __future__ import annotations

import io
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from retest.errors import NotFoundError
from retest.project import Project
from retest.store.rows import split_reference_id

__all__ = ["ItemImages"]


class ItemImages:
    """Renders any candidate or reference image as PNG, the latest ``keep`` in
    memory (a grid task shows 48 at once).

    Images read from files (JPEGs of a folder or Flickr source) are also cached
    under ``.cache/thumbs``, so a restarted server does not decode them again.
    Images stored as pixel arrays are not: rendering one from its array costs
    less than writing and renaming a cache file, which took a third of a new
    task page's time."""

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

    def _check_inside(self, item_id: str, rel: str | None) -> None:
        if rel is not None and not (self.root / rel).resolve().is_relative_to(
            self.root
        ):
            raise NotFoundError(f"image of {item_id} lies outside the project.")

    def cached(self, item_id: str) -> bytes | None:
        """The PNG if it is in memory (no file or store read), else None."""
        with self._lock:
            data = self._memory.get(item_id)
            if data is not None:
                self._memory.move_to_end(item_id)
            return data

    def png(self, item_id: str, project: Project | None = None) -> bytes:
        """PNG bytes, upscaled with nearest neighbour so small images stay crisp.

        ``project``: the project on another store to read rows from (the web
        app passes its per-thread read-only one: no wait behind writes).
        """
        data = self.cached(item_id)
        if data is not None:
            return data
        proj = project or self.project
        on_disk = False
        if split_reference_id(item_id) is None:
            rel = proj.store.candidates.get(item_id).file_path
            self._check_inside(item_id, rel)
            on_disk = rel is not None
        if on_disk and (data := self._from_disk(item_id)) is not None:
            return self._keep(item_id, data)
        return self._keep(item_id, self._render(item_id, proj, on_disk))

    def prefetch(self, item_ids: Sequence[str], project: Project | None = None) -> None:
        """Render the images not in memory yet, their rows and pixels read in one
        go (a grid task's 48 images: then each image request is a memory hit).
        Ids that are unknown or lie outside the project are left to :meth:`png`."""
        proj = project or self.project
        with self._lock:
            todo = [i for i in dict.fromkeys(item_ids) if i not in self._memory]
        cands = [i for i in todo if split_reference_id(i) is None]
        known = list(proj.store.candidates.existing(cands))
        paths = {c.id: c.file_path for c in proj.store.candidates.get_many(known)}
        ok = []
        for i in todo:
            try:
                if split_reference_id(i) is None:
                    self._check_inside(i, paths[i])
            except (KeyError, NotFoundError):
                continue
            data = self._from_disk(i) if paths.get(i) is not None else None
            if data is None:
                ok.append(i)
            else:
                self._keep(i, data)
        for i, pixels in zip(ok, proj.pixels(ok) if ok else [], strict=True):
            self._keep(i, self._encode(i, pixels, paths.get(i) is not None))

    def _keep(self, item_id: str, data: bytes) -> bytes:
        with self._lock:
            self._memory[item_id] = data
            while len(self._memory) > self.keep:
                self._memory.popitem(last=False)
        return data

    def _path(self, item_id: str) -> Path:
        return self.cache / f"{item_id.replace(':', '_')}.png"

    def _from_disk(self, item_id: str) -> bytes | None:
        try:
            return self._path(item_id).read_bytes()
        except FileNotFoundError:
            return None

    def _render(self, item_id: str, project: Project, to_disk: bool = False) -> bytes:
        return self._encode(item_id, project.pixels([item_id])[0], to_disk)

    def _encode(self, item_id: str, pixels: np.ndarray, to_disk: bool) -> bytes:
        img = Image.fromarray(np.squeeze(pixels))
        factor = max(1, self.scale_to // max(img.size))
        if factor > 1:
            size = (img.width * factor, img.height * factor)
            img = img.resize(size, Image.Resampling.NEAREST)
        buf = io.BytesIO()
        # level 1: a quarter of the default's time, nearly the same size here
        img.save(buf, format="PNG", compress_level=1)
        data = buf.getvalue()
        if not to_disk:
            return data
        cached = self._path(item_id)
        self.cache.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(
            f".{cached.name}.{os.getpid()}.{threading.get_ident()}.tmp"
        )
        tmp.write_bytes(data)
        os.replace(tmp, cached)
        return data
