"""The overlap-minimising train/test split (CIFAR-10.2 style) of a project's images.

The pool is either the project's candidates (in ingest order) or the members of
a revision (from the store, or from an export's ``manifest.json``). "Overlap"
means an image that is in the original training set: a reference ``train:*``
image itself, or a candidate whose nearest original training image lies within
the near-original threshold of the project's eligibility rule (exact copies
included). The builder (:func:`retest.sampling.split.build_train_test`) fills
each class with non-overlapping images first and uses overlapping ones only to
fill up, then splits each class at random (seeded).

Which candidates may be used comes from the shared eligibility rule
(:func:`retest.project._eligibility.candidate_eligibility`), with one difference
the method needs: a copy of an original *training* image is allowed in (as
overlap, last), while a copy of an original *test* image never is.

The result is written atomically as JSON (``reports/split_<source>_seed<seed>.json``
by default) and recorded in the artifact manifest.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from retest._output import RULES, check_output
from retest.errors import ConfigError, DataIntegrityError, NotFoundError
from retest.project import (
    AUTO_METRICS,
    ORIGINAL_COPY_REASONS,
    Eligibility,
    Project,
    candidate_eligibility,
    check_fresh,
)
from retest.sampling.base import SampleResult
from retest.sampling.eligibility import CandidateInfo
from retest.sampling.split import build_train_test
from retest.store.artifacts import save_json, write_json
from retest.store.rows import content_id, split_reference_id

__all__ = ["SplitResult", "check_split_out", "split_pool"]

_COPY_REASONS = frozenset(ORIGINAL_COPY_REASONS)


@dataclass(frozen=True, slots=True)
class SplitResult:
    """The split, its source and where it was written."""

    source: str
    result: SampleResult
    overlap: frozenset[str]
    path: Path
    n_pool: int

    @property
    def train(self) -> list[str]:
        return [m.id for m in self.result.members if m.split == "train"]

    @property
    def test(self) -> list[str]:
        return [m.id for m in self.result.members if m.split == "test"]

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "source": self.source,
            "strategy": r.strategy,
            "seed": r.seed,
            "parameters": r.parameters,
            "valid": r.is_valid,
            "n_pool": self.n_pool,
            "n_train": len(self.train),
            "n_test": len(self.test),
            "per_class": r.metadata.get("per_class", {}),
            "shortfall": [s.as_dict() for s in r.shortfall],
            "train": self.train,
            "test": self.test,
            "members": [
                {
                    "id": m.id,
                    "class": m.class_name,
                    "split": m.split,
                    "overlap": m.id in self.overlap,
                }
                for m in r.members
            ],
            "path": str(self.path),
        }


def _near_originals(
    project: Project, ids: set[str], threshold: float | None
) -> dict[str, set[str]]:
    """``item → {"train", "test", …}``: splits with an original within ``threshold``."""
    out: dict[str, set[str]] = {}
    if threshold is None:
        return out
    for metric in AUTO_METRICS:
        for nl in project.store.neardup.iter_neighbours(metric=metric):
            if nl.candidate_id not in ids:
                continue
            for ref, d in zip(nl.ref_ids, nl.distances, strict=True):
                parsed = split_reference_id(ref)
                if parsed is not None and d <= threshold:
                    out.setdefault(nl.candidate_id, set()).add(parsed[0])
    return out


def _exact_copy_splits(project: Project, ids: Sequence[str]) -> dict[str, set[str]]:
    """``candidate → splits holding a byte-identical original``."""
    if not ids:
        return {}
    by_digest: dict[str, set[str]] = {}
    for r in project.store.references.list():
        by_digest.setdefault(r.content_id, set()).add(r.split)
    out = {}
    for i in range(0, len(ids), 4096):
        part = list(ids[i : i + 4096])
        for cid, px in zip(part, project.pixels(part), strict=True):
            splits = by_digest.get(content_id(px))
            if splits:
                out[cid] = splits
    return out


def _original_splits(
    project: Project, ids: Sequence[str], elig: Eligibility, copies: Sequence[str]
) -> dict[str, set[str]]:
    near = _near_originals(project, set(ids), elig.near_original_threshold)
    for cid, splits in _exact_copy_splits(project, copies).items():
        near.setdefault(cid, set()).update(splits)
    return near


def _candidate_pool(
    project: Project, include_unreviewed: bool
) -> tuple[list[CandidateInfo], set[str]]:
    check_fresh(project)
    elig = candidate_eligibility(project, include_unreviewed=include_unreviewed)
    names = dict(enumerate(project.class_names))
    # the decision covers exactly the candidates with a class
    rows = [r for r in project.store.candidates.iter() if r.class_id is not None]
    copy_like = [
        r.id
        for r in rows
        if elig.blocking(r.id) and set(elig.blocking(r.id)) <= _COPY_REASONS
    ]
    near = _original_splits(project, [r.id for r in rows], elig, copy_like)
    pool, overlap = [], set()
    for r in rows:
        if r.class_id is None:
            continue
        blocking = set(elig.blocking(r.id))
        splits = near.get(r.id, set())
        if not blocking:
            pool.append(CandidateInfo(r.id, names[r.class_id]))
            if "train" in splits:
                overlap.add(r.id)
        elif blocking <= _COPY_REASONS and splits == {"train"}:
            pool.append(CandidateInfo(r.id, names[r.class_id]))
            overlap.add(r.id)
    return pool, overlap


def _members(
    project: Project, revision: str | None, export: Path | None
) -> tuple[str, list[tuple[str, str]]]:
    if export is not None:
        from retest._validation import decode_utf8

        if export.is_file() and export.name != "manifest.json":
            raise ConfigError(  # the option names a folder: a bad value (exit 2)
                f"--export {export} is a file, not a folder; pass the folder of an "
                "exported revision (it holds manifest.json)."
            )
        manifest = export / "manifest.json" if export.is_dir() else export
        try:
            text = decode_utf8(
                manifest.read_bytes(), str(manifest), "export it again (retest export)"
            )
            data = json.loads(text)
            items = [(str(e["item_id"]), str(e["class"])) for e in data["images"]]
        except FileNotFoundError:
            raise NotFoundError(
                f"{manifest} does not exist; pass the folder of an exported revision "
                "(it holds manifest.json)."
            ) from None
        except (ValueError, KeyError, TypeError) as err:
            raise DataIntegrityError(
                f"{manifest} is not a revision manifest (images with item_id and "
                f"class expected): {err}."
            ) from err
        name = data.get("name")
        if not isinstance(name, str) or not name:
            name = manifest.parent.name
        unknown = sorted({c for _, c in items} - set(project.class_names))
        if unknown:
            raise DataIntegrityError(
                f"{manifest}: classes {unknown[:3]} are not classes of the project."
            )
        return f"export:{name}", items
    from retest.stages.evaluate import project_revisions

    assert revision is not None
    project_revisions(project, [revision])
    names = dict(enumerate(project.class_names))
    return f"revision:{revision}", [
        (m.item_id, names[m.class_id])
        for m in project.store.revisions.members(revision)
    ]


def _revision_pool(
    project: Project, items: list[tuple[str, str]]
) -> tuple[list[CandidateInfo], set[str]]:
    ids = [i for i, _ in items]
    elig = candidate_eligibility(project, include_unreviewed=True)
    cands = [i for i in ids if split_reference_id(i) is None]
    near = _near_originals(project, set(cands), elig.near_original_threshold)
    known = project.store.candidates.existing(cands)
    for cid, splits in _exact_copy_splits(project, sorted(known)).items():
        near.setdefault(cid, set()).update(splits)
    overlap = set()
    for i in ids:
        ref = split_reference_id(i)
        if (ref is not None and ref[0] == "train") or "train" in near.get(i, set()):
            overlap.add(i)
    return [CandidateInfo(i, c) for i, c in items], overlap


_SPLIT_KEYS = frozenset({"source", "strategy", "seed", "parameters", "train", "test"})


def _split_file(path: Path) -> str | None:
    """None when ``path`` is a split JSON this stage wrote, else why not."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return "it is not a JSON file"
    if not isinstance(data, dict) or not _SPLIT_KEYS <= set(data):
        return "it is not a split JSON"
    return None


