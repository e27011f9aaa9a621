"""Acceptance round trip: CIFAR pickles → ingest → (sample nothing) → export → same pixels.

Also closes the loop the other way: an exported CIFAR folder is ingested again by
the CIFAR source and yields the same images and labels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retest.datasets.cifar10 import write_cifar_batch, write_cifar_meta
from retest.project import CLASS_PRESETS, Project
from retest.stages.export import export_revision
from retest.stages.ingest import add_source
from retest.store.rows import Revision, RevisionMember


def _take_all(p: Project, name: str) -> None:
    """A revision holding every candidate in ingestion order ("sample nothing")."""
    members = [
        RevisionMember(c.id, c.class_id if c.class_id is not None else -1)
        for c in p.store.candidates.iter()
    ]
    p.store.revisions.create(
        Revision(name, "all", created="2020-01-01T00:00:00Z"), members
    )


def test_cifar_pickles_ingest_export_npy_exact(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    imgs = rng.integers(0, 256, (90, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, 90)
    src = tmp_path / "cifar-10-batches-py"
    src.mkdir()
    write_cifar_batch(src / "data_batch_1", imgs[:40], labels[:40])
    write_cifar_batch(src / "data_batch_2", imgs[40:70], labels[40:70])
    write_cifar_batch(src / "test_batch", imgs[70:], labels[70:])
    write_cifar_meta(src / "batches.meta", CLASS_PRESETS["cifar10"])

    with Project.init(tmp_path / "proj", classes_from="cifar10") as p:
        add_source(p, "cifar", src)
        assert p.store.candidates.count() == 90
        _take_all(p, "all-0")
        export_revision(p, "all-0", format="npy", out=tmp_path / "npy")
        export_revision(p, "all-0", format="cifar", out=tmp_path / "cifar")

    data = np.load(tmp_path / "npy" / "all-0_data.npy")
    assert np.array_equal(data, imgs)  # no rotation or transposition
    assert np.load(tmp_path / "npy" / "all-0_labels.npy").tolist() == labels.tolist()

    # the exported CIFAR batches read back through the CIFAR source
    with Project.init(tmp_path / "again", classes_from="cifar10") as q:
        add_source(q, "cifar", tmp_path / "cifar")
        _take_all(q, "all-0")
        export_revision(q, "all-0", format="npy", out=tmp_path / "npy2")
    assert np.array_equal(np.load(tmp_path / "npy2" / "all-0_data.npy"), imgs)
    assert np.array_equal(
        np.load(tmp_path / "npy2" / "all-0_labels.npy"), labels.astype(np.int32)
    )
