"""A small real project (SQLite, pixel arrays) and a live server on 127.0.0.1."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retest.labeling.people import name_key, token_hash
from retest.project import Project
from retest.stages.crowd import create_tasks
from retest.store.artifacts import PixelArray
from retest.store.rows import (
    CandidateRow,
    KeywordRow,
    NeighbourList,
    ReferenceRow,
    Revision,
    RevisionMember,
    content_id,
)

TOKEN = "test-token-123"
"""The personal token of labeler ``alice`` (every web test project has her)."""
REVIEWER = "test-reviewer-456"
"""The project owner's (admin) token: a reviewer writing as ``owner``."""


def all_routes(routes):  # type: ignore[no-untyped-def]
    """Every route of an app, the included routers' too (FastAPI wraps those)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from all_routes(inner.routes)
        else:
            yield route


def person_token(project: Project, name: str, role: str = "labeler") -> str:
    """The personal token of ``name`` (added with a fixed token when new)."""
    token = TOKEN if name == "alice" else f"tok-{name}-0123456789"
    if project.store.people.by_token(token_hash(token)) is None:
        project.store.people.add(name, name_key(name), role, token_hash(token))
    return token


def person(project: Project, name: str, role: str = "labeler") -> dict[str, str]:
    """Headers that sign a script in as ``name`` (see :func:`person_token`)."""
    return {"X-Retest-Token": person_token(project, name, role)}


@dataclass
class WebProject:
    project: Project
    candidates: list[str]
    references: list[str]


def build_project(root: Path) -> WebProject:
    proj = Project.init(root, name="webtest", classes=["cat", "dog"])
    rng = np.random.default_rng(0)
    refs = rng.integers(0, 255, (20, 8, 8, 3), dtype=np.uint8)
    cands = rng.integers(0, 255, (12, 8, 8, 3), dtype=np.uint8)
    ref_arr = PixelArray.create(proj.arrays_dir, "ref_test", shape=(8, 8, 3))
    ref_arr.append(refs)
    cand_arr = PixelArray.create(proj.arrays_dir, "pool", shape=(8, 8, 3))
    cand_arr.append(cands)
    proj.store.classes.put_keywords(
        [KeywordRow(0, "tabby", 5), KeywordRow(1, "puppy", 5)]
    )
    proj.store.references.add(
        ReferenceRow(
            "test",
            i,
            i % 2,
            content_id(refs[i]),
            "tabby" if i % 2 == 0 else "puppy",
            "ref_test",
            i,
        )
        for i in range(20)
    )
    cand_ids = [content_id(c) for c in cands]
    proj.store.candidates.add(
        CandidateRow(
            id=cid,
            source="arrays",
            source_ref=str(i),
            class_id=i % 2,
            keyword="tabby" if i % 2 == 0 else "puppy",
            array_name="pool",
            array_row=i,
            date_taken=f"2013-01-{i + 1:02d}",
        )
        for i, cid in enumerate(cand_ids)
    )
    cats = [c for i, c in enumerate(cand_ids) if i % 2 == 0]
    proj.store.neardup.put_neighbours(
        [
            NeighbourList(cats[0], "l2", ("test:0", cats[1]), (2e6, 3e6)),
            NeighbourList(cats[2], "l2", ("test:2",), (5e8,)),  # above the target
        ]
    )
    proj.store.revisions.create(
        Revision("webtest-a-0", "threshold", {"per_class": 3}, seed=1),
        [RevisionMember(c, i % 2) for i, c in enumerate(cand_ids[:6])],
    )
    create_tasks(proj, images_per_task=10, pos_controls=2, neg_controls=2, seed=3)
    person_token(proj, "alice")
    return WebProject(proj, cand_ids, [f"test:{i}" for i in range(20)])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
