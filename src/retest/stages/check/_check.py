"""``retest check``: is the project intact, and what did crashes leave behind?

Checks, in order (a damaged database stops the rest: its rows cannot be trusted
to say which pixels are in use):

1. the database file: present (or no stored images without it), a SQLite header,
   SQLite's full ``integrity_check``, a schema version this retest knows;
2. every pixel row a candidate or reference image points at: inside its array and
   hashing to the item's content id (candidate ids and reference ``content_id``
   are sha256 content hashes, so overwritten pixels are found); every file-backed
   candidate's file (named by the sha256 of its bytes) likewise; every array
   an item is stored in has a readable header (a missing or altered
   ``arrays/<name>.json`` is reported with the number of items it strands);
3. orphans: array rows and ``images/`` files named by a sha256 that nothing points
   at (left by a killed or failed ingest), bytes past an array's commit point;
   strays: other entries of ``arrays/`` and ``images/`` (not retest's, e.g. a
   report written there by mistake), named and never deleted;
4. leftovers: export staging folders (``.<name>.tmp-<pid>`` / ``.old-<pid>``) and
   atomic-write temp files (``.<name>.<pid>.<random>.tmp``) of processes that no
   longer run, older temp files without a pid once they are an hour old;
5. ingest jobs that started but did not complete;
6. indexes of the candidates that a killed bulk ingest dropped and did not
   rebuild (answers stay right, keyword queries are slower).

``repair=True`` gives orphans back (:meth:`PixelArray.release`), deletes orphan
files and dead processes' leftovers, and truncates uncommitted bytes. It holds the
writers lock exclusively (no ingest can be between an append and its insert) and
never touches a row or file something points at; damaged pixels or a damaged
database are reported, not repaired (restore a backup or re-ingest). It also
rebuilds the dropped indexes.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retest._atomic import pid_alive, temporary_of
from retest.config import CONFIG_NAME
from retest.errors import ConfigError, DataIntegrityError, RetestError
from retest.project import ARRAYS, Project, read_arrays
from retest.store.artifacts import PixelArray, sha256_file, writers_lock
from retest.store.base import Store

__all__ = [
    "CheckReport",
    "Problem",
    "check_project",
]

IMAGES = "images"
_STAGING = re.compile(r"\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>[0-9]+)")
_TEMP_ANY = re.compile(r"\..+\.(tmp|part)")
STALE_SECONDS = 3600
"""Temp files without a pid in their name count as leftovers after this long."""
_CHUNK = 65_536
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: Folders retest keeps in arrays/ besides the pixel arrays: dedup features and
#: distances, cached model predictions.
_ARRAY_DIRS = frozenset({"dedup", "predictions"})


@dataclass
class Problem:
    """One finding: its kind, a one-line detail, how many items, repaired?"""

    kind: str
    detail: str
    count: int = 1
    repaired: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "detail": self.detail,
            "count": self.count,
            "repaired": self.repaired,
        }


@dataclass
class CheckReport:
    """What :func:`check_project` found (and repaired)."""

    root: str
    problems: list[Problem] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No problem left (repaired ones do not count)."""
        return all(p.repaired for p in self.problems)

    @property
    def remaining(self) -> int:
        """Problems found and not repaired (what the exit code reflects)."""
        return sum(not p.repaired for p in self.problems)

    def add(self, kind: str, detail: str, count: int = 1) -> Problem:
        p = Problem(kind, detail, count)
        self.problems.append(p)
        return p

    def to_json(self) -> dict[str, Any]:
        return {
            "project": self.root,
            "ok": self.ok,
            "found": len(self.problems),
            "repaired": len(self.problems) - self.remaining,
            "remaining": self.remaining,
            "problems": [p.to_json() for p in self.problems],
            "stats": dict(self.stats),
            "notes": list(self.notes),
        }


# ----------------------------------------------------------------- helpers


def _hash_rows(px: PixelArray, rows: np.ndarray) -> list[str]:
    from retest.stages.ingest import batch_content_ids

    order = np.argsort(rows, kind="stable")
    data = px.array()[rows[order]]
    hashed = batch_content_ids(np.ascontiguousarray(data))
    out = [""] * len(rows)
    for k, h in zip(order.tolist(), hashed, strict=True):
        out[k] = h
    return out


def _chunks(it: Iterator[tuple[str, int]]) -> Iterator[list[tuple[str, int]]]:
    buf: list[tuple[str, int]] = []
    for x in it:
        buf.append(x)
        if len(buf) == _CHUNK:
            yield buf
            buf = []
    if buf:
        yield buf


# ----------------------------------------------------------------- database


