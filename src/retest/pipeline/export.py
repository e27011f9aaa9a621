"""Export a revision as a released dataset, with a manifest (``retest export``).

Formats (:data:`EXPORT_FORMATS`):

``npy``
    CIFAR-10.1 layout: ``<name>_data.npy`` uint8 ``(N, H, W, C)`` HWC RGB (or
    ``(N, H, W)`` grayscale) and ``<name>_labels.npy`` int32. All images must share a
    shape (32×32×3 for CIFAR; other sizes keep their own H×W).
``cifar``
    CIFAR python pickle batches as the CIFAR-10.2 build wrote them (protocol 2):
    ``data_batch_1 … data_batch_k`` (``batch_size`` images each) holding ``{"data":
    (n, H·W·C) uint8 channel-planar rows, "labels", "filenames", "tinykeyword",
    "localfilename", "item_ids", "batch_label"}`` and ``batches.meta`` with
    ``label_names``, ``num_cases_per_batch`` and ``num_vis``. Decode a row with
    ``row.reshape(C, H, W).transpose(1, 2, 0)``.
``imagefolder``
    ``<class_id>/<k>.png|jpeg`` (k counts per class in revision order) plus
    ``class_index.json`` mapping each folder name to its class: do not rely on
    lexicographic folder order (SPEC §8: "10" sorts before "2"). File-backed images
    keep their original bytes; array-backed ones are encoded as PNG.
``parquet``
    ``<name>.parquet``: one row per image with the image bytes and all metadata.

Every export also writes ``manifest.json``: the revision (strategy, parameters, seed,
parent, creation time), per-image provenance (source, source reference, keyword /
query, dates, url, license, selection frequency and annotation count when known,
blacklist and review status), the sha256 of every other file and the package
version. The same revision exports to byte-identical files: no timestamps besides
the revision's own, sorted JSON keys, fixed PNG settings. The export is built in a
temporary sibling directory and renamed into place.
"""

from __future__ import annotations

import io
import os
import pickle
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from retest._progress import ProgressCallback, report
from retest.errors import (
    ConfigError,
    InputValidationError,
    StageError,
    UnknownNameError,
)
from retest.pipeline.project import Project
from retest.store.artifacts import (
    atomic_write_bytes,
    sha256_file,
    write_json,
    write_npy,
    write_parquet,
)
from retest.store.base import ArtifactRecord, RevisionMember, split_reference_id

__all__ = ["EXPORT_FORMATS", "ExportFormat", "ExportResult", "export_revision"]

ExportFormat = Literal["npy", "cifar", "imagefolder", "parquet"]
EXPORT_FORMATS: tuple[str, ...] = ("npy", "cifar", "imagefolder", "parquet")
_CHUNK = 2048


@dataclass(frozen=True, slots=True)
class ExportResult:
    """Where an export went: ``files`` maps each written path (relative to ``out``,
    manifest included) to its sha256."""

    out: Path
    format: str
    n_images: int
    files: dict[str, str]


@dataclass
class _Ctx:
    project: Project
    members: list[RevisionMember]
    images: list[dict[str, Any]]  # per-image manifest entries, filled by writers
    stage: Path
    name: str
    batch_size: int
    progress: ProgressCallback | None

    def pixel_chunks(self) -> Any:
        """(start, [pixels]) for consecutive chunks of members, in order."""
        ids = [m.item_id for m in self.members]
        for s in range(0, len(ids), _CHUNK):
            yield s, self.project.pixels(ids[s : s + _CHUNK])
            report(self.progress, "export", min(s + _CHUNK, len(ids)), len(ids))


# ------------------------------------------------------------------ provenance


def _provenance(
    project: Project, revision: str, members: list[RevisionMember]
) -> list[dict[str, Any]]:
    store = project.store
    names = {c.id: c.name for c in store.classes.list()}
    counts = store.annotations.item_counts()
    task_counts = store.annotations.item_counts(kinds=["task"])
    blacklist = store.blacklist.current()
    reviews = store.revisions.reviews(revision)
    out = []
    for m in members:
        entry: dict[str, Any] = {
            "item_id": m.item_id,
            "label": m.class_id,
            "class": names.get(m.class_id),
            "origin": m.origin,
            "bin": m.bin,
            "from_bin": m.from_bin,
        }
        ref = split_reference_id(m.item_id)
        if ref is not None:
            r = store.references.get(m.item_id)
            entry.update(
                source=f"original:{ref[0]}",
                source_ref=str(ref[1]),
                keyword=r.keyword,
                date_taken=None,
                date_uploaded=None,
                url=None,
                license=None,
            )
        else:
            c = store.candidates.get(m.item_id)
            entry.update(
                source=c.source,
                source_ref=c.source_ref,
                keyword=c.keyword,
                date_taken=c.date_taken,
                date_uploaded=c.date_uploaded,
                url=c.url,
                license=c.license,
            )
        n, _ = counts.get(m.item_id, (0, 0))
        tn, tp = task_counts.get(m.item_id, (0, 0))
        state = reviews.get(m.class_id)
        entry.update(
            annotation_count=n,
            selection_frequency=(tp / tn) if tn else None,
            blacklisted=m.item_id in blacklist,
            review_status=(
                "problematic"
                if state and state.problematic
                else "reviewed"
                if state and state.reviewed
                else "unreviewed"
            ),
        )
        out.append(entry)
    return out


