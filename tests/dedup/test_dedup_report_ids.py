"""``retest dedup --report`` and ``status --candidate`` print ids a user can paste
back: whole ids, even where candidates share a long prefix (a 16-character prefix
named two candidates, or none, once printed)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
from dedup_helpers import brighter, fm_images  # type: ignore[import-not-found]

from checkout_cli import run_retest
from retest.project import Project
from retest.store.artifacts import PixelArray
from retest.store.rows import CandidateRow, ReferenceRow, content_id

SHARED = "0123456789abcdef" * 2  # 32 characters every candidate id starts with


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_retest(root, *args, columns=80)  # a narrow terminal


def _project(root: Path, fm: Path) -> tuple[Project, list[str]]:
    """Originals and near-copies of them whose ids share their first 32
    characters (64 hex digits each, as content ids are)."""
    refs, labels, test = fm_images(fm, 200, 12)
    cands = np.concatenate([brighter(refs[:6]), test])
    p = Project.init(root, name="t", classes_from="fashion-mnist")
    px = PixelArray.create(p.arrays_dir, "fm", shape=(28, 28))
    rows = px.append(refs)
    p.store.references.add(
        ReferenceRow(
            "train",
            i,
            int(labels[i]),
            content_id(refs[i]),
            array_name="fm",
            array_row=r,
        )
        for i, r in enumerate(rows)
    )
    ids = [SHARED + content_id(c)[32:] for c in cands]
    crow = px.append(cands)
    p.store.candidates.add(
        CandidateRow(i, "fm", str(n), class_id=0, array_name="fm", array_row=r)
        for n, (i, r) in enumerate(zip(ids, crow, strict=True))
    )
    p.close()
    return p, ids


def test_report_prints_whole_ids_that_paste_back(
    tmp_path: Path, fashion_mnist_dir: Path
) -> None:
    _, ids = _project(tmp_path, fashion_mnist_dir)
    out = _cli(tmp_path, "dedup", "--metrics", "l2", "--k", "3", "--report")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    table = out.stdout[out.stdout.index("closest pairs: l2") :]
    shown = re.findall(rf"\b{SHARED}[0-9a-f]*", table)
    # ten pairs shown: each candidate id whole (a pool reference is one too)
    assert len(shown) >= 10
    assert set(shown) <= set(ids), shown
    # the planted near-copies are the closest pairs, with their originals
    for i in range(6):
        assert ids[i] in table and f"train:{i}" in table
    assert "thumbnails: reports/dedup/thumbs/ID.png" in out.stdout
    info = _cli(tmp_path, "status", "--candidate", shown[0])
    assert info.returncode == 0, info.stderr
    first = info.stdout.splitlines()[0]  # id and verdict on one line, unwrapped
    assert re.match(rf"{shown[0]} \(T-shirt/top, fm\): (eligible|excluded: )", first)
    # the nearest images of `status --candidate` are whole ids too
    near = re.findall(rf"\b{SHARED}[0-9a-f]*", info.stdout)
    assert near and set(near) <= set(ids), info.stdout