def _check_database(root: Path, rep: CheckReport) -> bool:
    """File, header, integrity_check, schema version; False when rows can't be used."""
    from retest.project import DB_NAME
    from retest.store._sqlite_schema import SCHEMA_VERSION
    from retest.store.sqlite import check_db_header, inspect_database

    db = root / DB_NAME
    if not db.exists():
        held = [
            d
            for d in (ARRAYS, IMAGES)
            if (root / d).is_dir()
            and any(p.name[:1] != "." for p in (root / d).iterdir())
        ]
        if held:
            rep.add(
                "database",
                f"{db} is missing but {', '.join(held)} hold stored "
                "images; restore retest.db from a backup.",
            )
        else:
            rep.notes.append(f"{db} does not exist yet (created on first use).")
        return False
    rep.stats["database_bytes"] = db.stat().st_size
    try:
        check_db_header(db)
    except DataIntegrityError as err:
        rep.add("database", str(err))
        return False
    t0 = time.perf_counter()
    found, version = inspect_database(db)
    rep.stats["integrity_check_seconds"] = round(time.perf_counter() - t0, 3)
    if found:
        p = rep.add(
            "database",
            f"{db} is damaged: {'; '.join(found[:3])}. "
            "Restore retest.db from a backup.",
            len(found),
        )
        p.detail = p.detail[:2000]
        return False
    rep.stats["schema_version"] = version
    if version is None or version > SCHEMA_VERSION:
        rep.add(
            "schema",
            f"{db} has schema version {version}; this retest reads "
            f"1..{SCHEMA_VERSION}. Upgrade retest or restore a backup.",
        )
        return False
    if version < SCHEMA_VERSION:
        rep.notes.append(
            f"schema version {version} is migrated to {SCHEMA_VERSION} on next open."
        )
    return True


# ----------------------------------------------------------------- pixels


def _check_arrays(store: Store, root: Path, rep: CheckReport, repair: bool) -> None:
    refs_by_array: dict[str, list[tuple[str, int]]] = {}
    for r in store.references.list():
        if r.array_name is not None and r.array_row is not None:
            refs_by_array.setdefault(r.array_name, []).append(
                (r.content_id, r.array_row)
            )
    arrays, damaged = read_arrays(root)
    in_use = store.candidates.array_names()
    verified = orphans_total = 0
    headed = {n for n in damaged if (root / ARRAYS / f"{n}.u8").exists()}
    for name in sorted(set(arrays) | set(refs_by_array) | in_use | headed):
        px = arrays.get(name)
        if px is None:
            n = len(refs_by_array.get(name, ()))
            if name in in_use:
                n += sum(1 for _ in store.candidates.array_refs(name))
            why = damaged.get(name) or (
                f"pixel array {name} has no header (arrays/{name}.json is missing); "
                "restore it from a backup."
            )
            rep.add(
                "pixels",
                f"{why} Until then the pixels of the {n} items "
                f"stored in {name} cannot be read.",
                n,
            )
            continue
        count = len(px)
        size = px.data_path.stat().st_size if px.data_path.exists() else 0
        if size < count * px.row_bytes:
            rep.add(
                "pixels",
                f"{px.data_path} holds {size} bytes but its header "
                f"commits {count} rows of {px.row_bytes} bytes (truncated); "
                "restore it from a backup.",
                count,
            )
            continue
        used = np.zeros(count, bool)
        bad: list[str] = []
        outside = 0
        pairs = store.candidates.array_refs(name)
        for chunk in _chunks(iter([*refs_by_array.get(name, ()), *pairs])):
            ids = [i for i, _ in chunk]
            rows = np.fromiter((r for _, r in chunk), np.int64, len(chunk))
            inside = (rows >= 0) & (rows < count)
            if not inside.all():
                outside += int((~inside).sum())
            rows_in = rows[inside]
            ids_in = [i for i, ok in zip(ids, inside.tolist(), strict=True) if ok]
            used[rows_in] = True
            for cid, got in zip(ids_in, _hash_rows(px, rows_in), strict=True):
                if cid != got:
                    bad.append(cid)
            verified += len(rows_in)
        if outside:
            rep.add(
                "pixels",
                f"{outside} items point past the {count} rows of "
                f"{px.header_path}; restore arrays/ from a backup.",
                outside,
            )
        if bad:
            rep.add(
                "pixels",
                f"{len(bad)} pixel rows of {px.data_path} no longer "
                f"match their content id (e.g. {bad[0][:16]}…): the file was "
                "overwritten. Restore it from a backup or re-ingest the source.",
                len(bad),
            )
        for a, b in px.free_ranges():
            used[a:b] = True  # released earlier: not orphans any more
        orphan = np.flatnonzero(~used)
        if orphan.size:
            orphans_total += int(orphan.size)
            p = rep.add(
                "orphan_rows",
                f"{orphan.size} rows of {px.data_path} are not "
                "used by any candidate or reference image (left by a killed "
                "or failed ingest); `retest check --repair` gives them back.",
                int(orphan.size),
            )
            if repair:
                px.release(orphan)
                p.repaired = True
        if size > count * px.row_bytes:
            extra = size - count * px.row_bytes
            p = rep.add(
                "leftover",
                f"{px.data_path} has {extra} bytes past its "
                "committed rows (a writer was killed mid-append).",
                1,
            )
            if repair:
                with PixelArray._locked(px.root, px.name):
                    if len(px) == count:
                        with open(px.data_path, "r+b") as f:
                            f.truncate(count * px.row_bytes)
                            os.fsync(f.fileno())
                p.repaired = True
    rep.stats["pixel_rows_verified"] = verified
    rep.stats["orphan_rows"] = orphans_total