# --------------------------------------------------------------------- writers


def _uniform(ctx: _Ctx, what: str) -> NDArray[np.uint8]:
    parts: list[NDArray[np.uint8]] = []
    for _, pix in ctx.pixel_chunks():
        shapes = {p.shape for p in pix} | ({parts[0].shape[1:]} if parts else set())
        if len(shapes) > 1:
            raise InputValidationError(
                f"--format {what} needs images of one shape; revision has "
                f"{sorted(shapes)}. Use --format imagefolder or parquet."
            )
        parts.append(np.stack(pix))
    return np.concatenate(parts) if parts else np.empty((0, 0, 0, 3), np.uint8)


def _labels(ctx: _Ctx) -> NDArray[np.int32]:
    return np.array([m.class_id for m in ctx.members], dtype=np.int32)


def _write_npy(ctx: _Ctx) -> None:
    data = _uniform(ctx, "npy")
    write_npy(ctx.stage / f"{ctx.name}_data.npy", data)
    write_npy(ctx.stage / f"{ctx.name}_labels.npy", _labels(ctx))
    for i, e in enumerate(ctx.images):
        e["row"] = i


def _planar(data: NDArray[np.uint8]) -> NDArray[np.uint8]:
    """HWC → channel-planar rows (the CIFAR layout); grayscale rows stay row-major."""
    if data.ndim == 4:
        data = data.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(data.reshape(data.shape[0], -1))


