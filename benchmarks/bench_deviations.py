"""How many cases each deviation from the published code changes (docs/algorithms.md#deviations).

``python3 benchmarks/bench_deviations.py [--quick]`` prints one line per deviation and
writes ``benchmarks/results/deviations.json``. Every benchmark is generated from a
fixed seed, so the counts are reproducible; the authors' side is retest's
``compat="authors"`` mode (which tests/sampling/test_sampling_authors_oracle.py
checks against oracles of the published code) or cleanlab 2.9 itself.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from retest.label_errors.finders import as_float32, find_label_errors
from retest.labeling.keyword_plan import allocate_v4, allocate_v6
from retest.sampling.histogram import histogram_counts, round_histogram
from retest.sampling.selection_frequency import (
    AssignmentRecord,
    TaskRecord,
    compute_selection_frequencies,
)

OUT = Path(__file__).parent / "results" / "deviations.json"


def targets_imagenet_like(rng: np.random.Generator, n: int) -> dict[str, Any]:
    """Classes of 40–50 annotated originals (frequencies ~ Beta(2.5, 1), mean 0.71,
    as the paper's validation images), 10 new images per class."""
    differ = 0
    for _ in range(n):
        f = rng.beta(2.5, 1.0, size=int(rng.integers(40, 51)))
        h = histogram_counts(f)
        differ += round_histogram(h, 10) != round_histogram(h, 10, compat="authors")
    return {"benchmark": f"{n} ImageNet-like classes", "cases": n, "changed": differ}


def targets_uniform(rng: np.random.Generator, n: int) -> dict[str, Any]:
    differ = 0
    for _ in range(n):
        h = rng.integers(0, 13, size=5)
        h[0] += h.sum() == 0
        t = int(rng.integers(1, 60))
        differ += round_histogram(h, t) != round_histogram(h, t, compat="authors")
    return {
        "benchmark": f"{n} histograms, bins 0–12, targets 1–59",
        "cases": n,
        "changed": differ,
    }


def invalid_classes(rng: np.random.Generator, n: int) -> dict[str, Any]:
    """Classes whose originals with ≥ 10 assignments number 0–50 (uniform)."""
    usable = rng.integers(0, 51, size=n)
    few = int(((usable > 0) & (usable < 20)).sum())
    return {
        "benchmark": f"{n} classes with 0–50 usable originals, 10 per class",
        "cases": n,
        "changed": few,
        "images_sampled_by_authors_only": 10 * few,
    }


def v6_plans(rng: np.random.Generator, n: int) -> dict[str, Any]:
    """Classes of 5–60 keywords with Zipf-like counts (CIFAR-10 style), 200 per class."""
    differ = 0
    for _ in range(n):
        k = int(rng.integers(5, 61))
        counts = {
            f"k{j}": int(c) for j, c in enumerate(rng.zipf(1.6, size=k).clip(1, 900))
        }
        a = allocate_v6({"c": counts}, size=200).allocation
        b = allocate_v6({"c": counts}, size=200, compat="authors").allocation
        differ += a != b
    return {"benchmark": f"{n} classes, 5–60 keywords, counts Zipf(1.6)", "cases": n,
            "changed": differ}  # fmt: skip


def v4_plans(rng: np.random.Generator, n: int) -> dict[str, Any]:
    published = changed = 0
    for _ in range(n):
        counts = {"c": {f"k{j}": int(rng.integers(1, 900)) for j in range(25)}}
        kw = {"top_k": 25, "skip": {}}
        published += (
            allocate_v4(counts, original_size=60000, size=2000, **kw).allocation
            != allocate_v4(
                counts, original_size=60000, size=2000, compat="authors", **kw
            ).allocation
        )
        size, orig = int(rng.integers(100, 9000)), int(rng.integers(1000, 70000))
        changed += (
            allocate_v4(counts, original_size=orig, size=size, **kw).allocation
            != allocate_v4(
                counts, original_size=orig, size=size, compat="authors", **kw
            ).allocation
        )
    return {"benchmark": f"{n} classes of 25 keywords; 60,000→2,000 and random sizes",
            "cases": n, "changed": changed, "changed_at_60000_to_2000": published}  # fmt: skip


def repeat_workers(rng: np.random.Generator, n_tasks: int) -> dict[str, Any]:
    """Tasks of 48 images answered by 10 workers; 2 % of assignments are a second
    assignment of the same worker on the same task (a re-posted HIT)."""
    tasks, recs = [], []
    for t in range(n_tasks):
        images = tuple(f"t{t}i{i}" for i in range(48))
        tasks.append(TaskRecord(f"t{t}", "c", images))
        workers = [f"w{j}" for j in range(10)]
        workers += [w for w in workers if rng.random() < 0.02]
        for j, w in enumerate(workers):
            sel = frozenset(i for i in images if rng.random() < 0.7)
            recs.append(AssignmentRecord(f"t{t}", "Approved", sel, worker=w,
                                         submitted=f"{j:03d}", assignment_id=f"t{t}a{j}"))  # fmt: skip
    a = compute_selection_frequencies(tasks, recs)
    b = compute_selection_frequencies(tasks, recs, compat="authors")
    changed = sum(a[k] != b[k] for k in a)
    return {"benchmark": f"{n_tasks} tasks × 48 images, 10 workers, 2 % repeats",
            "cases": len(a), "changed": changed}  # fmt: skip


def _label_problem(
    rng: np.random.Generator, votes: bool
) -> tuple[np.ndarray, np.ndarray]:
    k = int(rng.integers(3, 11))
    n = int(rng.integers(100, 2000))
    true = rng.choice(k, size=n, p=rng.dirichlet(np.full(k, 0.3)))  # some tiny classes
    given = np.where(rng.random(n) < 0.2, rng.integers(0, k, size=n), true)
    if votes:  # vote shares of 5 models, smoothed as retest's ensembles: many ties
        v = np.zeros((n, k))
        for _ in range(5):
            pred = np.where(rng.random(n) < 0.7, true, rng.integers(0, k, size=n))
            v[np.arange(n), pred] += 1
        p = (v + 0.1) / (5 + 0.1 * k)
    else:
        logits = rng.normal(size=(n, k)) + 2.5 * np.eye(k)[true]
        p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return given, as_float32(p.astype(np.float32))


def cleanlab_rows(rng: np.random.Generator, n: int) -> dict[str, Any]:
    """Rows flagged differently by retest's paper methods and cleanlab's spellings."""
    out = {"ties": 0, "min5": 0, "cj": 0, "rows": 0, "problems": n}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(n):
            y, p = _label_problem(rng, votes=i % 2 == 0)
            out["rows"] += y.size
            out["ties"] += int(
                (find_label_errors(y, p, method="argmax")
                 != find_label_errors(y, p, filter_by="predicted_neq_given")).sum()
            )  # fmt: skip
            out["min5"] += int(
                (find_label_errors(y, p, method="prune-by-noise-rate")
                 != find_label_errors(y, p, filter_by="prune_by_noise_rate")).sum()
            )  # fmt: skip
            out["cj"] += int(
                (find_label_errors(y, p, method="confident-joint")
                 != find_label_errors(y, p, filter_by="confident_learning")).sum()
            )  # fmt: skip
    return out


def empty_classes(rng: np.random.Generator, n: int) -> dict[str, Any]:
    """Problems with 1–3 classes without examples: dropping their columns (and
    renormalising) instead of keeping them changes cleanlab's answer in how many?"""
    changed = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(n):
            y, p = _label_problem(rng, votes=False)
            k = p.shape[1]
            gone = rng.permutation(k)[: int(rng.integers(1, min(3, k - 2) + 1))]
            keep = np.setdiff1d(np.arange(k), gone)
            y = np.where(np.isin(y, gone), keep[0], y)
            if np.unique(y).size < 2:
                continue
            full = find_label_errors(y, p, filter_by="prune_by_noise_rate")
            sub = p[:, keep] / p[:, keep].sum(axis=1, keepdims=True)
            remap = np.searchsorted(keep, y)
            dropped = find_label_errors(remap, sub, filter_by="prune_by_noise_rate")
            changed += bool((full != dropped).any())
    return {
        "benchmark": f"{n} problems with empty classes",
        "cases": n,
        "changed": changed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    s = 10 if args.quick else 1
    rng = np.random.default_rng(28)
    results = {
        "matched_frequency_targets_imagenet_like": targets_imagenet_like(
            rng, 10000 // s
        ),
        "matched_frequency_targets_uniform": targets_uniform(rng, 10000 // s),
        "invalid_classes": invalid_classes(rng, 1000),
        "v6_plan": v6_plans(rng, 5000 // s),
        "v4_plan": v4_plans(rng, 2000 // s),
        "selection_frequency_repeats": repeat_workers(rng, 2000 // s),
        "cleanlab_rows": cleanlab_rows(rng, 100 // s),
        "empty_classes_dropped": empty_classes(rng, 100 // s),
    }
    for name, r in results.items():
        print(f"{name}: {json.dumps(r)}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
