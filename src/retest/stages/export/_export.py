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
    lexicographic folder order (docs/algorithms.md#imagefolder-test-sets: "10" sorts
    before "2"). File-backed images keep their original bytes; array-backed ones are
    encoded as PNG.
``parquet``
    ``<name>.parquet``: one row per image with the image bytes and all metadata.

Every export also writes ``manifest.json``: the revision (strategy, parameters, seed,
parent, creation time), per-image provenance (source, source reference, keyword /
query, dates, url, license, selection frequency and annotation count when known:
the crowd assignments counted as ``retest sample`` counts them plus other labels,
blacklist and review status), the sha256 of every other file and the package
version. The same revision exports to byte-identical files: no timestamps besides
the revision's own, sorted JSON keys, fixed PNG settings. The export is built in a
temporary sibling directory and renamed into place.

Safety rules (each refusal is one line and touches nothing; a refused output
folder is a :class:`~retest.errors.ConfigError`, a bad option value like every
``--out``; a refused revision a :class:`~retest.errors.StageError`):

* ``--overwrite`` replaces only a folder that retest exported: one holding a
  ``manifest.json`` of this schema (:func:`is_export_folder`) and no project.
* The target is never the project, a folder containing it, or a folder inside it
  other than under ``revisions/`` (paths compared after resolving symlinks; the
  project's ``arrays/``, ``images/`` and ``retest.db`` count even when they are
  symlinks to elsewhere).
* Revision and export names pass :func:`retest.names.validate_name`.
* Every image is checked against its content hash (the id of a candidate, the
  stored hash of an original) as it is read; a mismatch raises
  :class:`~retest.errors.DataIntegrityError` and no file is left behind.
* With ``strict`` (``retest export`` without ``--force``) an invalid or empty
  revision, or one with members that are no longer eligible, is refused.

Staging folders of killed exports (``.<target>.tmp-<pid>``, ``.<target>.old-<pid>``
of processes that no longer run) are removed by the next export to the same target;
an ``.old`` one is renamed back when the kill left no target (the swap was cut
between its two renames).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from retest._atomic import pid_alive
from retest._output import RULES, check_location
from retest._progress import ProgressCallback, report
from retest._validation import check_batch_size
from retest._version import __version__
from retest.config import CONFIG_NAME
from retest.errors import (
    ConfigError,
    DataIntegrityError,
    InputValidationError,
    StageError,
    UnknownNameError,
)
from retest.names import validate_name
from retest.project import DB_NAME, Project, selection_frequencies
from retest.store.artifacts import (
    sha256_file,
    write_bytes,
    write_json,
    write_npy,
    write_parquet,
)
from retest.store.rows import (
    ArtifactRecord,
    Revision,
    RevisionMember,
    content_id,
    file_content_id,
    split_reference_id,
)

__all__ = [
    "EXPORT_FORMATS",
    "ExportFormat",
    "ExportResult",
    "check_exportable",
    "clean_leftovers",
    "export_revision",
    "is_export_folder",
    "verified_pixels",
]

ExportFormat = Literal["npy", "cifar", "imagefolder", "parquet"]
EXPORT_FORMATS: tuple[str, ...] = ("npy", "cifar", "imagefolder", "parquet")
_CHUNK = 2048


@dataclass(frozen=True, slots=True)
class ExportResult:
    """Where an export went: ``files`` maps each written path (relative to ``out``,
    manifest included) to its sha256; ``cleaned`` names the leftovers of killed
    exports that were removed (or restored) next to ``out``."""

    out: Path
    format: str
    n_images: int
    files: dict[str, str]
    cleaned: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Expected:
    """What an item's bytes must hash to, and where they live (for messages)."""

    kind: Literal["pixels", "file"]
    sha256: str
    where: str


