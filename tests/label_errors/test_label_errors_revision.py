"""``retest label-errors --revision REV`` on a real Fashion-MNIST project (the
quick demo, slow): the audit pools the testbed predictions ``retest evaluate``
cached for the revision, names each suspect by its item id, says which command
makes missing predictions, and its suspects are queued for review and shown in
the web app with full ids."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from checkout_cli import RETEST  # type: ignore[import-not-found]
from retest.demo.run import DemoResult, DemoSettings, run_demo
from retest.label_errors.ensemble import ensemble_pred_probs
from retest.label_errors.finders import find_label_errors
from retest.project._eligibility import candidate_eligibility
from retest.project._project import Project
from retest.records import Predictions
from retest.stages.crowd import project_secret
from retest.stages.revisions._revisions import create_revision
from retest.web.app import create_app

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(
    tmp_path_factory: pytest.TempPathFactory, fashion_mnist_dir: Path
) -> DemoResult:
    root = tmp_path_factory.mktemp("le-revision") / "demo"
    settings = DemoSettings.for_run(quick=True, seed=0)
    return run_demo(root, settings=settings, data_root=fashion_mnist_dir)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RETEST, *args], capture_output=True, text=True, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def _cached_on(root: Path, dataset: str) -> list[Predictions]:
    """The cache's entries for ``dataset``, read from its files directly."""
    out = []
    for meta_path in sorted((root / "arrays" / "predictions").glob("*.json")):
        meta = json.loads(meta_path.read_text())
        if meta["dataset"] != dataset:
            continue
        with np.load(meta_path.with_name(meta["file"]), allow_pickle=False) as z:
            probs = z["probs"] if "probs" in z.files else None
            out.append(Predictions(meta["model"], dataset, z["topk"], probs=probs))
    return sorted(out, key=lambda p: p.model)


def test_a_revision_is_audited_with_its_cached_testbed_predictions(
    demo: DemoResult,
) -> None:
    root, rev = demo.root, demo.revision
    run = _cli("label-errors", "--revision", rev, "-p", str(root), "--json")
    assert run.returncode == 0, run.stderr
    got: dict[str, Any] = json.loads(run.stdout)
    out = root / "reports" / "label-errors" / rev
    assert Path(got["files"]["json"]) == out / "label_errors.json"
    assert (out / "contact_sheet.png").is_file()
    with Project.open(root) as project:
        members = project.store.revisions.members(rev)
        names = project.class_names
    labels = np.array([m.class_id for m in members])
    # the same pooled probabilities, computed here from the cache's own files
    cached = _cached_on(root, rev)
    assert len(cached) >= 5 and got["report"]["source"]["models"] == [
        p.model for p in cached
    ]
    probs = ensemble_pred_probs(cached, n_classes=len(names)).pred_probs
    want = np.flatnonzero(
        find_label_errors(labels, probs, method="prune-by-noise-rate")
    )
    rows = json.loads((out / "label_errors.json").read_text())["errors"]
    assert got["report"]["n_examples"] == len(members)
    assert sorted(r["index"] for r in rows) == want.tolist() and len(want) > 0
    for r in rows:  # each suspect names its image and its given class
        assert r["item_id"] == members[r["index"]].item_id
        assert r["given"] == members[r["index"]].class_id
        assert len(r["item_id"]) == 64
    assert got["top"][0]["given_name"] in names


def test_the_original_test_set_is_audited_too(demo: DemoResult) -> None:
    run = _cli("label-errors", "--revision", "original", "-p", str(demo.root),
               "--top", "3")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "of 10,000 labels flagged" in run.stdout
    assert "test:" in run.stdout  # suspects named test:INDEX
    assert "retest review queue-label-errors" in run.stdout


def test_missing_predictions_and_bad_options_are_one_line(demo: DemoResult) -> None:
    root = demo.root
    with Project.open(root) as project:
        second = create_revision(
            project, strategy="class-balanced", seed=7, per_class=20,
            min_annotations=0,
            eligibility=candidate_eligibility(project, include_unreviewed=True),
        ).revision.name  # fmt: skip
    run = _cli("label-errors", "--revision", second, "-p", str(root))
    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == [
        f"error: no cached model predictions for {second!r}: run `retest evaluate "
        f"--revision {second} --preset quick` (or with your own models) first; "
        "label-errors pools the predictions evaluate caches."
    ]
    assert not (root / "reports" / "label-errors" / second).exists()
    run = _cli("label-errors", "--revision", "nope", "-p", str(root))
    assert run.returncode == 1 and "no revision 'nope'" in run.stderr
    assert demo.revision in run.stderr  # lists the existing ones
    run = _cli(
        "label-errors", "--revision", second, "--labels", "x.npy", "-p", str(root)
    )
    assert run.returncode == 2
    assert run.stderr.startswith("error: --labels does not go with --revision")
    run = _cli("label-errors", "--out", str(root.parent / "x"))
    assert run.returncode == 2 and "--revision REV" in run.stderr


def test_suspects_of_a_revision_are_queued_and_shown_with_full_ids(
    demo: DemoResult, tmp_path: Path
) -> None:
    root, rev = demo.root, demo.revision
    out = root / "reports" / "label-errors" / rev
    if not (out / "label_errors.json").is_file():
        assert _cli("label-errors", "--revision", rev, "-p", str(root)).returncode == 0
    rows = json.loads((out / "label_errors.json").read_text())["errors"]
    # a list without item ids (as a user's own tool writes it): --revision maps
    # its indices to the revision's members
    plain = tmp_path / "suspects.csv"
    with plain.open("w", newline="") as fh:
        w = csv.DictWriter(fh, ["rank", "index", "given", "suggested", "score"])
        w.writeheader()
        w.writerows({k: r[k] for k in w.fieldnames} for r in rows[:2])
    run = _cli("review", "queue-label-errors", str(plain), "-p", str(root),
               "--revision", rev, "--json")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["queued"] == min(2, len(rows))
    run = _cli("review", "queue-label-errors", str(out / "label_errors.json"),
               "-p", str(root), "--json")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["queued"] == len(rows) - min(2, len(rows))
    listed = json.loads(
        _cli("review", "label-errors", "-p", str(root), "--json").stdout
    )
    assert {i["item_id"] for i in listed} == {r["item_id"] for r in rows}
    run = _cli("review", "queue-label-errors", str(plain), "-p", str(root),
               "--revision", rev, "--split", "test")  # fmt: skip
    assert run.returncode == 2 and "not both" in run.stderr
    with Project.open(root) as project:
        app = create_app(project, reviewer_token="owner-token-12345678",
                         secret=project_secret(project))  # fmt: skip
        with TestClient(app) as client:
            page = client.get(
                "/label-errors", headers={"X-Retest-Token": "owner-token-12345678"}
            )
    assert page.status_code == 200
    for r in rows[:10]:  # the first page: every id in full
        assert f'<span class="item-id">{r["item_id"]}</span>' in page.text
