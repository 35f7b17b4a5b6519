"""The sequential gate: alpha spending as Lan and DeMets define it, the false-alarm rate under no difference,
early stops where the verdict is clear, the sample-size formula by hand, and the HELM Classic pairs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from holistic_dagster.efficient.sequential import (
    detectable_drop,
    instances_needed,
    obrien_fleming_spending,
    sequential_gate,
)
from holistic_dagster.efficient.validation import full_draw_verdict, read_matrix, validate_gate


def test_obrien_fleming_spending_spends_little_early_and_all_at_the_end():
    assert obrien_fleming_spending(1.0, 0.025) == pytest.approx(0.025)
    assert obrien_fleming_spending(0.0, 0.025) == 0.0
    # 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t)), by hand at t = 1/4
    assert obrien_fleming_spending(0.25, 0.05) == pytest.approx(2 - 2 * norm.cdf(1.959963984540054 / 0.5))
    assert obrien_fleming_spending(0.25, 0.05) < 0.0001


def pair(n, both, base_only, cand_only, seed=0):
    """Paired 0/1 outcomes with the given counts, in a shuffled order."""
    a = np.array([1] * both + [1] * base_only + [0] * cand_only + [0] * (n - both - base_only - cand_only))
    b = np.array([1] * both + [0] * base_only + [1] * cand_only + [0] * (n - both - base_only - cand_only))
    order = np.random.default_rng(seed).permutation(n)
    return a[order], b[order]


def test_a_large_drop_is_found_early_and_a_better_candidate_passes_early():
    a, b = pair(600, 200, 150, 20)
    worse = sequential_gate(a, b, alpha=0.05)
    assert worse.verdict == "regression" and worse.fraction_used < 0.3
    assert worse.diff < 0 and worse.baseline_only > worse.candidate_only
    better = sequential_gate(b, a, alpha=0.05)
    assert better.verdict == "pass" and better.fraction_used < 0.3 and "futility" in better.reason


def test_identical_models_pass_and_a_pass_states_what_it_could_have_found():
    a, _ = pair(500, 200, 0, 0)
    verdict = sequential_gate(a, a.copy())
    assert verdict.verdict == "pass" and verdict.baseline_only == verdict.candidate_only == 0
    assert verdict.detectable > 0 or math.isnan(verdict.detectable)


def test_the_false_alarm_rate_under_no_difference_stays_below_alpha():
    rng = np.random.default_rng(7)
    alarms = 0
    for trial in range(120):
        a = (rng.random(300) < 0.5).astype(float)
        flip = rng.random(300) < 0.3  # 30% discordant, each way with probability 1/2
        b = np.where(flip, 1 - a, a)
        alarms += sequential_gate(a, b, alpha=0.05, seed=trial).verdict == "regression"
    assert alarms / 120 <= 0.05


def test_a_drop_within_the_tolerance_is_not_a_regression():
    a, b = pair(600, 200, 70, 40)  # 5 points worse: significant on the full draw, within a 6-point tolerance
    assert full_draw_verdict(a, b, 0.05, 0.0) == "regression"
    assert sequential_gate(a, b, tolerance=0.06).verdict == "pass"
    assert sequential_gate(a, b, tolerance=0.0).verdict == "regression"


def test_instances_needed_is_connors_formula():
    # Connor (1987): n = (z_a sqrt(d) + z_b sqrt(d - delta^2))^2 / delta^2, one-sided alpha 0.025, power 0.8
    z_a, z_b, d, delta = 1.959963984540054, 0.8416212335729143, 0.3, 0.1
    assert instances_needed(delta, d, 0.025, 0.8) == math.ceil((z_a * d**0.5 + z_b * (d - delta**2) ** 0.5) ** 2 / 0.01)
    assert instances_needed(0.005, 0.39, 0.025) > 100_000  # half a point needs thousands of pairs
    assert instances_needed(0.10, 0.39, 0.025) < 400  # ten points, a few hundred
    assert detectable_drop(300, 0.39, 0.025) == pytest.approx((z_a + z_b) * (0.39 / 300) ** 0.5)
    with pytest.raises(ValueError, match="positive drop"):
        instances_needed(0, 0.3, 0.05)


def test_bad_outcomes_are_refused():
    with pytest.raises(ValueError, match=r"scores in \[0, 1\]"):
        sequential_gate(np.array([1.5, 1]), np.array([1, 0]))
    with pytest.raises(ValueError, match="equally long"):
        sequential_gate(np.array([1, 0]), np.array([1]))


@pytest.mark.slow
def test_on_every_pair_of_helm_models_the_gate_reproduces_the_full_draw_with_half_the_instances(shared_data):
    matrix = read_matrix(shared_data / "helm_classic_responses" / "mmlu.json")
    figures = validate_gate(matrix, alpha=0.05)
    assert figures["pairs"] == 380
    assert figures["verdict_agreement"] >= 0.95
    assert figures["false_alarm_rate"] <= 0.05
    assert figures["mean_fraction_used"] <= 0.5