def _check_files(store: Store, root: Path, rep: CheckReport, repair: bool) -> None:
    used: set[str] = set()
    missing: list[str] = []
    for _cid, path, derived in store.candidates.file_refs():
        for rel in (path, *derived):
            used.add(rel)
    images = root / IMAGES
    present = {
        f"{IMAGES}/{p.name}": p
        for p in (images.iterdir() if images.is_dir() else ())
        if p.is_file() and not p.name.startswith(".")
    }
    strays = sorted(
        rel
        for rel, p in present.items()
        if rel not in used and not _SHA256.fullmatch(p.name)
    )
    if strays:
        _stray(rep, IMAGES, strays)
    for rel in strays:
        del present[rel]
    bad = []
    for rel in sorted(used):
        p = root / rel
        if rel not in present and not p.is_file():
            missing.append(rel)
            continue
        if Path(rel).parent.as_posix() == IMAGES and sha256_file(p) != Path(rel).name:
            bad.append(rel)
    rep.stats["files_verified"] = len(used) - len(missing)
    if missing:
        rep.add(
            "pixels",
            f"{len(missing)} image files are missing (e.g. {missing[0]}); "
            "restore images/ from a backup or re-ingest.",
            len(missing),
        )
    if bad:
        rep.add(
            "pixels",
            f"{len(bad)} image files no longer match their sha256 name "
            f"(e.g. {bad[0]}); restore them or re-ingest.",
            len(bad),
        )
    orphans = sorted(set(present) - used)
    if orphans:
        found = rep.add(
            "orphan_files",
            f"{len(orphans)} files in images/ are not "
            "used by any candidate (left by a killed or failed ingest).",
            len(orphans),
        )
        if repair:
            for rel in orphans:
                present[rel].unlink(missing_ok=True)
            found.repaired = True


def _stray(rep: CheckReport, folder: str, names: list[str]) -> None:
    """Files retest did not write in one of its data folders: named, never deleted
    (not even by ``--repair``: they may be a user's)."""
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    rep.add(
        "stray",
        f"{len(names)} entries in {folder}/ are not retest's "
        f"({', '.join(names[:3])}{more}); retest leaves them alone. Move them "
        f"out of {folder}/.",
        len(names),
    )


def _check_array_strays(store: Store, root: Path, rep: CheckReport) -> None:
    """Entries of ``arrays/`` that no pixel array, cache or lock accounts for."""
    d = root / ARRAYS
    if not d.is_dir():
        return
    arrays, damaged = read_arrays(root)
    names = set(arrays) | store.candidates.array_names()
    names |= {r.array_name for r in store.references.list() if r.array_name}
    strays = []
    for p in sorted(d.iterdir()):
        if p.name.startswith("."):
            continue  # locks and temporaries (leftovers are checked below)
        if p.is_dir() and not p.is_symlink():
            if p.name not in _ARRAY_DIRS:
                strays.append(f"{ARRAYS}/{p.name}/")
            continue
        if p.suffix in (".json", ".u8", ".lock") and p.stem in names:
            continue
        if p.suffix == ".json" and p.stem in damaged and (d / f"{p.stem}.u8").exists():
            continue  # a damaged header: reported with the pixels
        strays.append(f"{ARRAYS}/{p.name}")
    if strays:
        _stray(rep, ARRAYS, strays)


# ----------------------------------------------------------------- leftovers


def _walk(root: Path) -> Iterator[Path]:
    """Every path under the project except the big content-addressed folders."""
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        if d == root:
            dirnames[:] = [n for n in dirnames if n != IMAGES]
        for n in (*dirnames, *filenames):
            yield d / n


