"""Scores that are not right-or-wrong (F1, ROUGE, a judge's grade in [0, 1]) get what 0/1 metrics get: the 2PL fit
takes them as fractions of a right answer and recovers known parameters, the anchors estimate them better than a
random sample of as many with intervals that cover, and the sequential gate runs the exact sign-flip test (the
fixed-sample gate's permutation test), with false alarms held at alpha and the full-draw verdict reproduced."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from holistic_dagster.efficient.anchors import (
    IRT,
    RANDOM,
    STRATIFIED,
    choose_anchors,
    estimate,
    fit_population,
    stratified_mean,
)
from holistic_dagster.efficient.irt import fit_2pl
from holistic_dagster.efficient.sequential import SequentialSignFlip, sequential_gate, sign_flip_p_value
from holistic_dagster.efficient.validation import Matrix, full_draw_verdict, validate_estimates, validate_gate
from holistic_dagster.warehouse import Warehouse


def scored(models: int, items: int, seed: int = 1, spread: float = 1.0):
    """A 2PL population whose answers are scored like F1: each item a share of 6 reference tokens matched, each
    matched with the 2PL's probability (so the score's mean is that probability), rounded as F1 values are;
    `spread`: the items' difficulties' standard deviation."""
    rng = np.random.default_rng(seed)
    a, b, theta = np.exp(rng.normal(0, 0.35, items)), rng.normal(0, spread, items), rng.normal(0, 1, models)
    p = 1 / (1 + np.exp(-a * (theta[:, None] - b)))
    return np.round(rng.binomial(6, p) / 6, 4), a, b, theta


def test_the_fit_recovers_known_parameters_from_scores():
    y, a, b, theta = scored(200, 150)
    assert not np.isin(y, (0, 1)).all()
    fit = fit_2pl(y)
    assert np.corrcoef(b, fit.difficulty)[0, 1] > 0.97
    assert np.corrcoef(a, fit.discrimination)[0, 1] > 0.6
    abilities = [fit.ability(np.arange(150), row) for row in y[:40]]
    assert np.corrcoef(theta[:40], abilities)[0, 1] > 0.97
    # 0/1 is the special case: a score of 1 or 0 counts as a right or a wrong answer, as before
    binary = (y > 0.5).astype(float)
    assert fit_2pl(binary).log_likelihood == pytest.approx(fit_2pl(binary.astype(int)).log_likelihood)


def test_anchors_estimate_scores_better_than_a_random_sample_and_cover():
    # items as unlike as a benchmark's (some nearly always answered, some nearly never: difficulties spread twice
    # as wide as abilities); where every item is alike, a model's anchors say no more than any random sample
    y, *_ = scored(30, 300, seed=7, spread=2.0)
    matrix = Matrix([f"m{i}" for i in range(30)], [f"q{j}" for j in range(300)], y, "generated F1")
    result = validate_estimates(matrix, [f"m{i}" for i in range(0, 30, 3)], anchors=40, seeds=8)
    assert result.method == IRT
    assert result.mae < 0.8 * result.mae_random
    assert 0.8 <= result.interval_coverage <= 0.99


def test_a_score_estimate_without_a_population_is_the_sample_mean_with_a_normal_interval():
    y, *_ = scored(3, 200, seed=9)
    population = fit_population(y, ["a", "b", "c"], [f"q{j}" for j in range(200)])
    fit = choose_anchors(population, 50, seed=1)
    answers = y[0, fit.anchors]
    found = estimate(fit, answers)
    assert fit.method == RANDOM and found.method == RANDOM
    z, fpc = 1.6448536269514722, (1 - 50 / 200) ** 0.5
    half = z * answers.std(ddof=1) / 50**0.5 * fpc
    assert found.value == pytest.approx(answers.mean())
    assert (found.low, found.high) == pytest.approx((answers.mean() - half, answers.mean() + half))


def test_the_sign_flip_p_value_is_exact():
    # by hand: differences 0.5, 0.25, -0.25; the baseline's share is 0.25 of sizes {0.5, 0.25, 0.25} (8 sign
    # patterns, equally likely): shares 0, .25, .25, .5, .5, .75, .75, 1; P(share <= .25) = 3/8, P(share >= .25)
    # = 7/8; two-sided p = 2 * 3/8
    assert sign_flip_p_value([0.5, 0.25, -0.25]) == pytest.approx(0.75)
    assert sign_flip_p_value([0.0, 0.0]) == 1.0
    # for 0/1 outcomes it is the exact McNemar test: the two-sided binomial test on the discordant pairs
    d = np.array([1] * 4 + [-1] * 15 + [0] * 30, float)
    assert sign_flip_p_value(d) == pytest.approx(binomtest(4, 19, 0.5).pvalue)


def test_by_enumeration_on_a_small_draw():
    rng = np.random.default_rng(3)
    d = np.round(rng.uniform(-1, 1, 10), 2)
    shares = [sum(abs(x) for x, s in zip(d, signs) if s) for signs in itertools.product([0, 1], repeat=10)]
    observed = float(np.abs(d[d < 0]).sum())
    lower = np.mean(np.array(shares) <= observed + 1e-9)
    upper = np.mean(np.array(shares) >= observed - 1e-9)
    assert sign_flip_p_value(d) == pytest.approx(min(1.0, 2 * min(lower, upper)))


def _pair(n: int, drop: float, rng) -> tuple[np.ndarray, np.ndarray]:
    quality = rng.beta(2, 2, n)
    base = np.clip(np.round(quality + rng.normal(0, 0.15, n), 2), 0, 1)
    cand = np.clip(np.round(quality - drop + rng.normal(0, 0.15, n), 2), 0, 1)
    return base, cand


def test_the_sequential_sign_flip_holds_false_alarms_and_finds_a_drop_early():
    rng = np.random.default_rng(11)
    alarms = sum(sequential_gate(*_pair(300, 0.0, rng), alpha=0.05, seed=t).verdict == "regression" for t in range(200))
    assert alarms <= 0.05 * 200  # one-sided at alpha/2: about 5 expected at most
    found = [sequential_gate(*_pair(300, 0.10, rng), alpha=0.05, seed=t) for t in range(20)]
    assert all(v.verdict == "regression" for v in found)
    assert np.mean([v.fraction_used for v in found]) < 0.6


def test_run_to_the_end_it_decides_as_the_full_draw_does():
    rng = np.random.default_rng(5)
    for trial in range(30):
        base, cand = _pair(120, 0.02 * (trial % 4), rng)
        test = SequentialSignFlip(120, 0.05, futility=0.0)  # no early pass: every look until one decides
        for n in range(20, 121, 20):
            verdict = test.look(cand[:n] - base[:n])
            if verdict is not None:
                break
        if verdict.stopped_at == 120:
            assert verdict.verdict == full_draw_verdict(base, cand, 0.05, 0.0)
        else:
            assert verdict.verdict == "regression" == full_draw_verdict(base, cand, 0.05, 0.0)


def test_the_gate_over_a_population_of_scores_reproduces_the_full_draw():
    y, *_ = scored(8, 400, seed=13)
    matrix = Matrix([f"m{i}" for i in range(8)], [f"q{j}" for j in range(400)], y, "generated F1")
    result = validate_gate(matrix, alpha=0.05, look=25)
    assert result["pairs"] == 56
    assert result["verdict_agreement"] >= 0.9 and result["false_alarm_rate"] <= 0.05
    assert result["mean_fraction_used"] < 0.6


def test_the_sequential_gate_over_the_warehouse_takes_scores_and_lower_is_better(tmp_path):
    from holistic_dagster.alerts.gate import DEFAULT_RULE
    from holistic_dagster.alerts.sequential_gate import sequential_gate_of
    from holistic_dagster.config.alerts import MetricRule, MetricThreshold

    rng = np.random.default_rng(2)
    n = 300
    drop_base, drop_cand = _pair(n, 0.15, rng)
    same_base, same_cand = _pair(n, 0.0, rng)
    values = {
        ("qa", "f1_score"): (drop_base, drop_cand),
        ("same", "f1_score"): (same_base, same_cand),
        ("toxic", "toxicity"): (1 - drop_base, 1 - drop_cand),  # lower is better: the candidate's is higher
        ("counts", "f1_score"): (same_base * 10, same_cand * 10),  # not a score in [0, 1]
    }
    wh = _warehouse(tmp_path, values)
    main = {"qa": "f1_score", "same": "f1_score", "toxic": "exact_match", "counts": "f1_score"}
    result = sequential_gate_of(wh, "v", "cand", "base", DEFAULT_RULE, 0.05, main)
    verdicts = {r.scenario: r.result.verdict for r in result.rows}
    assert verdicts == {"qa": "regression", "same": "pass"}
    assert any(u.startswith("counts: f1_score is not a score in [0, 1]") for u in result.undecided)
    assert result.rows[0].result.fraction_used < 1.0
    toxicity = MetricRule(kind="metric", family="toxicity", metric="toxicity", critical=MetricThreshold(drop=0.0))
    result = sequential_gate_of(wh, "v", "cand", "base", toxicity, 0.05, main)
    assert {r.scenario: r.result.verdict for r in result.rows}["toxic"] == "regression"
    # read the other way round (the candidate less toxic), it is no regression
    result = sequential_gate_of(wh, "v", "base", "cand", toxicity, 0.05, main)
    assert {r.scenario: r.result.verdict for r in result.rows}["toxic"] == "pass"


def _warehouse(tmp_path, values: dict) -> Warehouse:
    """A warehouse holding, per (scenario, metric), the baseline's and the candidate's per-instance values."""
    instances, scores = [], []
    for (scenario, metric), (base, cand) in values.items():
        for i in range(len(base)):
            instances.append(
                {"version": "v", "scenario": scenario, "instance_id": f"i{i}", "split": "test", "subset": "",
                 "input": "q", "references": "[]", "num_correct_references": 1, "is_multiple_choice": False,
                 "source_uri": "generator://t", "record": str(i)}
            )  # fmt: skip
            for model, value in (("base", base[i]), ("cand", cand[i])):
                family = "toxicity" if metric == "toxicity" else "accuracy"
                scores.append(
                    {"model": model, "version": "v", "scenario": scenario, "instance_id": f"i{i}", "metric": metric,
                     "family": family, "value": float(value), "request_id": f"r{i}", "prediction": "",
                     "provenance_id": "p"}
                )  # fmt: skip
    wh = Warehouse(tmp_path / "w.duckdb")
    wh.replace({"version": "v"}, {"instances": pd.DataFrame(instances), "instance_scores": pd.DataFrame(scores)})
    return wh


def test_a_batched_gate_on_a_right_or_wrong_baseline_takes_the_candidates_scores(tmp_path):
    # an F1 baseline that happens to be 0 or 1 on every instance, and a candidate whose F1s are fractions: the
    # batched gate (which chose McNemar's test from the baseline alone) runs the sign-flip test from the first look
    from holistic_dagster.alerts.gate import DEFAULT_RULE
    from holistic_dagster.alerts.sequential_gate import BatchedGate, sequential_gate_of

    rng = np.random.default_rng(5)
    n = 300
    base = (rng.random(n) < 0.7).astype(float)
    worse = np.clip(np.round(base - 0.3 + rng.normal(0, 0.2, n), 2), 0, 1)
    # no difference in expectation: some right answers half right, as many wrong ones half right
    near = np.where(rng.random(n) < np.where(base == 1, 0.15, 0.35), 0.5, base)
    wh = _warehouse(tmp_path, {("worse", "f1_score"): (base, worse), ("near", "f1_score"): (base, near)})
    main = {"worse": "f1_score", "near": "f1_score"}
    gate = BatchedGate(wh, "v", "cand", "base", DEFAULT_RULE, 0.05, main, ["near", "worse"], look=25)
    while gate.batch() is not None:
        gate.observe(wh)
    assert gate.result.undecided == []  # was: "the candidate's f1_score is not of the baseline's kind"
    batched = {r.scenario: (r.result.verdict, r.result.stopped_at) for r in gate.result.rows}
    assert batched["worse"][0] == "regression" and batched["worse"][1] < n and batched["near"][0] == "pass"
    # what the same test decides over the candidate's full results, read in the same order: the same look
    full = sequential_gate_of(wh, "v", "cand", "base", DEFAULT_RULE, 0.05, main, look=25)
    assert {r.scenario: (r.result.verdict, r.result.stopped_at) for r in full.rows} == batched


def test_any_mean_over_instances_is_the_anchors_stratified_mean():
    # by hand: strata of 60%, 30% and 10% of a draw of 100 with values 2, 4 and 10 seconds: 0.6*2 + 0.3*4 + 0.1*10
    found = stratified_mean([2.0, 4.0, 10.0], [0.6, 0.3, 0.1], 100, 0.9, bounds=(0.0, float("inf")))
    assert (
        found.value == pytest.approx(3.4)
        and found.method == STRATIFIED
        and (found.n_evaluated, found.n_full) == (3, 100)
    )
    # the normal interval on the weighted spread, over Kish's effective size (sum w)^2 / sum w^2, finite-population
    # corrected: spread (0.6 * 1.4^2 + 0.3 * 0.6^2 + 0.1 * 6.6^2) * 3/2 = 8.46; size 1 / 0.46 / (1 - 3/100)
    half = 1.6448536269514722 * (8.46 / (1 / 0.46 / 0.97)) ** 0.5
    assert (found.low, found.high) == pytest.approx((max(0.0, 3.4 - half), 3.4 + half))
    # kept within the metric's bounds
    assert stratified_mean([0.0, 1.0], [0.5, 0.5], 10, bounds=(0.0, 1.0)).high <= 1.0


def test_a_sample_whose_values_all_came_out_the_same_still_has_an_interval():
    """20 wrong answers of 150 say the share is small, not that it is 0: a right-or-wrong metric's interval is
    Wilson's (finite-population corrected), as is that of a [0, 1] score whose sample is one value throughout
    (measured end to end: SmolLM2 on llama.cpp answered 0 of 20 OpenBookQA anchors right and 4.0% of the 150)."""
    from holistic_dagster.efficient.anchors import estimate_mean, wilson

    expected = wilson(0.0, 20 / (1 - 20 / 150), 0.9)
    zeros = stratified_mean([0.0] * 20, [1.0] * 20, 150, 0.9, bounds=(0.0, 1.0))
    assert zeros.value == zeros.low == 0.0 and zeros.high > 0.08  # 0 exactly: it covers a full-draw value of 0
    assert wilson(1.0, 20, 0.9)[1] == 1.0
    assert (zeros.low, zeros.high) == pytest.approx(expected)
    same = estimate_mean([0.5] * 20, 150, 0.9)  # an F1 of 0.5 on every sampled instance
    assert same.low < 0.5 < same.high and (same.low, same.high) == pytest.approx(wilson(0.5, 20 / (1 - 20 / 150), 0.9))
    # a mean that is not a share (seconds) keeps the normal interval on its spread
    runtimes = stratified_mean([2.0] * 5, [1.0] * 5, 100, 0.9, bounds=(0.0, float("inf")))
    assert runtimes.low == runtimes.high == 2.0
    # the whole draw measured: no interval to state
    assert stratified_mean([0.0] * 10, [1.0] * 10, 10, bounds=(0.0, 1.0)).high == 0.0
    with pytest.raises(ValueError, match="positive weight"):
        stratified_mean([1.0], [0.0], 10)


def test_a_run_of_ties_seen_first_does_not_pass_a_regression():
    # two checkpoints that answer alike on most instances: the candidate is half a point worse on 8% of them, so
    # the first look often sees nothing but ties; a tie is no evidence that a regression is impossible
    rng = np.random.default_rng(0)
    verdicts = []
    for trial in range(40):
        base = np.round(rng.uniform(0.5, 1, 1000), 2)
        cand = base.copy()
        hit = rng.random(1000) < 0.08
        cand[hit] = base[hit] - 0.5
        verdicts.append(sequential_gate(base, cand, 0.05, seed=trial))
    assert all(v.verdict == "regression" for v in verdicts)
    assert np.mean([v.fraction_used for v in verdicts]) < 0.5