@dataclass
class _Ctx:
    project: Project
    members: list[RevisionMember]
    images: list[dict[str, Any]]  # per-image manifest entries, filled by writers
    stage: Path
    name: str
    batch_size: int
    progress: ProgressCallback | None
    expected: dict[str, _Expected]
    files_checked_on_encode: bool = False

    def pixel_chunks(self) -> Any:
        """(start, [pixels]) for consecutive chunks of members, in order, each
        image checked against its content hash before a writer sees it."""
        ids = [m.item_id for m in self.members]
        for s in range(0, len(ids), _CHUNK):
            part = ids[s : s + _CHUNK]
            pixels = self.project.pixels(part)
            for item_id, px in zip(part, pixels, strict=True):
                exp = self.expected[item_id]
                if exp.kind == "pixels":
                    _verify(item_id, exp, content_id(px))
                elif not self.files_checked_on_encode:
                    self.file_bytes(item_id)
            yield s, pixels
            report(self.progress, "export", min(s + _CHUNK, len(ids)), len(ids))

    def file_bytes(self, item_id: str) -> bytes | None:
        """The checked original bytes of a file-backed item (None for arrays)."""
        exp = self.expected[item_id]
        if exp.kind != "file":
            return None
        raw = self.project.file_bytes(item_id)
        if raw is None:  # the row changed under us: treat as damage
            raise DataIntegrityError(f"item {item_id} ({exp.where}) has no file.")
        _verify(item_id, exp, file_content_id(raw))
        return raw


def _verify(item_id: str, exp: _Expected, got: str) -> None:
    if got != exp.sha256:
        raise DataIntegrityError(
            f"item {item_id} ({exp.where}) does not match its content hash "
            f"(sha256 {got[:16]}…, expected {exp.sha256[:16]}…): its {exp.kind} "
            "changed after ingest. Nothing was written; run `retest check` to list "
            "damaged items and re-ingest their source."
        )


def _expected_hashes(
    project: Project, members: list[RevisionMember]
) -> dict[str, _Expected]:
    """Content hash of every member: a candidate's id is the sha256 of its pixels
    (array-backed) or of its file bytes (file-backed); an original image stores the
    hash of its pixels in its row."""
    store = project.store
    ids = [m.item_id for m in members]
    cands = [i for i in ids if split_reference_id(i) is None]
    out: dict[str, _Expected] = {}
    for k in range(0, len(cands), _CHUNK):
        for c in store.candidates.get_many(cands[k : k + _CHUNK]):
            if c.array_name is not None and c.array_row is not None:
                where = f"arrays/{c.array_name} row {c.array_row}"
                out[c.id] = _Expected("pixels", c.id, where)
            else:
                out[c.id] = _Expected("file", c.id, str(c.file_path))
    for i in ids:
        if i not in out:
            r = store.references.get(i)
            where = f"original, arrays/{r.array_name} row {r.array_row}"
            out[i] = _Expected("pixels", r.content_id, where)
    return out


def verified_pixels(
    project: Project, members: list[RevisionMember]
) -> list[NDArray[np.uint8]]:
    """The members' pixels, each checked against its content hash first (what
    export writes and what ``retest evaluate`` scores: never damaged bytes).

    Raises
    ------
    DataIntegrityError
        An item whose stored pixels or file changed after ingest.
    """
    expected = _expected_hashes(project, members)
    out: list[NDArray[np.uint8]] = []
    ids = [m.item_id for m in members]
    for s in range(0, len(ids), _CHUNK):
        part = ids[s : s + _CHUNK]
        for item_id, px in zip(part, project.pixels(part), strict=True):
            exp = expected[item_id]
            if exp.kind == "pixels":
                _verify(item_id, exp, content_id(px))
            else:
                raw = project.file_bytes(item_id)
                _verify(item_id, exp, file_content_id(raw or b""))
            out.append(px)
    return out


# ------------------------------------------------------------------ provenance


