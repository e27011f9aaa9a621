"""Noisy-label simulation: requested trace/sparsity, realised noise, legacy.

See docs/algorithms.md#noise-generation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retest.errors import ConfigError, InputValidationError
from retest.label_errors.noise import (
    PAPER_NOISE_AMOUNTS,
    PAPER_SPARSITIES,
    generate_noise_matrix,
    generate_noisy_labels,
    noise_matrix_of,
    paper_trace,
)

K = 10
LABELS = np.random.default_rng(0).permutation(np.repeat(np.arange(K), 5000))


def _off_diagonal_zeros(nm: np.ndarray) -> int:
    return int((nm[~np.eye(nm.shape[0], dtype=bool)] == 0).sum())


@pytest.mark.parametrize("legacy", [False, True], ids=["generator", "legacy"])
@pytest.mark.parametrize("sparsity", [0.0, 0.2, 0.4, 0.6])
@pytest.mark.parametrize("trace", [8, 6, 3])
def test_grid(trace: int, sparsity: float, legacy: bool) -> None:
    nm = generate_noise_matrix(
        K, trace, frac_zero_noise_rates=sparsity, random_state=3, legacy=legacy
    )
    np.testing.assert_allclose(nm.sum(axis=0), 1.0, atol=1e-9)
    assert np.trace(nm) == pytest.approx(trace, abs=1e-9)
    assert (nm >= 0).all() and (np.diag(nm) < 1).all()
    assert _off_diagonal_zeros(nm) == {0.0: 0, 0.2: 18, 0.4: 36, 0.6: 54}[sparsity]
    s = generate_noisy_labels(LABELS, nm, random_state=4, legacy=legacy)
    realised = float((s != LABELS).mean())
    assert abs(realised - (1 - trace / K)) <= 0.005
    # Flips only go where the matrix has mass.
    assert (noise_matrix_of(LABELS, s, K)[nm == 0] == 0).all()


def test_seeded_and_isolated_from_global_rng() -> None:
    a = generate_noise_matrix(K, 6, frac_zero_noise_rates=0.4, random_state=11)
    b = generate_noise_matrix(K, 6, frac_zero_noise_rates=0.4, random_state=11)
    c = generate_noise_matrix(K, 6, frac_zero_noise_rates=0.4, random_state=12)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    before = np.random.get_state()[1].copy()  # noqa: NPY002 - the caller's stream …
    nm = generate_noise_matrix(K, 6, random_state=0, legacy=True)
    generate_noisy_labels(LABELS, nm, random_state=0, legacy=True)
    after = np.random.get_state()[1]  # noqa: NPY002
    np.testing.assert_array_equal(after, before)  # … is untouched
    s1 = generate_noisy_labels(LABELS, a, random_state=5)
    np.testing.assert_array_equal(s1, generate_noisy_labels(LABELS, a, random_state=5))


def test_realised_matrix_is_the_requested_one_up_to_rounding() -> None:
    nm = generate_noise_matrix(K, 6, frac_zero_noise_rates=0.2, random_state=1)
    s = generate_noisy_labels(LABELS, nm, random_state=2)
    np.testing.assert_allclose(
        noise_matrix_of(LABELS, s, K), nm, atol=1.0 / 5000 + 1e-12
    )


def test_paper_traces() -> None:
    assert [paper_trace(x) for x in PAPER_NOISE_AMOUNTS] == [10, 8, 6, 3, 1]
    assert PAPER_SPARSITIES[3] == 0.6000000000000001


def test_bad_inputs() -> None:
    with pytest.raises(ConfigError, match="n_classes"):
        generate_noise_matrix(1, 1)
    with pytest.raises(ConfigError, match="trace"):
        generate_noise_matrix(K, 11)
    with pytest.raises(ConfigError, match="at most 80 fit"):
        generate_noise_matrix(K, 5, frac_zero_noise_rates=0.95)
    with pytest.raises(ConfigError, match="int seed"):
        generate_noise_matrix(K, 5, random_state=np.random.default_rng(0), legacy=True)
    with pytest.raises(InputValidationError, match="columns summing to 1"):
        generate_noisy_labels([0, 1], [[0.5, 0.5], [0.2, 0.5]])
    with pytest.raises(InputValidationError, match="labels use 3 classes"):
        generate_noisy_labels([0, 1, 2], np.eye(2))
    assert np.array_equal(generate_noise_matrix(3, 3), np.eye(3))


@pytest.mark.slow
def test_legacy_regenerates_the_released_label_file(shared_data: Path) -> None:
    y = np.load(shared_data / "cl" / "true_labels.npy").astype(np.int64)
    released = np.load(shared_data / "cl" / "noisy_labels.npy")
    # docs/algorithms.md#reference-values: sparsity 0, noise "0.2" → label accuracy
    # 0.8009.
    nm = generate_noise_matrix(
        K,
        paper_trace(PAPER_NOISE_AMOUNTS[1]),
        frac_zero_noise_rates=PAPER_SPARSITIES[0],
        random_state=0,
        legacy=True,
    )
    acc = (generate_noisy_labels(y, nm, random_state=0, legacy=True) == y).mean()
    assert round(float(acc), 4) == 0.8009
    # The shared setting (sparsity 0.2, noise 0.4) bit for bit.
    nm = generate_noise_matrix(
        K,
        paper_trace(PAPER_NOISE_AMOUNTS[2]),
        frac_zero_noise_rates=PAPER_SPARSITIES[1],
        random_state=0,
        legacy=True,
    )
    s = generate_noisy_labels(y, nm, random_state=0, legacy=True)
    np.testing.assert_array_equal(s, released)
