"""Intervals, metrics, fits and the simulator: oracles, properties, planted answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from retest.errors import ConfigError, InputValidationError, UnknownNameError
from retest.evaluate.fits import (
    AXES,
    bootstrap_lines,
    fit_new_vs_orig,
    ols,
    quantile_band,
    to_axis,
)
from retest.evaluate.intervals import INTERVALS, clopper_pearson, difference_interval
from retest.evaluate.metrics import (
    METRICS,
    accuracy,
    correct,
    error_ratio,
    per_class_accuracy,
    rank,
)
from retest.evaluate.simulate import (
    probit_line,
    simulate_accuracies,
    simulate_correctness,
    simulate_predicted_labels,
)
from retest.records import Predictions

# ----------------------------------------------------------------------------- intervals


@pytest.mark.parametrize(
    ("k", "n", "lo", "hi"),
    [(425, 500, 81.6, 88.0), (83, 100, 74.2, 89.8), (1800, 2000, 88.6, 91.3)],
)
def test_clopper_pearson_oracles(k: int, n: int, lo: float, hi: float) -> None:
    a, b = clopper_pearson(k, n)
    assert (round(100 * a, 1), round(100 * b, 1)) == (lo, hi)


def test_clopper_pearson_matches_scipy_beta_and_edges() -> None:
    k = np.array([0, 1, 5, 99, 100])
    n = np.full(5, 100)
    lo, hi = clopper_pearson(k, n, confidence=0.9)
    with np.errstate(all="ignore"):
        ref_lo = stats.beta.ppf(0.05, k, n - k + 1)
        ref_hi = stats.beta.ppf(0.95, k + 1, n - k)
    np.testing.assert_allclose(lo[1:], ref_lo[1:], rtol=1e-10)
    np.testing.assert_allclose(hi[:-1], ref_hi[:-1], rtol=1e-10)
    assert lo[0] == 0.0 and hi[-1] == 1.0
    # k = 0: the upper bound is the closed form 1 − (α/2)^(1/n).
    assert hi[0] == pytest.approx(1 - 0.05 ** (1 / 100))
    assert lo.shape == (5,) and isinstance(clopper_pearson(3, 10)[0], float)


def test_interval_inputs_are_checked() -> None:
    with pytest.raises(InputValidationError, match="k=11, n=10"):
        clopper_pearson(11, 10)
    with pytest.raises(ConfigError, match="confidence"):
        clopper_pearson(1, 10, confidence=1.5)
    with pytest.raises(UnknownNameError, match="clopper-pearson"):
        INTERVALS.get("clopper-pearsen")


counts = st.integers(1, 5000).flatmap(
    lambda n: st.tuples(st.integers(0, n), st.just(n))
)


@settings(max_examples=50, deadline=None)
@given(kn=counts, conf=st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_clopper_pearson_properties(kn: tuple[int, int], conf: float) -> None:
    k, n = kn
    lo, hi = clopper_pearson(k, n, confidence=conf)
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    lo2, hi2 = clopper_pearson(n - k, n, confidence=conf)
    assert lo == pytest.approx(1 - hi2, abs=1e-12)
    assert hi == pytest.approx(1 - lo2, abs=1e-12)
    lo3, hi3 = clopper_pearson(4 * k, 4 * n, confidence=conf)  # same k/n, more data
    assert hi3 - lo3 < hi - lo


def test_newcombe_gap_interval() -> None:
    d, lo, hi = difference_interval(8854, 10000, 1567, 2021)
    p1, p2 = 0.8854, 1567 / 2021
    assert d == pytest.approx(p1 - p2)
    l1, u1 = clopper_pearson(8854, 10000)
    l2, u2 = clopper_pearson(1567, 2021)
    assert lo == pytest.approx(d - np.hypot(p1 - l1, u2 - p2))
    assert hi == pytest.approx(d + np.hypot(u1 - p1, p2 - l2))
    # Swapping the sets negates the interval.
    d2, lo2, hi2 = difference_interval(1567, 2021, 8854, 10000)
    assert (d2, lo2, hi2) == pytest.approx((-d, -hi, -lo))
    assert lo < d < hi


# ----------------------------------------------------------------------------- metrics


def test_top1_top5_accuracy_counts() -> None:
    y = np.array([0, 1, 2, 3])
    topk = np.array(
        [[0, 1, 2, 3, 4], [2, 1, 0, 3, 4], [5, 6, 7, 8, 9], [3, 0, 1, 2, 4]]
    )
    p = Predictions("m", "d", topk)
    a1 = accuracy(y, p, metric="top1")
    a5 = accuracy(y, p, metric="top5")
    assert (a1.k, a1.n, a5.k, a5.n) == (2, 4, 3, 4)
    assert str(a1).startswith("50.0 [")
    assert correct(y, p, metric="top5").tolist() == [True, True, False, True]
    with pytest.raises(UnknownNameError, match="top5"):
        METRICS.get("top6")


def test_top5_needs_ranked_predictions_and_lengths_must_match() -> None:
    p = Predictions.from_labels("m", "d", [0, 1, 2])
    with pytest.raises(InputValidationError, match="needs 5 ranked classes"):
        accuracy([0, 1, 2], p, metric="top5")
    with pytest.raises(InputValidationError, match="3 predictions but 4 labels"):
        accuracy([0, 1, 2, 0], p)
    # With only 3 classes, 3 ranked classes are all there is: top-5 is defined.
    q = Predictions("m", "d", [[0, 1, 2], [2, 1, 0]], n_classes=3)
    assert accuracy([2, 1], q, metric="top5").k == 2
    with pytest.raises(InputValidationError, match=r"\[0, 3\)"):
        accuracy([0, 3], q)  # [2, 3] would read as 1-based labels


def test_per_class_accuracy() -> None:
    y = [0, 0, 1, 1, 1, 2]
    pred = [0, 1, 1, 1, 0, 0]
    k, n = per_class_accuracy(y, pred, n_classes=4)
    assert k.tolist() == [1, 2, 0, 0] and n.tolist() == [2, 3, 1, 0]


def test_rank_ties_and_error_ratio() -> None:
    acc = np.array([0.9, 0.95, 0.9, 0.5])
    names = ["zeta", "b", "alpha", "c"]
    assert rank(acc, names).tolist() == [3, 1, 2, 4]  # tie → name order
    assert rank(acc[::-1], names[::-1]).tolist() == [4, 2, 1, 3]  # order-independent
    np.testing.assert_allclose(error_ratio([0.9, 0.8], [0.8, 0.8]), [2.0, 1.0])
    with np.errstate(all="ignore"):
        assert np.isinf(error_ratio([1.0], [0.5])[0])


# ----------------------------------------------------------------------------- fits


def _line_data(axes: str, slope: float, intercept: float, m: int = 12):
    x = np.linspace(0.55, 0.97, m)
    ax = AXES.get(axes)
    y = ax.inverse(slope * ax.forward(x) + intercept)
    return x, y


@pytest.mark.parametrize(
    ("axes", "slope", "intercept"),
    [("linear", 1.69, -72.7), ("probit", 0.952, -0.316), ("logit", 1.3, -0.8)],
)
def test_noiseless_lines_are_recovered_exactly(
    axes: str, slope: float, intercept: float
) -> None:
    x, y = _line_data(axes, slope, intercept)
    fit = fit_new_vs_orig(x, y, axes=axes, n_boot=2000, random_state=0)
    assert fit.slope == pytest.approx(slope, abs=1e-9)
    assert fit.intercept == pytest.approx(intercept, abs=1e-8)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.slope_ci == pytest.approx((slope, slope), abs=1e-8)
    assert fit.intercept_ci == pytest.approx((intercept, intercept), abs=1e-7)
    np.testing.assert_allclose(fit.residual_points, 0, atol=1e-8)
    np.testing.assert_allclose(fit.predict(x), y, atol=1e-10)


def test_ols_matches_an_independent_solver() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(80, 98, 34)
    y = 1.7 * x - 73 + rng.normal(0, 1, 34)
    slope, intercept, r2 = ols(x, y)
    ref = stats.linregress(x, y)
    assert (slope, intercept, r2) == pytest.approx(
        (ref.slope, ref.intercept, ref.rvalue**2), rel=1e-10
    )


def test_bootstrap_is_a_pairs_bootstrap() -> None:
    """Same seed → same draws; compare with a slow per-resample OLS loop."""
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, 7)
    y = 2 * x + rng.normal(0, 0.1, 7)
    slopes, inters = bootstrap_lines(x, y, n_boot=300, random_state=5)
    draws = np.random.default_rng(5).integers(0, 7, size=(300, 7))
    ref = [np.polyfit(x[i], y[i], 1) for i in draws if np.ptp(x[i]) > 0]
    np.testing.assert_allclose(slopes, [r[0] for r in ref], rtol=1e-9)
    np.testing.assert_allclose(inters, [r[1] for r in ref], rtol=1e-9, atol=1e-12)


def test_bootstrap_reproducible_for_a_seed_and_different_for_another() -> None:
    rng = np.random.default_rng(2)
    o = rng.uniform(0.8, 0.97, 20)
    n = 1.7 * o - 0.73 + rng.normal(0, 0.01, 20)
    a = fit_new_vs_orig(o, n, n_boot=20_000, random_state=3)
    b = fit_new_vs_orig(o, n, n_boot=20_000, random_state=3)
    c = fit_new_vs_orig(o, n, n_boot=20_000, random_state=4)
    assert a.slope_ci == b.slope_ci and np.array_equal(a.band_lo, b.band_lo)
    assert a.slope_ci != c.slope_ci
    assert a.slope_ci[0] < a.slope < a.slope_ci[1]
    assert np.all(a.band_lo <= a.band_hi)
    assert a.n_boot_used == 20_000


def test_band_quantiles_match_numpy() -> None:
    rng = np.random.default_rng(3)
    s, i = rng.normal(1, 0.1, 5001), rng.normal(0, 1, 5001)
    xs = np.linspace(-2, 2, 7)
    lo, hi = quantile_band(s, i, xs, confidence=0.9)
    lines = xs[:, None] * s[None, :] + i[None, :]
    np.testing.assert_allclose(lo, np.quantile(lines, 0.05, axis=1), rtol=1e-12)
    np.testing.assert_allclose(hi, np.quantile(lines, 0.95, axis=1), rtol=1e-12)


def test_fit_needs_three_models_and_valid_inputs() -> None:
    with pytest.raises(
        InputValidationError, match=r"at least 3 models\. Got 2 \(a, b\)"
    ):
        fit_new_vs_orig([0.9, 0.8], [0.8, 0.7], names=["a", "b"])
    with pytest.raises(InputValidationError, match="two different"):
        fit_new_vs_orig([0.9] * 4, [0.8, 0.7, 0.6, 0.5], n_boot=10)
    with pytest.raises(UnknownNameError):
        fit_new_vs_orig([0.9, 0.8, 0.7], [0.8, 0.7, 0.6], axes="probot")
    with pytest.raises(ConfigError, match="n_boot"):
        fit_new_vs_orig([0.9, 0.8, 0.7], [0.8, 0.7, 0.6], n_boot=0)


def test_three_models_drops_degenerate_resamples() -> None:
    fit = fit_new_vs_orig(
        [0.7, 0.8, 0.9], [0.5, 0.7, 0.85], n_boot=9000, random_state=0
    )
    # P(all three draws the same model) = 1/9.
    assert 7500 < fit.n_boot_used < 8500
    assert np.all(np.isfinite(fit.boot_slopes))


def test_probit_clamps_perfect_accuracy() -> None:
    z = to_axis([0.0, 1.0], "probit", n=[100, 100])
    assert z[0] == pytest.approx(stats.norm.ppf(0.5 / 101))
    assert z[1] == pytest.approx(stats.norm.ppf(100.5 / 101))
    assert np.isfinite(to_axis([0.0, 1.0], "logit")).all()
    with pytest.raises(InputValidationError, match="fractions"):
        to_axis([1.2], "linear")


def test_residuals_and_band_membership() -> None:
    x, y = _line_data("linear", 1.5, -50.0, m=20)
    y = y.copy()
    y[3] += 0.05  # one model 5 points above the line: effectively robust
    fit = fit_new_vs_orig(
        x, y, n_boot=5000, random_state=0, names=[f"m{i}" for i in range(20)]
    )
    assert fit.residual_points[3] == pytest.approx(fit.residual[3])  # percent domain
    assert (
        fit.residual_points[3] > 4
        and fit.residual_points[3] == fit.residual_points.max()
    )
    assert not fit.inside_band[3]
    summary = fit.summary()
    assert summary["models"][3]["model"] == "m3" and summary["n_models"] == 20


# ----------------------------------------------------------------------------- simulator


def test_simulator_accuracies_follow_the_closed_form() -> None:
    s = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_allclose(
        simulate_accuracies(s, 0.5, 2.0), stats.norm.cdf((s - 0.5) / np.sqrt(5))
    )


@pytest.mark.parametrize(
    ("mu1", "s1", "mu2", "s2"), [(0, 1, 0.7, 1.1), (-0.5, 0.3, 0.2, 2.0)]
)
def test_probit_fit_recovers_u_v(mu1: float, s1: float, mu2: float, s2: float) -> None:
    skills = np.linspace(-1, 3, 25)
    a1 = simulate_accuracies(skills, mu1, s1)
    a2 = simulate_accuracies(skills, mu2, s2)
    u, v = probit_line(mu1, s1, mu2, s2)
    fit = fit_new_vs_orig(a1, a2, axes="probit", n_boot=1000, random_state=0)
    assert (fit.slope, fit.intercept) == pytest.approx((u, v), abs=1e-9)


def test_simulated_examples_match_expected_accuracy(global_seed: int) -> None:
    skills = np.array([0.0, 1.0, 2.5])
    ok = simulate_correctness(skills, 0.3, 1.2, 200_000, random_state=global_seed)
    np.testing.assert_allclose(
        ok.mean(axis=1), simulate_accuracies(skills, 0.3, 1.2), atol=0.01
    )
    again = simulate_correctness(skills, 0.3, 1.2, 200_000, random_state=global_seed)
    assert np.array_equal(ok, again)
    y = np.random.default_rng(global_seed).integers(0, 10, 200_000)
    pred = simulate_predicted_labels(y, ok, 10, random_state=global_seed)
    assert np.array_equal(pred == y, ok)
    assert pred.min() >= 0 and pred.max() <= 9
