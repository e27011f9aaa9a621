"""Finders, ranking, noise estimates and input validation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retest.errors import ConfigError, InputValidationError, UnknownNameError
from retest.label_errors.finders import LABEL_ERROR_METHODS, find_label_errors
from retest.label_errors.noise import generate_noise_matrix, generate_noisy_labels
from retest.label_errors.ranking import (
    detection_report,
    estimate_noise,
    rank_label_errors,
)

METHODS = ["argmax", "confident-joint", "prune-by-class", "prune-by-noise-rate", "both"]


def _spec_argmax_mask(s: np.ndarray, psx: np.ndarray) -> np.ndarray:
    """Method 1, row by row: first maximal column != given label.

    See docs/algorithms.md#label-error-methods.
    """
    return np.array(
        [int(np.flatnonzero(r == r.max())[0]) != g for r, g in zip(psx, s, strict=True)]
    )


def _spec_confident_joint_mask(s: np.ndarray, psx: np.ndarray) -> np.ndarray:
    """Method 2 written out per row, independent of the library.

    See docs/algorithms.md#label-error-methods.
    """
    k = psx.shape[1]
    t = [np.mean(psx[s == j, j]) for j in range(k)]
    out = np.zeros(s.size, dtype=bool)
    for i, row in enumerate(psx):
        confident = [j for j in range(k) if row[j] >= t[j] - 1e-6]
        if not confident:
            continue
        guess = confident[0] if len(confident) == 1 else int(np.argmax(row))
        out[i] = guess != s[i]
    return out


def _synthetic(seed: int, n: int = 600, k: int = 4) -> tuple[np.ndarray, ...]:
    """Gaussian-ish probabilities around true labels + noisy labels with known errors."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(k), n // k)
    logits = rng.normal(size=(y.size, k)) + 3.0 * np.eye(k)[y]
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    nm = generate_noise_matrix(k, k * 0.7, frac_zero_noise_rates=0.3, random_state=seed)
    s = generate_noisy_labels(y, nm, random_state=seed)
    return y, s, p.astype(np.float32)


def test_registry_holds_the_five_methods() -> None:
    assert set(METHODS) <= set(LABEL_ERROR_METHODS.names())
    with pytest.raises(UnknownNameError, match="Did you mean 'prune-by-class'"):
        find_label_errors([0, 1], np.eye(2), method="prune-by-clas")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spec_methods_match_independent_code_on_synthetic(seed: int) -> None:
    _, s, p = _synthetic(seed)
    np.testing.assert_array_equal(
        find_label_errors(s, p, method="argmax"), _spec_argmax_mask(s, p)
    )
    np.testing.assert_array_equal(
        find_label_errors(s, p, method="confident-joint"),
        _spec_confident_joint_mask(s, p),
    )


@pytest.mark.parametrize("method", ["prune-by-class", "prune-by-noise-rate", "both"])
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), chunk=st.integers(1, 700))
def test_chunked_engine_equals_cleanlab(method: str, seed: int, chunk: int) -> None:
    _, s, p = _synthetic(seed, n=400, k=5)
    a = find_label_errors(s, p, method=method, engine="cleanlab")
    b = find_label_errors(s, p, method=method, engine="chunked", chunk_rows=chunk)
    np.testing.assert_array_equal(a, b)


def test_methods_find_planted_errors_and_nest() -> None:
    y, s, p = _synthetic(3, n=2000, k=4)
    masks = {m: find_label_errors(s, p, method=m) for m in METHODS}
    for m, mask in masks.items():
        rep = detection_report(mask, s != y)
        assert rep.precision > 0.6 and rep.recall > 0.6, (m, rep)
    assert not (masks["both"] & ~masks["prune-by-class"]).any()
    assert not (masks["both"] & ~masks["prune-by-noise-rate"]).any()


def test_min_examples_per_class_leaves_tiny_classes_alone() -> None:
    # class 2 has 3 examples, all confidently "class 0": v0.1.0 keeps classes <= 5.
    p = np.array(
        [[0.9, 0.05, 0.05]] * 3 + [[0.9, 0.05, 0.05]] * 20 + [[0.1, 0.8, 0.1]] * 20
    )
    s = np.array([2] * 3 + [0] * 20 + [1] * 20)
    assert not find_label_errors(s, p, method="prune-by-class")[:3].any()
    # cleanlab 2.9 keeps at least one example per class in the confident joint.
    assert (
        find_label_errors(s, p, method="prune-by-class", min_examples_per_class=0)[
            :3
        ].sum()
        == 2
    )
    assert find_label_errors(s, p, method="argmax")[:3].all()


