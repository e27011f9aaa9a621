"""The project's pixel arrays (``arrays/<name>.json`` + data) and their tails.

:func:`reclaim_tail_orphans` is called by every writer of pixels at its start
(ingest, reference registration) and by ``retest check``: it lives below the
stages so that none of them imports another for it.
"""

from __future__ import annotations

from pathlib import Path

from retest.errors import DataIntegrityError
from retest.project._project import Project
from retest.store.artifacts import PixelArray

__all__ = ["ARRAYS", "read_arrays", "reclaim_tail_orphans"]

ARRAYS = "arrays"


def read_arrays(root: Path) -> tuple[dict[str, PixelArray], dict[str, str]]:
    """The pixel arrays whose ``arrays/<name>.json`` header reads, and why each
    other ``*.json`` there does not (a damaged header, or a stray file)."""
    d = root / ARRAYS
    ok: dict[str, PixelArray] = {}
    damaged: dict[str, str] = {}
    if not d.is_dir():
        return ok, damaged
    for header in sorted(d.glob("*.json")):
        if header.name.startswith(".") or not header.is_file():
            continue
        try:
            ok[header.stem] = PixelArray(d, header.stem)
        except (DataIntegrityError, OSError) as err:
            damaged[header.stem] = str(err)
    return ok, damaged


def _pixel_arrays(root: Path) -> list[PixelArray]:
    return list(read_arrays(root)[0].values())


def reclaim_tail_orphans(project: Project) -> int:
    """Give back unreferenced rows at the end of every pixel array.

    What a killed writer leaves (pixels appended, rows never inserted) sits at
    the end of the array, so this is cheap enough for the start of every ingest
    (one ``MAX(array_row)`` per array). Call it only while holding
    :func:`~retest.store.artifacts.writers_lock` exclusively.

    Parameters
    ----------
    project : Project

    Returns
    -------
    int
        Rows given back.
    """
    store = project.store
    n = 0
    for px in _pixel_arrays(project.root):
        count = len(px)
        top = max(
            store.candidates.max_array_row(px.name),
            store.references.max_array_row(px.name),
        )
        if count > top + 1:
            n += px.release(range(top + 1, count))
    return n
