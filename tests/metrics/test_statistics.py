"""Win rates, bootstrap intervals and the paired test, by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from holistic_dagster.metrics.statistics import (
    bootstrap_ci,
    bootstrap_statistic_ci,
    mean_win_rate,
    paired_test,
    win_rates,
)


def test_win_rates_split_ties_as_helm_does():
    column = pd.Series({"A": 0.5, "B": 0.5, "C": 0.2}, name="exact_match")
    # A beats C and ties B: (1 + 0.5) / 2 others
    assert win_rates(column, lower_better=False).to_dict() == {"A": 0.75, "B": 0.75, "C": 0.0}
    assert win_rates(column, lower_better=True).to_dict() == {"A": 0.25, "B": 0.25, "C": 1.0}
    assert win_rates(pd.Series({"A": 1.0}, name="x"), False).empty  # one model: nothing to win
    bbq = pd.Series({"A": -0.4, "B": 0.1, "C": 0.3}, name="bbq_bias_ambiguous")  # |bias|: closer to 0 wins
    assert win_rates(bbq, lower_better=True).to_dict() == {"A": 0.0, "B": 1.0, "C": 0.5}


def test_mean_win_rate_over_the_columns_a_model_has():
    table = pd.DataFrame({"s1": {"A": 0.5, "B": 0.5, "C": 0.2}, "s2": {"A": 1.0, "B": 0.0, "C": np.nan}})
    out = mean_win_rate(table, lambda column: "exact_match").set_index("model")
    assert out.loc["A", "mean_win_rate"] == pytest.approx((0.75 + 1.0) / 2)
    assert out.loc["B", "mean_win_rate"] == pytest.approx((0.75 + 0.0) / 2)
    assert out.loc["C", "mean_win_rate"] == 0.0 and out.loc["C", "num_columns"] == 1


def test_bootstrap_ci_is_seeded_and_matches_the_percentile_recipe():
    values = [0, 1, 1, 0, 1, 1, 1, 0, 1, 1]
    low, high = bootstrap_ci(values, n_boot=500, seed=3)
    rng = np.random.default_rng(3)  # the same recipe by hand
    means = np.asarray(values, float)[rng.integers(0, 10, size=(500, 10))].mean(axis=1)
    assert (low, high) == tuple(np.percentile(means, [2.5, 97.5]))
    assert bootstrap_ci(values, n_boot=500, seed=3) == (low, high)
    assert low < 0.7 < high
    assert bootstrap_ci([0.4] * 8) == (0.4, 0.4)
    x = np.array([0.1, 0.9, 0.5, 0.7])
    assert bootstrap_statistic_ci(4, lambda i: float(np.median(x[i])), n_boot=200, seed=1)[0] >= 0.1


def test_paired_test_verdicts():
    a, b = np.zeros(30), np.ones(30)
    better = paired_test(a, b, seed=1)
    assert (better.diff, better.verdict) == (1.0, "better") and better.p_value == pytest.approx(1 / 2001)
    assert paired_test(a, b, lower_better=True).verdict == "worse"  # e.g. more toxic
    same = paired_test(b, b)
    assert (same.p_value, same.verdict, same.ci_low, same.ci_high) == (1.0, "no significant change", 0.0, 0.0)
    # one flipped instance out of 30 is not significant: p = P(|mean of +-1/30| >= 1/30) = 1
    flip = paired_test(a, np.r_[1.0, np.zeros(29)])
    assert flip.verdict == "no significant change" and flip.p_value == 1.0
    with pytest.raises(ValueError, match="equal-length"):
        paired_test([1, 2], [1])


def test_the_bias_shifted_interval_by_hand():
    from holistic_dagster.metrics.statistics import bias_shifted_interval

    resampled = np.arange(1, 101) / 100.0  # percentiles 0.03475 and 0.97525, mean 0.505
    low, high = bias_shifted_interval(resampled, 0.305)  # bias 0.2: both ends move down by it
    assert low == 0.0 and high == pytest.approx(0.77525)  # 0.03475 - 0.2, clipped at the metric's lower bound
    low, high = bias_shifted_interval(resampled, 0.405)  # bias 0.1
    assert (low, high) == (0.0, pytest.approx(0.87525))
    low, high = bias_shifted_interval(resampled, 0.605)  # bias -0.1: up by it
    assert (low, high) == (pytest.approx(0.13475), 1.0)
    assert bias_shifted_interval(np.array([np.nan, 0.5, 0.7]), 0.6) == (pytest.approx(0.505), pytest.approx(0.695))
    assert np.isnan(bias_shifted_interval(np.array([np.nan]), 0.1)[0])
    degenerate = np.array([0.0] * 98 + [1.0] * 2)  # percentiles (0, 0), mean 0.02: shifted wholly below 0
    assert bias_shifted_interval(degenerate, -0.5, (0.0, 1.0)) == (0.0, pytest.approx(0.0))


@pytest.mark.parametrize("n", [10, 20, 30])
def test_ece_on_small_samples_keeps_its_estimate_inside_the_interval(n):
    """ECE's plain percentile bootstrap excludes its own estimate on many small samples (resampling crowds its
    bins, so resampled ECEs sit above the estimate: mmlu 0.226 [0.247, 0.423] at n=30 in a demo); the
    bias-shifted interval holds it on every one of 200 samples, and keeps the plain interval's width."""
    from holistic_dagster.metrics.calibration import calibration_metrics_per_row
    from holistic_dagster.metrics.statistics import bias_shifted_interval

    plain_out = shifted_out = 0
    for seed in range(200):
        rng = np.random.default_rng(1000 + seed)
        p = rng.uniform(0.25, 1.0, size=n)  # a model's max probability; correct with that probability
        c = (rng.uniform(size=n) < p).astype(float)
        estimate = float(calibration_metrics_per_row(p[None, :], c[None, :])["ece_10_bin"][0])
        idx = rng.integers(0, n, size=(500, n))
        resampled = calibration_metrics_per_row(p[idx], c[idx])["ece_10_bin"]
        low, high = np.percentile(resampled, [2.5, 97.5])
        plain_out += not low <= estimate <= high
        s_low, s_high = bias_shifted_interval(resampled, estimate)
        shifted_out += not s_low - 1e-12 <= estimate <= s_high + 1e-12
        assert s_high - s_low <= high - low + 1e-12  # the same spread, clipped at 0 at most
    assert shifted_out == 0
    if n >= 20:  # (at n=10 fewer bins fill and the plain interval happens to hold it)
        assert plain_out > 0  # the failure it fixes does happen at this n
