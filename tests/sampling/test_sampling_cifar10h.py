"""Real crowd data: CIFAR-10H label counts as selection frequencies of the CIFAR-10
test images give per-class target histograms; MatchedFrequency reproduces them."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from retest.sampling.eligibility import CandidateInfo
from retest.sampling.matched_frequency import sample_matched_frequency
from retest.sampling.selection_frequency import (
    TargetHistogram,
    class_target_histograms,
    selection_frequency_from_counts,
)

pytestmark = pytest.mark.slow
PER_CLASS = 200
LOWER = [0.0, 0.2, 0.4, 0.6, 0.8]


def _oracle_round(hist: list[int], target: int) -> list[int]:
    total = sum(hist)
    exact = [Fraction(target * h, total) for h in hist]
    out = [int(e) for e in exact]
    order = sorted(range(len(hist)), key=lambda i: (exact[i] - out[i], i), reverse=True)
    for i in order[: target - sum(out)]:
        out[i] += 1
    return out


@pytest.fixture(scope="module")
def targets(shared_data: Path) -> dict[str, TargetHistogram]:
    counts = np.load(shared_data / "cifar10h" / "cifar10h-counts.npy")
    labels = np.load(shared_data / "cifar10" / "test_labels.npy")
    freq, n = selection_frequency_from_counts(counts, labels)
    # independent computation of the frequencies
    assert np.allclose(freq, counts[np.arange(len(labels)), labels] / counts.sum(1))
    assert 0.9 < freq.mean() < 1.0  # CIFAR-10H: annotators mostly agree
    th = class_target_histograms(freq, n, [str(y) for y in labels])
    for cls, h in th.items():
        sel = labels == int(cls)
        expect, _ = np.histogram(freq[sel], bins=[0, 0.2, 0.4, 0.6, 0.8, np.inf])
        assert list(h.counts) == expect.tolist() and h.is_valid and h.n_images == 1000
    return th


def _pool(
    targets: dict[str, TargetHistogram],
    rng: np.random.Generator,
    spare: int,
    drop: dict[str, set[int]] | None = None,
) -> list[CandidateInfo]:
    pool = []
    for cls, h in targets.items():
        for b, need in enumerate(h.target(PER_CLASS)):
            if drop and b in drop.get(cls, set()):
                continue
            for i in range(need + spare):
                f = LOWER[b] + 0.2 * rng.uniform(0, 0.999)
                pool.append(
                    CandidateInfo(
                        f"{cls}-{b}-{i:04d}", cls, float(f), int(rng.integers(10, 15))
                    )
                )
    return pool


def test_matched_frequency_matches_cifar10h_histograms(targets) -> None:
    rng = np.random.default_rng(0)
    pool = _pool(targets, rng, spare=5)
    result = sample_matched_frequency(
        pool, targets, per_class=PER_CLASS, random_state=11
    )
    assert result.is_valid and len(result.members) == 10 * PER_CLASS
    for cls, members in result.by_class().items():
        expect = _oracle_round(list(targets[cls].counts), PER_CLASS)
        got = Counter(m.bin for m in members)
        assert [got.get(b, 0) for b in range(5)] == expect
        assert all(m.how == "sampled" for m in members)
    other = sample_matched_frequency(
        pool, targets, per_class=PER_CLASS, random_state=12
    )
    assert other.is_valid and other.ids != result.ids
    assert [
        m.bin for m in other.members
    ] != [] and other.class_counts() == result.class_counts()


def test_matched_frequency_reports_upward_sampling_on_cifar10h(targets) -> None:
    rng = np.random.default_rng(1)
    # class 3 (cat) has no candidates in bins 1–2; class 4 none in bin 4 either
    pool = _pool(targets, rng, spare=10, drop={"3": {1, 2}, "4": {4}})
    result = sample_matched_frequency(
        pool, targets, per_class=PER_CLASS, random_state=5
    )
    cat_target = targets["3"].target(PER_CLASS)
    up = result.metadata["upward_sampled"]["3"]
    assert len(up) == cat_target[1] + cat_target[2] > 0
    cat = [m for m in result.members if m.class_name == "3"]
    assert len(cat) == PER_CLASS
    assert all(m.bin > m.target_bin for m in cat if m.how == "upward")
    short = {s.class_name: s for s in result.shortfall}
    assert set(short) == {"4"}  # nothing above bin 4: deer stays short, invalid
    assert short["4"].missing == targets["4"].target(PER_CLASS)[4]
    assert short["4"].detail == (("bin 4", targets["4"].target(PER_CLASS)[4]),)
    assert not result.is_valid