def _provenance(
    project: Project, revision: str, members: list[RevisionMember]
) -> list[dict[str, Any]]:
    store = project.store
    names = {c.id: c.name for c in store.classes.list()}
    # crowd votes as sample counted them (the one rule: rejected work out, one
    # assignment per worker and task); other labels (stage 1/2) as stored
    counts = store.annotations.item_counts()
    task_counts = store.annotations.item_counts(kinds=["task"])
    compat = store.revisions.get(revision).params.get("compat")
    freqs = selection_frequencies(project, compat=compat)
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
        n_labels = (
            counts.get(m.item_id, (0, 0))[0] - task_counts.get(m.item_id, (0, 0))[0]
        )
        stat = freqs.get((m.item_id, m.class_id))
        n_votes = stat.n_assignments if stat is not None else 0
        state = reviews.get(m.class_id)
        entry.update(
            annotation_count=n_labels + n_votes,
            selection_frequency=stat.frequency
            if stat is not None and n_votes
            else None,
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
        write_bytes(ctx.stage / f"data_batch_{b + 1}", pickle.dumps(batch, protocol=2))
        for i, e in enumerate(imgs):
            e.update(file=f"data_batch_{b + 1}", row=i)
    names = [c.name for c in ctx.project.store.classes.list()]
    meta = {
        "label_names": names,
        "num_cases_per_batch": bs,
        "num_vis": int(data.shape[1]) if n else 0,
    }
    write_bytes(ctx.stage / "batches.meta", pickle.dumps(meta, protocol=2))


def _encode(ctx: _Ctx, item_id: str, pixels: NDArray[np.uint8]) -> tuple[bytes, str]:
    """Original file bytes when the item is a file, else a deterministic PNG."""
    raw = ctx.file_bytes(item_id)
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
            write_bytes(ctx.stage / rel, data)
            e["file"] = rel
    index = {str(c.id): c.name for c in ctx.project.store.classes.list()}
    write_json(ctx.stage / "class_index.json", index)


def _has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


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


# ------------------------------------------------------------------ target safety

_MANIFEST_KEYS = frozenset(
    {"name", "format", "retest_version", "revision", "n_images", "images", "files"}
)
_SHA256 = re.compile(r"[0-9a-f]{64}")
_LEFTOVER = re.compile(r"(tmp|old)-([0-9]+)")


def is_export_folder(folder: str | Path) -> bool:
    """Whether ``folder`` holds a ``manifest.json`` that :func:`export_revision`
    wrote: a JSON object with this module's keys, a known format and a sha256 per
    listed file. ``--overwrite`` replaces nothing else."""
    path = Path(folder) / "manifest.json"
    if path.is_symlink() or not path.is_file():
        return False
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    if not isinstance(m, dict) or not _MANIFEST_KEYS <= set(m):
        return False
    files, rev = m["files"], m["revision"]
    return (
        m["format"] in EXPORT_FORMATS
        and isinstance(m["retest_version"], str)
        and isinstance(rev, dict)
        and isinstance(rev.get("name"), str)
        and isinstance(m["images"], list)
        and isinstance(files, dict)
        and all(isinstance(v, str) and _SHA256.fullmatch(v) for v in files.values())
    )


def _holds_a_project(folder: Path) -> Path | None:
    for marker in (CONFIG_NAME, DB_NAME):
        hit = next(iter(folder.rglob(marker)), None)
        if hit is not None:
            return hit
    return None


def _guard_location(project: Project, target: Path) -> None:
    """Refuse a target that is, contains or lies inside the project's data (only
    ``revisions/`` may receive exports inside a project)."""
    root = project.root.resolve()
    revisions = project.revisions_dir.resolve()
    protected = {  # most specific first, for the message
        "project's arrays/": project.arrays_dir.resolve(),
        "project's images/": project.images_dir.resolve(),
        f"project's {DB_NAME}": project.db_path.resolve(),
        "project's revisions/": revisions,
        "project": root,
    }
    for what, p in protected.items():
        if target == p or p.is_relative_to(target):
            whose = "is" if target == p else "contains"
            raise ConfigError(
                f"export folder {target} {whose} the {what} ({p}); an export never "
                "replaces project data. Choose another --out."
            )
    if target.is_relative_to(revisions):
        return
    for what, p in protected.items():
        if target.is_relative_to(p):
            raise ConfigError(
                f"export folder {target} is inside the {what} ({p}); exports inside "
                f"a project go under {revisions}/ (the default revisions/REVISION/"
                "FORMAT). Choose another --out."
            )


def _check_parents(target: Path) -> None:
    """A file where a parent folder of the target must be: a bad --out (exit 2,
    as for every output), not a failure to create it."""
    blocker = next((p for p in target.parents if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise ConfigError(
            f"export folder {target}: {blocker} is a file, so the folder cannot be "
            "created; pass another --out."
        )


def _check_target(target: Path, *, overwrite: bool) -> None:
    """Refuse to write over anything but an empty folder or, with ``overwrite``,
    a folder retest exported."""
    if not (target.exists() or target.is_symlink()):
        return
    if not target.is_dir():
        raise ConfigError(
            f"export folder {target} is a file, not a folder; pass a folder (it is "
            "created when missing)."
        )
    if not any(target.iterdir()):
        return
    if not overwrite:
        raise ConfigError(
            f"export folder {target} already exists and is not empty. Choose another "
            "--out or pass --overwrite."
        )
    if not is_export_folder(target):
        raise ConfigError(
            f"export folder {target} has no retest manifest.json; --overwrite "
            "replaces only a folder retest exported. Choose another --out or "
            "empty the folder yourself."
        )
    found = _holds_a_project(target)
    if found is not None:
        raise ConfigError(
            f"export folder {target} holds a retest project ({found}); --overwrite "
            "never deletes a project. Choose another --out."
        )
    extra = _files_not_exported(target)
    if extra:
        raise ConfigError(
            f"export folder {target} holds {len(extra)} file{'s' * (len(extra) > 1)} "
            f"retest did not export (e.g. {extra[0]}); --overwrite replaces only "
            "what the manifest lists. "
            "Move them out first, or choose another --out."
        )


#: Files a file browser drops into any folder it shows: no one's data.
_OS_METADATA = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})


def _files_not_exported(folder: Path) -> list[str]:
    """Files under an export folder that its manifest does not list (a user's
    notes added after the export): an overwrite would delete them."""
    listed = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    ours = {*listed["files"], "manifest.json"}
    return sorted(
        rel
        for p in folder.rglob("*")
        if (p.is_file() or p.is_symlink())
        and p.name not in _OS_METADATA
        and (rel := p.relative_to(folder).as_posix()) not in ours
    )


def clean_leftovers(project: Project, target: Path) -> list[str]:
    """Remove the staging folders that killed exports left next to ``target``.

    Only ``.<name>.tmp-<pid>`` / ``.<name>.old-<pid>`` folders of processes that no
    longer run are touched. An ``.old`` folder is a complete earlier export moved
    aside by an overwrite; if the kill came before the new one took its place
    (no ``target``), it is renamed back instead of deleted. Returns what was done.
    """
    parent = target.parent
    prefix = f".{target.name}."
    if not parent.is_dir():
        return []
    root = project.root.resolve()
    done = []
    for p in sorted(parent.iterdir()):
        m = _LEFTOVER.fullmatch(p.name[len(prefix) :])
        if not p.name.startswith(prefix) or m is None:
            continue
        kind, pid = m.group(1), int(m.group(2))
        if pid != os.getpid() and pid_alive(pid):
            continue  # an export running now
        if p.is_symlink() or not p.is_dir() or root.is_relative_to(p.resolve()):
            continue
        if kind == "old":
            if not is_export_folder(p) or _holds_a_project(p) is not None:
                continue  # not provably ours: leave it for the user
            if not (target.exists() or target.is_symlink()):
                os.replace(p, target)
                done.append(f"{p} (restored as {target.name})")
                continue
        shutil.rmtree(p)
        done.append(str(p))
    return done


def _swap_into_place(stage: Path, out: Path) -> None:
    """Rename the finished stage to ``out``; an existing ``out`` (checked by
    :func:`_check_target`) is moved aside first and deleted last."""
    if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
        out.rmdir()
    if out.exists() or out.is_symlink():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
        os.replace(stage, out)
        shutil.rmtree(old)
        return
    os.replace(stage, out)


def _make_parents(folder: Path) -> list[Path]:
    """``mkdir -p folder``; returns the folders created, deepest first."""
    made = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        _remove_empty(made)
        raise StageError(
            f"cannot create export folder {folder}: {err.strerror or err}. Choose "
            "another --out."
        ) from None
    return made


def _remove_empty(folders: list[Path]) -> None:
    for p in folders:
        try:
            p.rmdir()
        except OSError:
            return


# ------------------------------------------------------------------ fitness


def check_exportable(
    project: Project,
    revision: Revision,
    members: list[RevisionMember],
    *,
    action: str = "export",
) -> None:
    """Refuse an empty or invalid revision, or one whose members are no longer
    eligible (blacklisted, found to be duplicates, … since it was sampled).

    Raises
    ------
    StageError
        One line: what is wrong, the first few ids with reasons, what to do.
    """
    name = revision.name
    if not members:
        raise StageError(
            f"revision {name!r} is empty: nothing to {action}. Sample a new revision "
            f"(retest sample), or pass --force to {action} it anyway."
        )
    if not revision.valid:
        short = sorted(revision.shortfall)
        raise StageError(
            f"revision {name!r} is INVALID: {len(short)} classes are short of images "
            f"({', '.join(short[:5])}{', …' if len(short) > 5 else ''}). Add "
            f"candidates and sample again with --from {name}, or pass --force to "
            f"{action} it anyway."
        )
    from retest.project import ineligible_members

    bad = ineligible_members(project, name)
    if bad:
        shown = "; ".join(f"{i} ({', '.join(r)})" for i, r in list(bad.items())[:3])
        raise StageError(
            f"{len(bad)} of {len(members)} members of revision {name!r} are no longer "
            f"eligible: {shown}{'; …' if len(bad) > 3 else ''}. Sample again with "
            f"--from {name} (it replaces them), or pass --force to {action} it anyway."
        )


# ------------------------------------------------------------------------ main


def export_revision(
    project: Project,
    revision: str,
    *,
    format: str,
    out: str | Path | None = None,
    name: str | None = None,
    batch_size: int = 10_000,
    overwrite: bool = False,
    strict: bool = False,
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
        Must not exist or be empty unless ``overwrite``; never the project's own
        data (see the module docstring).
    name : str, optional
        File-name prefix for ``npy``/``parquet``; default the revision name.
    batch_size : int
        Images per CIFAR batch file.
    overwrite : bool
        Replace an existing non-empty ``out`` that retest exported.
    strict : bool
        Refuse an empty, invalid or no-longer-eligible revision
        (:func:`check_exportable`); ``retest export`` sets it unless ``--force``.
    progress : ProgressCallback, optional

    Returns
    -------
    ExportResult

    Raises
    ------
    ConfigError
        A refused target (``out``); nothing was touched.
    StageError
        A refused (``strict``) revision; nothing was touched.
    DataIntegrityError
        An image does not match its content hash; nothing was written.
    """
    if format not in _WRITERS:
        raise UnknownNameError("export format", format, [], list(EXPORT_FORMATS))
    check_batch_size(batch_size)
    if format == "parquet" and not _has_pyarrow():
        raise ConfigError(
            "--format parquet needs pyarrow, which is not installed: "
            "pip install 'retest[parquet]', or use another --format."
        )
    validate_name(revision, "revision")
    if name is not None:
        validate_name(name, "export")
    rev = project.store.revisions.get(revision)
    members = project.store.revisions.members(revision)
    target = Path(out) if out is not None else project.revisions_dir / revision / format
    target = target.resolve()  # symlinks resolved before any comparison
    _guard_location(project, target)
    check_location(target, RULES["export"])  # and every other project
    if strict:
        check_exportable(project, rev, members)
    expected = _expected_hashes(project, members)
    _check_parents(target)
    made = _make_parents(target.parent)
    cleaned = clean_leftovers(project, target)
    try:
        _check_target(target, overwrite=overwrite)
    except BaseException:
        _remove_empty(made)
        raise
    stage = target.with_name(f".{target.name}.tmp-{os.getpid()}")
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
            expected,
            files_checked_on_encode=format in ("imagefolder", "parquet"),
        )
        _WRITERS[format](ctx)
        files = {
            p.relative_to(stage).as_posix(): sha256_file(p)
            for p in sorted(stage.rglob("*"))
            if p.is_file()
        }

        manifest = {
            "name": ctx.name,
            "format": format,
            "retest_version": __version__,
            # which arithmetic made the set (docs/algorithms.md#two-modes)
            "compat": rev.params.get("compat", "exact"),
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
        _swap_into_place(stage, target)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        _remove_empty(made)
        raise
    _record(project, target, revision, format, files["manifest.json"])
    return ExportResult(target, format, len(members), files, tuple(cleaned))


def _record(project: Project, target: Path, revision: str, fmt: str, sha: str) -> None:

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
