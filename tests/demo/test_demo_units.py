"""Fast checks of the demo's own rules: the stratified hold-out and the near-duplicate count."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retest.dedup.rules import near_original_threshold
from retest.demo.run import (
    DemoSettings,
    _open_project,
    near_duplicate_report,
    stratified_holdout,
)
from retest.errors import ConfigError
from retest.project import Eligibility, Project
from retest.store.rows import CandidateRow, NeighbourList


@settings(max_examples=50, deadline=None)
@given(
    per_class=st.integers(2, 30),
    k=st.integers(2, 6),
    frac=st.floats(0.1, 0.5),
    seed=st.integers(0, 10_000),
)
def test_holdout_is_class_stratified_disjoint_and_seeded(
    per_class: int, k: int, frac: float, seed: int
) -> None:
    labels = np.repeat(np.arange(k), per_class)
    np.random.default_rng(seed).shuffle(labels)
    n = max(k, round(frac * labels.size))
    kept, held = stratified_holdout(labels, n, seed)
    assert held.size == n and kept.size == labels.size - n
    assert np.intersect1d(kept, held).size == 0
    assert np.array_equal(np.sort(np.concatenate([kept, held])), np.arange(labels.size))
    counts = np.bincount(labels[held], minlength=k)
    assert counts.max() - counts.min() <= 1  # equal classes → equal shares
    again = stratified_holdout(labels, n, seed)
    assert np.array_equal(again[1], held)


def test_holdout_of_fashion_mnist_shape_is_exactly_1000_per_class() -> None:
    labels = np.repeat(np.arange(10), 6000)
    _, held = stratified_holdout(labels, 10_000, 0)
    assert np.bincount(labels[held]).tolist() == [1000] * 10
    other = stratified_holdout(labels, 10_000, 1)[1]
    assert not np.array_equal(other, held)


def _cand(i: int) -> CandidateRow:
    return CandidateRow(id=f"{i:064x}", source="pool", source_ref=str(i), class_id=0)


def test_near_duplicate_report_counts_pairs_and_takes_exclusions_from_eligibility(
    tmp_path: Path,
) -> None:
    """Planted neighbour lists: pairs within the shared threshold are counted per
    kind; the excluded set is exactly the eligibility rule's copies."""
    th = near_original_threshold((28, 28))
    with Project.init(tmp_path / "p", classes=["a"]) as proj:
        c = [_cand(i) for i in range(1, 7)]
        proj.store.candidates.add(c)
        ids = [x.id for x in c]
        lists = [
            # near a test image (and, farther, a train image): counted for both
            NeighbourList(ids[0], "l2", ("test:3", "train:9"), (th, th * 0.99)),
            # nearest train far, then a test image beyond the threshold: none
            NeighbourList(ids[1], "l2", ("train:1", "test:4"), (th + 1, th + 2)),
            # within-pool pair ids[2] <-> ids[3]: one pair
            NeighbourList(ids[2], "l2", (ids[3], "train:2"), (10.0, 5e6)),
            NeighbourList(ids[3], "l2", (ids[2], "test:1"), (10.0, 5e6)),
            # the nearest test image (lists are closest first) beyond it: none
            NeighbourList(ids[4], "l2", ("test:7", "test:8"), (th * 2, th * 3)),
        ]
        proj.store.neardup.put_neighbours(lists)
        elig = Eligibility(
            {
                ids[0]: ("near_original",),
                ids[1]: (),
                ids[2]: (),
                ids[3]: ("pool_duplicate",),
                ids[4]: ("blacklisted",),  # not a copy: not in "excluded"
                ids[5]: ("unreviewed",),
            },
            include_unreviewed=True,
            near_original_threshold=th,
        )
        nd = near_duplicate_report(proj, elig, ingest_dups=2)
    assert (nd["test"], nd["train"], nd["pool_pairs"]) == (1, 1, 1)
    assert nd["threshold_sq_l2"] == pytest.approx(255_208.33, abs=0.01)
    assert nd["pool_exact_duplicates"] == 2
    assert nd["excluded"] == sorted([ids[0], ids[3]]) and nd["n_excluded"] == 2
    assert nd["unreviewed_included"] == 1
    assert nd["pairs"]["pool"] == [
        {"candidate": ids[3], "reference": ids[2], "sq_l2": 10.0}
    ]


def test_a_non_demo_project_or_busy_folder_is_refused(tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        _open_project(busy, DemoSettings())
    with Project.init(tmp_path / "other", classes=["a"]) as proj:
        proj.store.candidates.add([_cand(1)])
    with pytest.raises(ConfigError, match="not a demo"):
        _open_project(tmp_path / "other", DemoSettings())


def test_finished_steps_are_reused_from_the_store(tmp_path: Path) -> None:
    """A step's result is its checkpoint state: a rerun returns it without running
    the step, even with the copies under demo/steps/ gone; a step that failed is
    run again."""
    import shutil

    from retest.demo.run import _Steps

    calls: list[str] = []

    def step(name: str, fail: bool = False):  # type: ignore[no-untyped-def]
        def run() -> dict[str, object]:
            calls.append(name)
            if fail:
                raise RuntimeError(name)
            return {"name": name, "pairs": [[1, 2.5]]}

        return run

    with Project.init(tmp_path / "p", name="d", classes=["a", "b"]) as project:
        first = _Steps(project, None)
        assert first("split", step("split"))["pairs"] == [[1, 2.5]]
        with pytest.raises(RuntimeError):
            first("ingest", step("ingest", fail=True))
        shutil.rmtree(project.root / "demo" / "steps")
        again = _Steps(project, None)
        got = again("split", step("split", fail=True))
        assert (
            got["name"] == "split" and got["pairs"] == [[1, 2.5]] and "seconds" in got
        )
        assert again("ingest", step("ingest"))["name"] == "ingest"
        assert calls == ["split", "ingest", "ingest"]
        assert (again.reused, again.run) == (["split"], ["ingest"])


def test_demo_reopens_a_folder_holding_only_its_own_records(tmp_path: Path) -> None:
    """A demo folder whose retest.toml is gone but whose demo/ records remain is
    the demo's own: it starts again there; any other entry is refused."""
    root = tmp_path / "run"
    (root / "demo").mkdir(parents=True)
    (root / "demo" / "settings.json").write_text("{}")
    project = _open_project(root, DemoSettings())
    try:
        assert (root / "retest.toml").is_file()
    finally:
        project.close()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not empty and not a retest project"):
        _open_project(other, DemoSettings())
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]
