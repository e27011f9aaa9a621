"""Neighbour lists read with ``within``: SQLite leaves out, by the closest
distance's leading bytes, lists that cannot hold a distance under the threshold.
It must never leave out one that does, whatever the doubles (zero, subnormal,
huge, infinite, negative), and lists must be stored closest first."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retest.store.rows import NeighbourList
from retest.store.sqlite import SQLiteStore


def _values(rng: np.random.Generator) -> np.ndarray:
    special = [0.0, -0.0, 5e-324, 1e-300, 1.0, 2.0, 3.0, 1e300, np.inf, -1.0]
    scales = 10.0 ** rng.uniform(-12, 12, 3000)
    near = np.array([1.0, 2e6, 123.456])[:, None] * (1 + rng.normal(0, 1e-3, (3, 50)))
    return np.concatenate([special, scales, near.ravel()])


def test_within_keeps_every_list_that_starts_under_the_threshold(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(2)
    firsts = _values(rng)
    with SQLiteStore(tmp_path / "retest.db") as s:
        s.neardup.put_neighbours(
            NeighbourList(f"c{i:05d}", "l2", ("train:0", "train:1"), (d, d * 2 + 1e300))
            for i, d in enumerate(firsts.tolist())
        )
        s.neardup.put_neighbours([NeighbourList("empty", "l2", (), ())])
        every = {nl.candidate_id: nl for nl in s.neardup.iter_neighbours(metric="l2")}
        assert len(every) == len(firsts) + 1
        for t in [0.0, 5e-324, 1.0, 2e6, 123.456, 3.5e-7, 1e299, *firsts[::97]]:
            got = {
                nl.candidate_id: nl
                for nl in s.neardup.iter_neighbours(metric="l2", within=t)
            }
            need = {
                c for c, nl in every.items() if nl.distances and nl.distances[0] <= t
            }
            assert need <= set(got)
            assert all(got[c] == every[c] for c in got)
            # and it is sparse: lists clearly above the threshold are skipped
            if 0 < t < 1e299:
                far = {
                    c
                    for c, nl in every.items()
                    if nl.distances and nl.distances[0] > t * 1.2
                }
                assert not far & set(got)


def test_lists_are_stored_closest_first(tmp_path: Path) -> None:
    """A list given in another order is stored sorted (NaN last), so a threshold
    read cannot miss a close neighbour listed after a far one."""
    nan = float("nan")
    with SQLiteStore(tmp_path / "retest.db") as s:
        s.neardup.put_neighbours(
            [
                NeighbourList("c", "l2", ("a", "b", "c", "d"), (2.0, nan, 1.0, 2.0)),
                NeighbourList("e", "l2", ("a", "b"), (1.0, 2.0)),
            ]
        )
        got = {
            nl.candidate_id: nl
            for nl in s.neardup.iter_neighbours(metric="l2", within=1.5)
        }
        c = got["c"]
        assert c.ref_ids == ("c", "a", "d", "b")
        assert c.distances[:3] == (1.0, 2.0, 2.0) and np.isnan(c.distances[3])
        assert s.neardup.neighbours("e")[0].ref_ids == ("a", "b")