def _write_cifar(ctx: _Ctx) -> None:
    data = _planar(_uniform(ctx, "cifar"))
    labels = _labels(ctx).tolist()
    n, bs = len(labels), ctx.batch_size
    k = max(1, -(-n // bs))
    for b in range(k):
        sl = slice(b * bs, (b + 1) * bs)
        imgs = ctx.images[sl]
        batch = {
            "batch_label": f"batch {b + 1} of {k} (revision {ctx.name})",
            "data": data[sl],
            "labels": labels[sl],
            "filenames": [f"{e['item_id']}.png" for e in imgs],
            "tinykeyword": [e["keyword"] or "" for e in imgs],
            "localfilename": [e["source_ref"] for e in imgs],
            "item_ids": [e["item_id"] for e in imgs],
        }
        atomic_write_bytes(
            ctx.stage / f"data_batch_{b + 1}", pickle.dumps(batch, protocol=2)
        )
        for i, e in enumerate(imgs):
            e.update(file=f"data_batch_{b + 1}", row=i)
    names = [c.name for c in ctx.project.store.classes.list()]
    meta = {
        "label_names": names,
        "num_cases_per_batch": bs,
        "num_vis": int(data.shape[1]) if n else 0,
    }
    atomic_write_bytes(ctx.stage / "batches.meta", pickle.dumps(meta, protocol=2))


def _encode(ctx: _Ctx, item_id: str, pixels: NDArray[np.uint8]) -> tuple[bytes, str]:
    """Original file bytes when the item is a file, else a deterministic PNG."""
    raw = ctx.project.file_bytes(item_id)
    if raw is not None:
        from PIL import Image

        with Image.open(io.BytesIO(raw)) as im:
            fmt = (im.format or "png").lower()
        return raw, {"jpg": "jpeg"}.get(fmt, fmt)
    return _png(pixels), "png"


def _png(pixels: NDArray[np.uint8]) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    img = Image.fromarray(
        pixels[..., 0] if pixels.ndim == 3 and pixels.shape[2] == 1 else pixels
    )
    img.save(buf, format="PNG", compress_level=6, optimize=False)
    return buf.getvalue()


def _write_imagefolder(ctx: _Ctx) -> None:
    counter: dict[int, int] = {}
    for start, pix in ctx.pixel_chunks():
        for j, img in enumerate(pix):
            m, e = ctx.members[start + j], ctx.images[start + j]
            data, ext = _encode(ctx, m.item_id, img)
            k = counter.get(m.class_id, 0)
            counter[m.class_id] = k + 1
            rel = f"{m.class_id}/{k}.{ext}"
            atomic_write_bytes(ctx.stage / rel, data)
            e["file"] = rel
    index = {str(c.id): c.name for c in ctx.project.store.classes.list()}
    write_json(ctx.stage / "class_index.json", index)


def _write_parquet(ctx: _Ctx) -> None:
    import pyarrow as pa

    cols: dict[str, list[Any]] = {
        "image": [],
        "image_format": [],
        "height": [],
        "width": [],
    }
    for start, pix in ctx.pixel_chunks():
        for j, img in enumerate(pix):
            data, fmt = _encode(ctx, ctx.members[start + j].item_id, img)
            cols["image"].append(data)
            cols["image_format"].append(fmt)
            cols["height"].append(int(img.shape[0]))
            cols["width"].append(int(img.shape[1]))
    for i, e in enumerate(ctx.images):
        e["row"] = i
    keys = [k for k in (ctx.images[0] if ctx.images else {}) if k != "row"]
    table = pa.table(
        {
            **{k: [e[k] for e in ctx.images] for k in keys},
            "label": pa.array([e["label"] for e in ctx.images], pa.int32()),
            "image": pa.array(cols.pop("image"), pa.binary()),
            **cols,
        }
    )
    write_parquet(ctx.stage / f"{ctx.name}.parquet", table)


_WRITERS: dict[str, Callable[[_Ctx], None]] = {
    "npy": _write_npy,
    "cifar": _write_cifar,
    "imagefolder": _write_imagefolder,
    "parquet": _write_parquet,
}


# ------------------------------------------------------------------------ main


def _swap_into_place(stage: Path, out: Path, *, overwrite: bool) -> None:
    busy = any(out.iterdir()) if out.is_dir() else out.exists()
    if busy:
        if not overwrite:
            raise StageError(
                f"export folder {out} already exists and is not empty. Choose another "
                "--out or pass --overwrite."
            )
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
        os.replace(stage, out)
        shutil.rmtree(old)
        return
    if out.is_dir():
        out.rmdir()
    os.replace(stage, out)


def export_revision(
    project: Project,
    revision: str,
    *,
    format: str,
    out: str | Path | None = None,
    name: str | None = None,
    batch_size: int = 10_000,
    overwrite: bool = False,
    progress: ProgressCallback | None = None,
) -> ExportResult:
    """Write revision ``revision`` of ``project`` in ``format`` to ``out``.

    Parameters
    ----------
    project : Project
    revision : str
        Revision name (must exist).
    format : {"npy", "cifar", "imagefolder", "parquet"}
    out : path-like, optional
        Target folder; default ``revisions/<revision>/<format>`` in the project.
        Must not exist or be empty unless ``overwrite``.
    name : str, optional
        File-name prefix for ``npy``/``parquet``; default the revision name.
    batch_size : int
        Images per CIFAR batch file.
    overwrite : bool
        Replace an existing non-empty ``out``.
    progress : ProgressCallback, optional

    Returns
    -------
    ExportResult
    """
    if format not in _WRITERS:
        raise UnknownNameError("export format", format, [], list(EXPORT_FORMATS))
    if batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer. Got {batch_size}.")
    rev = project.store.revisions.get(revision)
    members = project.store.revisions.members(revision)
    target = Path(out) if out is not None else project.revisions_dir / revision / format
    target = target.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir()
    try:
        ctx = _Ctx(
            project,
            members,
            _provenance(project, revision, members),
            stage,
            name or revision,
            batch_size,
            progress,
        )
        _WRITERS[format](ctx)
        files = {
            p.relative_to(stage).as_posix(): sha256_file(p)
            for p in sorted(stage.rglob("*"))
            if p.is_file()
        }
        from retest import __version__

        manifest = {
            "name": ctx.name,
            "format": format,
            "retest_version": __version__,
            "revision": {
                "name": rev.name,
                "strategy": rev.strategy,
                "params": dict(rev.params),
                "seed": rev.seed,
                "parent": rev.parent,
                "valid": rev.valid,
                "created": rev.created,
                "shortfall": dict(rev.shortfall),
            },
            "classes": [
                {"id": c.id, "name": c.name} for c in project.store.classes.list()
            ],
            "n_images": len(members),
            "images": ctx.images,
            "files": files,
        }
        files["manifest.json"] = write_json(stage / "manifest.json", manifest)
        _swap_into_place(stage, target, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    _record(project, target, revision, format, files["manifest.json"])
    return ExportResult(target, format, len(members), files)


def _record(project: Project, target: Path, revision: str, fmt: str, sha: str) -> None:
    from retest import __version__

    try:
        path = (target / "manifest.json").relative_to(project.root).as_posix()
    except ValueError:
        path = str(target / "manifest.json")
    project.store.artifacts.put(
        ArtifactRecord(
            name=f"export/{revision}/{fmt}",
            path=path,
            sha256=sha,
            stage="export",
            params={"revision": revision, "format": fmt},
            version=__version__,
        )
    )
