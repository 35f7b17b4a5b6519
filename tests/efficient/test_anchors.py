"""Anchors and estimates on real HELM Classic results (../shared/data/helm_classic_responses) and on generated
populations: better than a random sample of as many items, intervals that cover as they say, the cold start's
Wilson interval, and refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from holistic_dagster.efficient.anchors import (
    INFORMED,
    IRT,
    RANDOM,
    choose_anchors,
    estimate,
    fit_population,
    wilson,
)
from holistic_dagster.efficient.validation import read_matrix, validate_estimates
from tests.efficient.test_irt import generated


@pytest.fixture(scope="module")
def helm(shared_data):
    return read_matrix(shared_data / "helm_classic_responses" / "mmlu.json")


def test_held_out_helm_models_are_estimated_better_than_by_a_random_sample(helm):
    # three models held out together (a weak, a middling and the strongest), 4 anchor draws each
    result = validate_estimates(helm, ["helm-classic-02", "helm-classic-10", "helm-classic-21"], 100, seeds=4)
    assert result.method == IRT and result.n_full == 567
    assert result.mae < 0.03 and result.mae < 0.85 * result.mae_random
    assert set(result.per_model) == {"helm-classic-02", "helm-classic-10", "helm-classic-21"}
    assert result.separated_pairs == 3 and result.pairs_ordered == 1.0


@pytest.mark.slow
def test_the_targets_hold_with_every_helm_model_held_out_in_turn(helm):
    result = validate_estimates(helm, None, 100, seeds=12)  # 6 were 0.72x: the mean wants a dozen draws
    assert len(result.folds) == 20
    assert result.mae_ratio <= 0.7 and result.mae <= 0.03
    assert result.pairs_ordered >= 0.95
    assert 0.8 <= result.interval_coverage <= 0.97


def test_an_estimate_is_its_anchors_answers_plus_predictions_for_the_rest(helm):
    train = helm.models[1:]
    population = fit_population(helm.rows(train), train, helm.items)
    fit = choose_anchors(population, 100, seed=3)
    assert len(set(fit.anchors)) == 100 and fit.weights.sum() == pytest.approx(1.0, abs=0.05)
    row = helm.rows([helm.models[0]])[0]
    found = estimate(fit, row[fit.anchors])
    assert (found.n_evaluated, found.n_full, found.method, found.level) == (100, 567, IRT, 0.9)
    assert found.low < found.value < found.high
    # every anchor right: the estimate is at least the anchors' share of the draw; every anchor wrong: at most 1 - it
    assert estimate(fit, np.ones(100)).value >= 100 / 567
    assert estimate(fit, np.zeros(100)).value <= 1 - 100 / 567
    assert estimate(fit, np.ones(100)).value > found.value > estimate(fit, np.zeros(100)).value
    assert str(found).startswith("≈") and "100/567" in str(found)


def test_anchors_lean_to_informative_items_and_weigh_inversely_to_their_chance(helm):
    train = helm.models[1:]
    population = fit_population(helm.rows(train), train, helm.items)
    fits = [choose_anchors(population, 100, seed=s) for s in range(12)]
    discrimination = population.params.discrimination
    # more discriminating items are drawn more often than their strata's even chance would draw them
    assert np.mean([discrimination[f.anchors].mean() for f in fits]) > discrimination.mean() + 0.02
    # Horvitz-Thompson: the weights sum to the whole draw on average, and no anchor's chance falls below
    # (1 - INFORMED) of its stratum's even share (strata of 5 or 6 of the 567 items)
    assert np.mean([f.weights.sum() for f in fits]) == pytest.approx(1.0, abs=0.01)
    assert max(f.weights.max() for f in fits) <= 6 / 567 / (1 - INFORMED)
    row = helm.rows([helm.models[0]])[0]
    assert np.mean([f.weights @ row[f.anchors] for f in fits]) == pytest.approx(row.mean(), abs=0.03)


def test_the_same_seed_gives_the_same_anchors(helm):
    population = fit_population(helm.correct[:12], helm.models[:12], helm.items)
    first, again, other = (choose_anchors(population, 50, seed=s) for s in (1, 1, 2))
    assert list(first.anchors) == list(again.anchors) and list(first.anchors) != list(other.anchors)


def test_intervals_cover_generated_models_about_as_often_as_they_say():
    y, *_ = generated(60, 400, seed=11)
    population = fit_population(y[:30], [f"m{i}" for i in range(30)], [f"q{j}" for j in range(400)])
    covered = []
    for seed in range(4):
        fit = choose_anchors(population, 60, seed=seed, level=0.9)
        for row in y[30:]:
            found = estimate(fit, row[fit.anchors])
            covered.append(found.low <= row.mean() <= found.high)
    assert 0.8 <= np.mean(covered) <= 0.99


def test_too_few_models_fall_back_to_a_random_sample_and_its_wilson_interval(helm):
    population = fit_population(helm.correct[:5], helm.models[:5], helm.items)
    assert not population.fitted
    fit = choose_anchors(population, 100, seed=0)
    assert fit.method == RANDOM
    answers = np.array([1] * 30 + [0] * 70)
    found = estimate(fit, answers)
    assert found.method == RANDOM and found.value == pytest.approx(0.3)
    # Wilson at 90% on the finite-population-corrected size n / (1 - n/N), by hand
    n, z, p = 100 / (1 - 100 / 567), 1.6448536269514722, 0.3
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert (found.low, found.high) == pytest.approx((centre - half, centre + half))
    assert wilson(0.0, 50, 0.95)[0] == pytest.approx(0.0, abs=1e-12)


def test_models_with_missing_cells_are_not_part_of_the_population(helm):
    matrix = helm.correct[:12].copy()
    matrix[0, 5] = np.nan
    population = fit_population(matrix, helm.models[:12], helm.items)
    assert helm.models[0] not in population.models and len(population.models) == 11


def test_bad_requests_are_refused(helm):
    population = fit_population(helm.correct[:12], helm.models[:12], helm.items)
    with pytest.raises(ValueError, match="between 1 and the 567 items"):
        choose_anchors(population, 0)
    fit = choose_anchors(population, 10)
    with pytest.raises(ValueError, match="each of the 10 anchors"):
        estimate(fit, np.ones(9))
    with pytest.raises(ValueError, match=r"score in \[0, 1\]"):
        estimate(fit, np.full(10, 1.5))