def check_split_out(out: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """The ``--out`` file of a split may be written (the shared output rule): an
    existing file only with ``overwrite`` and only when it is a split JSON."""
    return check_output(
        out, RULES["split"], option="--out", overwrite=overwrite, owned=_split_file
    )


def split_pool(
    project: Project,
    *,
    seed: int,
    per_class: int = 1000,
    train_fraction: float = 0.8,
    policy: Literal["min_overlap", "first"] = "min_overlap",
    revision: str | None = None,
    export: str | os.PathLike[str] | None = None,
    include_unreviewed: bool = False,
    out: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> SplitResult:
    """Build and write the overlap-minimising train/test split.

    Parameters
    ----------
    seed : int
        Seed of the per-class random split (CIFAR-10.2 used 200).
    revision, export : optional
        Split a revision of the store, or an exported revision folder, instead of
        the project's eligible candidates (at most one of them).
    include_unreviewed : bool
        Candidates: let through those whose only reason is a pending
        near-duplicate review.
    out : path, optional
        JSON file to write (default ``reports/split_<source>_seed<seed>.json``);
        never a project's own file (:func:`check_split_out`).
    overwrite : bool
        Replace an existing ``out`` that is a split file.
    """
    if out is not None:
        check_split_out(out, overwrite=overwrite)
    if revision is not None and export is not None:
        raise ConfigError("pass either --revision or --export, not both.")
    if revision is None and export is None:
        source = "candidates"
        pool, overlap = _candidate_pool(project, include_unreviewed)
    else:
        source, items = _members(
            project, revision, Path(export) if export is not None else None
        )
        pool, overlap = _revision_pool(project, items)
    result = build_train_test(
        pool,
        random_state=seed,
        per_class=per_class,
        train_fraction=train_fraction,
        in_original_train=overlap,
        policy=policy,
        classes=project.class_names,
    )
    safe = source.replace(":", "_").replace("/", "_")
    rel = f"reports/split_{safe}_seed{seed}.json"
    path = Path(out) if out is not None else project.root / rel
    res = SplitResult(source, result, frozenset(overlap), path.resolve(), len(pool))
    data = res.to_json()
    if out is None:
        save_json(
            project.store,
            project.root,
            rel,
            data,
            stage="split",
            params={k: data[k] for k in ("source", "seed", "parameters")},
        )
    else:
        write_json(path, data)
    return res