def _check_leftovers(project: Any, rep: CheckReport, repair: bool) -> None:
    root: Path = project.root
    now = time.time()
    staging: list[tuple[Path, str, str]] = []
    temps: list[Path] = []
    for p in list(_walk(root)):
        m = _STAGING.fullmatch(p.name)
        if m is not None and p.is_dir() and not p.is_symlink():
            if not pid_alive(int(m["pid"])):
                staging.append((p, m["name"], m["kind"]))
            continue
        if not p.is_file() or p.is_symlink():
            continue
        temp = temporary_of(p.name)
        if temp is not None:
            if not pid_alive(temp[1]):
                temps.append(p)
        elif _TEMP_ANY.fullmatch(p.name) and now - p.stat().st_mtime > STALE_SECONDS:
            temps.append(p)
    for folder, name, kind in staging:
        pr = rep.add(
            "leftover",
            f"{folder} is the {'staging' if kind == 'tmp' else 'moved-aside'} "
            "folder of an export that was killed.",
        )
        if repair:
            from retest.stages.export import clean_leftovers

            clean_leftovers(project, folder.parent / name)
            pr.repaired = not folder.exists()
    if temps:
        pr = rep.add(
            "leftover",
            f"{len(temps)} temporary files of killed writers (e.g. {temps[0]}).",
            len(temps),
        )
        if repair:
            for t in temps:
                t.unlink(missing_ok=True)
            pr.repaired = True


# ----------------------------------------------------------------- main


def _check_indexes(project: Any, rep: CheckReport, repair: bool) -> None:
    """Indexes a killed bulk ingest dropped (``defer_indexes``) and never rebuilt;
    the caller holds the writers' lock exclusively."""
    from retest.project import missing_index_problem

    problem = missing_index_problem(project, alone=True)
    if problem is None:
        return
    p = rep.add("indexes", f"{problem}.")
    if repair:
        project.store.candidates.restore_indexes()
        p.repaired = not project.store.candidates.missing_indexes()


def _find_root(start: Path) -> Path | None:
    for d in (start, *start.parents):
        if (d / CONFIG_NAME).is_file():
            return d
    return None


def check_project(
    root: str | os.PathLike[str] | None = None, *, repair: bool = False
) -> CheckReport:
    """Check the project in ``root`` (or the nearest parent); see the module doc.

    The one stage that takes a folder rather than a :class:`Project`: it works on
    a project that :meth:`Project.open` refuses (a damaged or missing database),
    which is what it is for. With ``repair`` it gives back orphans and removes
    leftovers while no writer runs; when an ingest is running, orphans are
    reported but left alone.

    Parameters
    ----------
    root : path, optional
        The project folder or one below it (default: the current directory).
    repair : bool

    Returns
    -------
    CheckReport

    Raises
    ------
    ConfigError
        ``root`` is not inside a retest project.
    """
    from retest.project import interrupted_ingests

    start = Path(root if root is not None else ".").resolve()
    found = _find_root(start)
    if found is None:
        raise ConfigError(
            f"{start} is not a retest project (no {CONFIG_NAME} in it or its "
            "parents). Pass --project DIR."
        )
    rep = CheckReport(str(found))
    t0 = time.perf_counter()
    if not _check_database(found, rep):
        rep.stats["seconds"] = round(time.perf_counter() - t0, 3)
        return rep
    try:
        project = Project.open(found)
    except RetestError as err:
        rep.add("database", str(err))
        return rep
    with project:
        rep.stats["candidates"] = project.store.candidates.count()
        rep.stats["references"] = project.store.references.count()
        not_dirs = [
            d
            for d in (project.arrays_dir, project.images_dir)
            if d.exists() and not d.is_dir()
        ]
        for d in not_dirs:
            rep.add(
                "pixels",
                f"{d} is a file, not the folder of the project's "
                "pixels; restore the folder from a backup.",
            )
        if not_dirs:
            rep.stats["seconds"] = round(time.perf_counter() - t0, 3)
            return rep
        with writers_lock(project.arrays_dir, exclusive=True, wait=False) as alone:
            if repair and not alone:
                rep.notes.append(
                    "an ingest or reference registration is running: orphans are "
                    "reported, not repaired. Run `retest check --repair` after it ends."
                )
            if not alone and not repair:
                rep.notes.append(
                    "an ingest or reference registration is running: rows it is "
                    "writing right now may show as orphans."
                )
            fix = repair and alone
            _check_arrays(project.store, found, rep, fix)
            _check_files(project.store, found, rep, fix)
            _check_array_strays(project.store, found, rep)
            _check_leftovers(project, rep, repair)
            if alone:  # while an ingest runs, its indexes are missing by design
                _check_indexes(project, rep, repair)
        for cmd in interrupted_ingests(project):
            rep.add(
                "interrupted_ingest",
                f"an ingest started but did not complete; resume it with: {cmd}",
            )
    rep.stats["seconds"] = round(time.perf_counter() - t0, 3)
    return rep