def test_rank_orders_by_score_then_margin_then_index() -> None:
    p = np.array(
        [[0.1, 0.9], [0.2, 0.8], [0.1, 0.9], [0.6, 0.4], [0.3, 0.7]], dtype=np.float32
    )
    s = np.array([0, 0, 0, 0, 1])
    ranked = rank_label_errors(s, p, [True, True, True, False, False])
    assert [e.index for e in ranked] == [0, 2, 1]
    assert [e.rank for e in ranked] == [1, 2, 3]
    assert all(e.given == 0 and e.suggested == 1 for e in ranked)
    assert ranked[0].score == pytest.approx(0.1) and ranked[
        0
    ].suggested_prob == pytest.approx(0.9)
    by_margin = rank_label_errors(
        s, p, [True] * 3 + [False] * 2, rank_by="normalized_margin"
    )
    assert by_margin[0].score == pytest.approx((0.1 - 0.9 + 1) / 2)
    with pytest.raises(ConfigError, match="rank_by"):
        rank_label_errors(s, p, [True] * 5, rank_by="entropy")  # type: ignore[arg-type]


def test_estimate_noise_is_consistent() -> None:
    y, s, p = _synthetic(5, n=4000, k=4)
    est = estimate_noise(s, p)
    from cleanlab.count import compute_confident_joint as cleanlab_cj

    np.testing.assert_array_equal(est.confident_joint, cleanlab_cj(s, p))
    assert est.confident_joint.sum() == s.size
    np.testing.assert_array_equal(est.confident_joint.sum(axis=1), np.bincount(s))
    np.testing.assert_allclose(est.noise_matrix.sum(axis=0), 1, atol=1e-6)
    assert est.joint.sum() == pytest.approx(1.0)
    true_errors = int((s != y).sum())
    assert 0.6 * true_errors < est.n_errors < 1.5 * true_errors
    assert est.errors_per_class.sum() == est.n_errors


@pytest.mark.parametrize(
    ("labels", "probs", "match"),
    [
        ([0, 1, 1], [[0.5, 1.6], [0.5, 0.5], [0.2, 0.8]], "above 1 \\(row 0\\)"),
        ([0, 1], [[0.5, 0.5], [0.5, 0.5], [0.2, 0.8]], "same length: 2 labels, 3 rows"),
        ([0, 0], [[1.0], [1.0]], "at least 2 classes"),
        ([0, 2], [[0.5, 0.5], [0.5, 0.5]], "in \\[0, 2\\)"),
        ([0, 1], [[1.2, -0.2], [0.5, 0.5]], "negative"),
        ([0, 1], [[np.nan, 1.0], [0.5, 0.5]], "NaN"),
        ([0, 1], [0.5, 0.5], "shape \\(n_samples, n_classes\\)"),
    ],
)
def test_bad_inputs_raise_clear_errors(
    labels: list[int], probs: list, match: str
) -> None:
    for method in METHODS:
        with pytest.raises(InputValidationError, match=match):
            find_label_errors(labels, np.asarray(probs), method=method)


def test_bad_options() -> None:
    with pytest.raises(ConfigError, match="engine"):
        find_label_errors([0, 1], np.eye(2), method="both", engine="gpu")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="min_examples_per_class"):
        find_label_errors([0, 1], np.eye(2), min_examples_per_class=-1)
    assert find_label_errors([0, 1], np.array([[0.995, 0.0], [0.0, 1.0]])).tolist() == [
        False,
        False,
    ]  # within the default row-sum tolerance (float16 storage)


# ------------------------------------------------------------------ real data (slow)


@pytest.fixture(scope="module")
def cl_data(shared_data: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    d = shared_data / "cl"
    p16 = np.load(d / "pred_probs.npy")
    return (
        np.load(d / "true_labels.npy").astype(np.int64),
        np.load(d / "noisy_labels.npy").astype(np.int64),
        p16.astype(np.float32),  # the README: upcast before use
        p16,
    )


@pytest.mark.slow
def test_cl_benchmark_masks(cl_data: tuple[np.ndarray, ...]) -> None:
    y, s, p, p16 = cl_data
    errors = s != y
    masks = {}
    print(
        f"\nCL CIFAR-10 (sparsity 0.2, noise 0.4): {errors.sum()} true errors of {s.size}"
    )
    for m in METHODS:
        masks[m] = find_label_errors(s, p, method=m)
        r = detection_report(masks[m], errors)
        print(
            f"  {m:20s} flagged {masks[m].sum():6d}  precision {r.precision:.3f}  "
            f"recall {r.recall:.3f}  F1 {r.f1:.3f}"
        )
        assert r.precision > 0.70 and r.recall > 0.80 and r.f1 > 0.80, (m, r)
        # The chunked engine on the raw float16 array gives the same mask.
        np.testing.assert_array_equal(
            masks[m],
            find_label_errors(s, p16, method=m, engine="chunked", chunk_rows=9999),
        )
    np.testing.assert_array_equal(masks["argmax"], _spec_argmax_mask(s, p))
    np.testing.assert_array_equal(
        masks["confident-joint"], _spec_confident_joint_mask(s, p)
    )
    # Paper's ordering: pruning by noise rate is more precise than argmax.
    prec = {m: detection_report(masks[m], errors).precision for m in METHODS}
    assert (
        prec["prune-by-noise-rate"] > prec["argmax"] and prec["both"] > prec["argmax"]
    )
    assert not (masks["both"] & ~masks["prune-by-noise-rate"]).any()
    est = estimate_noise(s, p)
    assert 0.8 * errors.sum() < est.n_errors < 1.35 * errors.sum()
