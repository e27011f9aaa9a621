"""compat reaches the store: revision parameters, counting, the export manifest, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from retest.project import Project
from retest.stages.export import export_revision
from retest.stages.revisions import create_revision
from retest.store.artifacts import PixelArray
from retest.store.rows import AnnotationEvent, CandidateRow, content_id


def _project(root: Path) -> Project:
    """Two classes, four candidates each; candidate 0 of class a was answered by
    one worker twice on the same task (a re-posted HIT) and by nobody else, and
    so was candidate 0 of class b."""
    p = Project.init(root, name="cmp", classes=["a", "b"])
    imgs = np.random.default_rng(0).integers(0, 256, (8, 8, 8, 3), dtype=np.uint8)
    rows = PixelArray.create(p.arrays_dir, "c8", shape=(8, 8, 3)).append(imgs)
    ids = [content_id(x) for x in imgs]
    p.store.candidates.add(
        CandidateRow(
            ids[i], "arrays", str(i), i // 4, array_name="c8", array_row=rows[i]
        )
        for i in range(8)
    )
    events = []
    for i, cid in enumerate(ids):
        answers = [("w1", "x1", "2020-01-01"), ("w1", "x2", "2020-01-02")]
        if i % 4:
            answers = [("w1", f"y{i}", "2020-01-01"), ("w2", f"z{i}", "2020-01-02")]
        for worker, aid, when in answers:
            events.append(
                AnnotationEvent(
                    f"mturk:{worker}", "task", i // 4, cid, 1, when=when,
                    task_id=f"t{i}", assignment_id=aid, assignment_status="Approved",
                    worker=worker,
                )
            )  # fmt: skip
    p.store.annotations.add(events)
    return p


def test_authors_counting_changes_the_eligible_set_and_is_recorded(
    tmp_path: Path,
) -> None:
    with _project(tmp_path / "p") as p:
        kw = {"strategy": "threshold", "seed": 1, "per_class": 4, "min_annotations": 2}
        exact = create_revision(p, **kw)
        authors = create_revision(p, compat="authors", **kw)
        # one vote per worker and task: each first candidate has 1, too few
        assert exact.result.class_counts() == {"a": 3, "b": 3}
        assert not exact.revision.valid
        assert authors.result.class_counts() == {"a": 4, "b": 4}
        assert authors.revision.valid
        assert exact.revision.params["compat"] == "exact"
        assert (
            p.store.revisions.get(authors.revision.name).params["compat"] == "authors"
        )
        out = export_revision(
            p, authors.revision.name, format="npy", out=tmp_path / "out"
        )
        manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
        assert manifest["compat"] == "authors"
        assert manifest["revision"]["params"]["compat"] == "authors"
        # the released annotation counts are the ones the sample used
        assert [e["annotation_count"] for e in manifest["images"]] == [2] * 8
        assert out.n_images == 8


def test_cli_compat_option(tmp_path: Path) -> None:
    with _project(tmp_path / "p"):
        pass
    exe = str(Path(sys.executable).with_name("retest"))
    cmd = [exe, "sample", "--strategy", "threshold",
           "--seed", "1", "--per-class", "4", "--min-annotations", "2", "--no-dedup",
           "--project", str(tmp_path / "p")]  # fmt: skip
    bad = subprocess.run([*cmd, "--compat", "float"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "error: compat must be one of exact, authors" in bad.stderr
    assert "Traceback" not in bad.stderr
    ok = subprocess.run(
        [*cmd, "--compat", "authors", "--json"], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    with Project.open(tmp_path / "p") as p:
        (rev,) = p.store.revisions.list()
        assert rev.params["compat"] == "authors"
