"""compat="authors" against oracles of the published rules, and exact against them.

The oracles below are written here from what the published code does
(ImageNetV2 ``dataset_sampling.round_histogram``, ``compute_wnid_histograms``,
``is_cid_ok`` and ``sample_wnid_histogram``; ``mturk_data.MTurkData``'s counting;
CIFAR-10.1 ``generate_keyword_counts.ipynb`` and the v4 sampling notebook): plain
Python floats where they used floats, every valid assignment counted, a class
with too few originals marked invalid and still sampled. Each test runs ≥ 200
seeded problems and asserts that the authors mode equals the oracle everywhere
and that the exact mode equals it except on the listed deviations, which are
asserted to be exactly the cases where the exact rational answer differs.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from retest.labeling.keyword_plan import allocate_v4, allocate_v6
from retest.sampling.eligibility import CandidateInfo
from retest.sampling.histogram import DEFAULT_BINS, bin_index, round_histogram
from retest.sampling.matched_frequency import sample_matched_frequency
from retest.sampling.selection_frequency import (
    AssignmentRecord,
    TaskRecord,
    class_target_histograms,
    compute_selection_frequencies,
)

# ---------------------------------------------------------------- oracles


def authors_round(hist: list[int], target: int) -> list[int]:
    """round_histogram of the published code: float shares, float remainders,
    buckets sorted by (remainder, index) and taken from the top."""
    total = float(sum(hist))
    frac = [target * float(h) / total for h in hist]
    floors = [math.floor(f) for f in frac]
    rems = [f - math.floor(f) for f in frac]
    top = sorted(enumerate(rems), key=lambda x: (x[1], x[0]), reverse=True)
    out = list(floors)
    for i in range(target - sum(floors)):
        out[top[i][0]] += 1
    return out


def exact_round(hist: list[int], target: int) -> list[int]:
    """Largest remainder with rational remainders, ties to the higher bin."""
    share = [Fraction(target * h, sum(hist)) for h in hist]
    floors = [math.floor(s) for s in share]
    order = sorted(range(len(hist)), key=lambda i: (share[i] - floors[i], i))[::-1]
    for i in order[: target - sum(floors)]:
        floors[i] += 1
    return floors


def authors_v6(counts: dict[str, dict[str, int]], size: int, top_k: int):
    per_class = int(size / len(counts))
    out = {}
    for label, kws in counts.items():
        top = dict(sorted(kws.items(), key=lambda x: x[1], reverse=True)[:top_k])
        denom = sum(top.values())
        freq = {k: per_class * (v / denom) for k, v in top.items()}
        n = {k: math.floor(f) for k, f in freq.items()}
        gaps = sorted(
            ((k, f - math.floor(f)) for k, f in freq.items()),
            key=lambda x: x[1],
            reverse=True,
        )
        for i in range(per_class - sum(n.values())):
            n[gaps[i][0]] += 1
        out[label] = {k: v for k, v in n.items() if v > 0}
    return out


def exact_v6(counts: dict[str, dict[str, int]], size: int, top_k: int):
    per_class = size // len(counts)
    out = {}
    for label, kws in counts.items():
        top = dict(sorted(kws.items(), key=lambda x: x[1], reverse=True)[:top_k])
        denom = sum(top.values())
        share = {k: Fraction(per_class * v, denom) for k, v in top.items()}
        n = {k: math.floor(s) for k, s in share.items()}
        by_gap = sorted(share, key=lambda k: share[k] - n[k], reverse=True)
        for k in by_gap[: per_class - sum(n.values())]:
            n[k] += 1
        out[label] = {k: v for k, v in n.items() if v > 0}
    return out


def authors_frequencies(tasks, assignments):
    """MTurkData: per image, one entry per appearance in a task; every valid
    assignment of that task counts once per entry."""
    hits_of_image: dict[str, list[TaskRecord]] = {}
    for t in tasks:
        for img in t.images:
            hits_of_image.setdefault(img, []).append(t)
    by_task: dict[str, list[AssignmentRecord]] = {}
    for a in assignments:
        by_task.setdefault(a.task_id, []).append(a)
    n: Counter = Counter()
    k: Counter = Counter()
    for img, hits in hits_of_image.items():
        for t in hits:
            n[(img, t.class_name)] += 0
            for a in by_task.get(t.task_id, []):
                if a.status in ("Submitted", "Approved"):
                    n[(img, t.class_name)] += 1
                    k[(img, t.class_name)] += img in a.selected
    return {key: (k[key] / n[key] if n[key] else 0.0, n[key]) for key in n}


def authors_matched_frequency(
    classes, pool, originals, per_class, min_ann=10, min_val=20
):
    """Deterministic part of sample_wnid_histogram without a previous revision:
    per class the target, the eligible ids per bin, the number filled per bin,
    the (target bin, source bin) of every upward draw, and validity."""
    success = True
    out = {}
    for name in sorted(classes):
        freqs = [f for f, c, n in originals if c == name and n >= min_ann]
        if len(freqs) < min_val:
            success = False
        hist = [0] * 5
        for f in freqs:
            hist[bin_index(f)] += 1
        if not freqs:  # the published code divides by zero here
            out[name] = None
            success = False
            continue
        target = authors_round(hist, per_class)
        bins: list[list[str]] = [[] for _ in range(5)]
        for c in pool:
            if c.class_name != name or c.blacklisted or c.near_duplicate:
                continue
            if c.n_assignments < min_ann:
                continue
            bins[bin_index(c.frequency)].append(c.id)
        left = [len(b) for b in bins]
        filled = [min(t, n) for t, n in zip(target, left, strict=True)]
        left = [n - f for n, f in zip(left, filled, strict=True)]
        upward = []
        for b in range(5):
            for _ in range(target[b] - filled[b]):
                src = next((s for s in range(b + 1, 5) if left[s]), None)
                if src is None:
                    success = False
                    continue
                left[src] -= 1
                upward.append((b, src))
        out[name] = (target, [sorted(b) for b in bins], filled, sorted(upward))
    return success, out


# ---------------------------------------------------------------- problems


def _hist(rng: np.random.Generator) -> list[int]:
    h = [int(x) for x in rng.integers(0, 13, size=5)]
    if not sum(h):
        h[int(rng.integers(5))] = 1
    return h


def test_worked_examples() -> None:
    assert authors_round([8, 5, 5, 1, 6], 10) == [3, 2, 2, 1, 2]
    assert round_histogram([8, 5, 5, 1, 6], 10, compat="authors") == [3, 2, 2, 1, 2]
    assert round_histogram([8, 5, 5, 1, 6], 10) == [3, 2, 2, 0, 3]
    counts = {"automobile": {"x": 41, "y": 39}}
    assert allocate_v6(counts, size=200, compat="authors").allocation == {
        "automobile": {"x": 102, "y": 98}
    }
    assert allocate_v6(counts, size=200).allocation == {
        "automobile": {"x": 103, "y": 97}
    }


def test_round_histogram_against_oracles_on_random_histograms() -> None:
    rng = np.random.default_rng(2801)
    differ = 0
    for _ in range(300):  # problems of 20 classes each
        for _ in range(20):
            h = _hist(rng)
            t = int(rng.choice([10, 10, 10, int(rng.integers(1, 60))]))
            authors, exact = authors_round(h, t), exact_round(h, t)
            assert round_histogram(h, t, compat="authors") == authors, (h, t)
            # the exact mode equals the authors' except on the float deviation
            assert round_histogram(h, t) == exact, (h, t)
            differ += authors != exact
    # the listed deviation occurs, and rarely (the issue measured 31 in 4,629)
    assert 0 < differ < 6000 * 0.03


def test_v6_plan_against_oracles_on_random_counts() -> None:
    rng = np.random.default_rng(2802)
    differ = 0
    for _ in range(250):
        counts = {
            f"c{j}": {
                f"k{j}_{i}": int(rng.integers(1, 120))
                for i in range(int(rng.integers(1, 12)))
            }
            for j in range(int(rng.integers(1, 6)))
        }
        size = len(counts) * int(rng.choice([200, 100, 37, int(rng.integers(1, 300))]))
        top_k = int(rng.integers(1, 12))
        authors = authors_v6(counts, size, top_k)
        exact = exact_v6(counts, size, top_k)
        assert (
            allocate_v6(counts, size=size, top_k=top_k, compat="authors").allocation
            == authors
        )
        assert allocate_v6(counts, size=size, top_k=top_k).allocation == exact
        differ += authors != exact
    assert differ > 0


def test_v4_plan_against_oracles() -> None:
    rng = np.random.default_rng(2803)
    differ = 0
    for _ in range(250):
        counts = {
            f"c{j}": {f"k{j}_{i}": int(rng.integers(1, 400)) for i in range(8)}
            for j in range(3)
        }
        original = int(rng.choice([60000, 50000, int(rng.integers(1000, 70000))]))
        size = int(rng.choice([2000, 7000, int(rng.integers(100, 9000))]))
        kw = {"original_size": original, "size": size, "top_k": 8, "skip": {}}
        authors = allocate_v4(counts, compat="authors", **kw).allocation
        exact = allocate_v4(counts, **kw).allocation
        for cls, kws in counts.items():
            for k, c in kws.items():
                x = c / (original / size)
                n = 0 if x < 0.5 else math.ceil(x)
                assert authors[cls].get(k, 0) == n
                q = Fraction(c * size, original)
                assert exact[cls].get(k, 0) == (
                    0 if q < Fraction(1, 2) else math.ceil(q)
                )
        differ += authors != exact
    assert differ >= 0  # the published 60000/2000 never differs; others rarely do


def _assignments(rng: np.random.Generator, tasks):
    out = []
    statuses = ["Approved", "Submitted", "Rejected"]
    for t in tasks:
        for j in range(int(rng.integers(0, 8))):
            worker = f"w{int(rng.integers(0, 5))}"  # repeats happen
            sel = frozenset(i for i in t.images if rng.random() < 0.6)
            out.append(
                AssignmentRecord(
                    t.task_id,
                    statuses[int(rng.integers(0, 3))],
                    sel,
                    worker=worker,
                    submitted=f"2020-01-{j + 1:02d}",
                    assignment_id=f"{t.task_id}-{j}",
                )
            )
    return out


def test_selection_frequencies_against_the_published_counting() -> None:
    rng = np.random.default_rng(2804)
    deviating = 0
    for p in range(220):
        images = [f"i{j}" for j in range(12)]
        tasks = []
        for t in range(int(rng.integers(1, 6))):
            shown = [images[int(i)] for i in rng.integers(0, 12, size=5)]  # may repeat
            tasks.append(
                TaskRecord(f"p{p}t{t}", f"c{int(rng.integers(0, 2))}", tuple(shown))
            )
        recs = _assignments(rng, tasks)
        oracle = authors_frequencies(tasks, recs)
        got = compute_selection_frequencies(tasks, recs, compat="authors")
        assert {k: (v.frequency, v.n_assignments) for k, v in got.items()} == oracle
        exact = compute_selection_frequencies(tasks, recs)
        # deviation: a worker with two valid assignments on a task, or an image
        # shown twice in one task; without either the two countings agree
        pairs = Counter((a.task_id, a.worker) for a in recs if a.is_valid)
        repeats = any(n > 1 for n in pairs.values()) or any(
            len(set(t.images)) < len(t.images) for t in tasks
        )
        same = {k: (v.frequency, v.n_assignments) for k, v in exact.items()} == oracle
        assert same or repeats
        deviating += not same
    assert deviating > 0


def test_matched_frequency_authors_mode_against_the_published_sampler() -> None:
    rng = np.random.default_rng(2805)
    invalid_sampled = 0
    for p in range(220):
        classes = [f"c{j}" for j in range(int(rng.integers(1, 5)))]
        originals = []
        for c in classes:
            for _ in range(
                int(rng.choice([0, 5, 19, 20, 30, int(rng.integers(0, 45))]))
            ):
                originals.append(
                    (round(float(rng.random()), 2), c, int(rng.integers(6, 14)))
                )
        pool = [
            CandidateInfo(
                f"p{p}-{c}-{i}",
                c,
                round(float(rng.random()), 2),
                int(rng.integers(5, 15)),
                bool(rng.random() < 0.05),
                bool(rng.random() < 0.05),
            )
            for c in classes
            for i in range(int(rng.integers(0, 25)))
        ]
        per_class = int(rng.choice([10, 10, int(rng.integers(1, 20))]))
        f, c, n = zip(*originals, strict=True) if originals else ((), (), ())
        targets = class_target_histograms(f, n, c, all_classes=classes)
        success, oracle = authors_matched_frequency(classes, pool, originals, per_class)
        res = sample_matched_frequency(
            pool, targets, random_state=p, per_class=per_class, compat="authors"
        )
        assert res.is_valid == success
        assert res.parameters["compat"] == "authors"
        by_class = res.by_class()
        for name, want in oracle.items():
            members = by_class.get(name, [])
            if want is None:
                assert not members
                continue
            target, bins, filled, upward = want
            assert res.metadata["targets"][name]["target"] == target
            # every member is eligible by the published is_cid_ok, in its bin
            for m in members:
                assert m.id in bins[m.bin]
            got_filled = Counter(m.bin for m in members if m.how != "upward")
            assert [got_filled[b] for b in range(5)] == filled
            assert (
                sorted((m.target_bin, m.bin) for m in members if m.how == "upward")
                == upward
            )
            invalid_sampled += bool(members) and not targets[name].is_valid
        # exact mode: same except invalid classes (not sampled) and float targets
        ex = sample_matched_frequency(
            pool, targets, random_state=p, per_class=per_class
        )
        for name, want in oracle.items():
            if want is None or not targets[name].is_valid:
                assert not ex.by_class().get(name)
                continue
            h = list(targets[name].counts)
            assert ex.metadata["targets"][name]["target"] == exact_round(h, per_class)
    assert invalid_sampled > 0


@pytest.mark.parametrize("bad", ["Authors", "float", ""])
def test_unknown_compat_is_a_config_error(bad: str) -> None:
    from retest.errors import ConfigError

    with pytest.raises(ConfigError, match="exact, authors"):
        round_histogram([1, 2], 3, compat=bad)
    assert DEFAULT_BINS == (0.2, 0.4, 0.6, 0.8)
