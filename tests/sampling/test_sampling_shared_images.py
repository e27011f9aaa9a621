"""Images verified for two classes (CIFAR-10.1's cruiser case), from plan to sample.

The published ``cruiser_good_indices`` list 30 automobile and 7 ship images, all 7
also in the automobile list; v6 planned 2 automobile and 1 ship cruiser and drew
the ship one from the 7. An image has one class in retest, so the 7 must go to
one of them: by default the class with fewer verified images of the keyword
(ship), which reproduces the released v6 (200 ships); choosing automobile
leaves ship one short (1,999 images, invalid), and both are reported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from retest.project import Project, verified_per_keyword
from retest.stages.plan import shared_summary
from retest.stages.revisions import create_revision
from retest.store.artifacts import PixelArray
from retest.store.rows import AnnotationEvent, CandidateRow, content_id

PLAN = {"automobile": {"cruiser": 2, "coupe": 1}, "ship": {"cruiser": 1}}


def _project(root: Path) -> tuple[Project, list[str]]:
    p = Project.init(root, name="cr", classes=["automobile", "ship"])
    imgs = np.random.default_rng(5).integers(0, 256, (33, 8, 8, 3), dtype=np.uint8)
    rows = PixelArray.create(p.arrays_dir, "c8", shape=(8, 8, 3)).append(imgs)
    ids = [content_id(x) for x in imgs]
    kws = ["cruiser"] * 30 + ["coupe"] * 3
    # ingested once, under automobile (an exact copy is stored once)
    p.store.candidates.add(
        CandidateRow(ids[i], "tinyimages", str(18465400 + i), 0, keyword=kws[i],
                     array_name="c8", array_row=rows[i])
        for i in range(33)
    )  # fmt: skip
    events = [AnnotationEvent("b", "verify", 0, ids[i], 1) for i in range(33)]
    events += [AnnotationEvent("b", "verify", 1, ids[i], 1) for i in range(7)]
    p.store.annotations.add(events)
    return p, ids


def test_default_reproduces_v6_and_the_choice_is_reported(tmp_path: Path) -> None:
    p, ids = _project(tmp_path / "p")
    with p:
        (entry,) = shared_summary(p)
        assert entry["keyword"] == "cruiser" and entry["n_images"] == 7
        assert entry["classes"] == ["automobile", "ship"]
        assert entry["chosen"] == "ship" and entry["chosen_by"] == "fewest"
        assert "--shared-class cruiser=automobile" in entry["message"]
        # each image counted once, in its class
        assert verified_per_keyword(p) == {
            ("automobile", "cruiser"): 23,
            ("automobile", "coupe"): 3,
            ("ship", "cruiser"): 7,
        }
        kw = {"strategy": "keyword-count", "seed": 670725112, "keyword_counts": PLAN}
        v6 = create_revision(p, **kw)
        assert v6.revision.valid
        assert v6.result.class_counts() == {"automobile": 3, "ship": 1}
        (ship,) = v6.result.by_class()["ship"]
        assert ship.id in ids[:7]
        assert not {m.id for m in v6.result.by_class()["automobile"]} & set(ids[:7])
        # the other choice: ship has no cruiser left, one short, invalid
        other = create_revision(p, shared_class={"cruiser": "automobile"}, **kw)
        assert not other.revision.valid
        assert other.result.class_counts() == {"automobile": 3}
        assert other.revision.params["shared_class"] == {"cruiser": "automobile"}
        (moved,) = shared_summary(p, shared_class={"cruiser": "automobile"})
        assert moved["chosen"] == "automobile" and moved["chosen_by"] == "choice"


def test_cli_plan_reports_shared_images_and_refuses_a_bad_choice(
    tmp_path: Path,
) -> None:
    p, _ = _project(tmp_path / "p")
    p.close()
    exe = str(Path(sys.executable).with_name("retest"))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    base = [exe, "sample", "--strategy", "keyword-count", "--keyword-counts",
            str(plan), "--seed", "1", "--no-dedup", "--project", str(tmp_path / "p")]  # fmt: skip
    bad = subprocess.run(
        [*base, "--shared-class", "cruiser=truck"], capture_output=True, text=True
    )
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.startswith("error: ") and "truck" in bad.stderr
    assert "Traceback" not in bad.stderr
    odd = subprocess.run(
        [*base, "--shared-class", "cruiser"], capture_output=True, text=True
    )
    assert odd.returncode == 2 and "KEYWORD=CLASS" in odd.stderr
    ok = subprocess.run([*base, "--json"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
