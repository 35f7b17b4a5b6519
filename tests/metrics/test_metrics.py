"""Metric values against hand-computed ones and HELM's published definitions."""

from __future__ import annotations

import math

import pytest

from holistic_dagster.metrics import get_reference_metric
from holistic_dagster.metrics.accuracy import (
    exact_match,
    f1_score,
    final_number,
    final_number_exact_match,
    normalize_text,
    prefix_exact_match,
    quasi_exact_match,
    quasi_prefix_exact_match,
)
from holistic_dagster.metrics.calibration import (
    calibration_metrics,
    expected_calibration_error,
    selective_accuracy,
    selective_coverage_accuracy_area,
)
from holistic_dagster.metrics.scoring import metrics_per_instance, predict, score_instances
from holistic_dagster.records import Completion, Request
from tests.adaptation.test_adaptation import mc, qa


def test_normalize_text_follows_helm():
    assert normalize_text("  The Cat's  hat, an Apple!  ") == "cats hat apple"


@pytest.mark.parametrize(
    "fn, gold, pred, expected",
    [
        (exact_match, "Yes", " Yes\n", 1.0),
        (exact_match, "Yes", "yes", 0.0),
        (exact_match, "Yes", "", 0.0),
        (exact_match, "", "  ", 0.0),  # HELM strips the prediction first: whitespace only is no answer
        (quasi_exact_match, "The Cat!", "cat", 1.0),
        (quasi_exact_match, "cat", "cats", 0.0),
        (quasi_exact_match, "", "", 0.0),  # HELM: an empty prediction never matches
        (prefix_exact_match, "Yes", " Yes, Elmendorf", 1.0),
        (prefix_exact_match, "Yes", "No, Yes", 0.0),
        (prefix_exact_match, "Yes", " yes, Elmendorf", 0.0),  # case counts without normalisation
        # quasi_prefix_exact_match (HELM: normalize_text(pred).startswith(normalize_text(gold)), 0 if no pred)
        (quasi_prefix_exact_match, "Yes", " yes, Elmendorf", 1.0),  # "yes elmendorf" starts with "yes"
        (quasi_prefix_exact_match, "The Eiffel Tower", "eiffel tower, in Paris", 1.0),  # articles, case dropped
        (quasi_prefix_exact_match, "No", "Not really", 1.0),  # a character prefix, as str.startswith: "not..."
        (quasi_prefix_exact_match, "Yes", "I think yes", 0.0),  # "i think yes" does not start with "yes"
        (quasi_prefix_exact_match, "!", "anything", 1.0),  # gold normalises to "": every answer starts with it
        (quasi_prefix_exact_match, "Yes", " \n ", 0.0),  # whitespace only: no answer (HELM strips it to "")
        (f1_score, "the quick brown fox", "quick fox jumps", 2 / 3),  # P = R = 2/3
        (f1_score, "brown fox", "fox fox fox", 2 / 3),  # sets: P = 1, R = 1/2
        (f1_score, "a an the", "a", 0.0),  # empty after normalisation
        (final_number_exact_match, "#### 1,234", "so 1234 eggs", 1.0),
        (final_number_exact_match, "The answer is 18.", "18.5 dollars", 0.0),
        (final_number_exact_match, "18", "no number", 0.0),
    ],
)
def test_reference_metrics(fn, gold, pred, expected):
    assert fn(gold, pred) == pytest.approx(expected)


def test_final_number_keeps_helms_unescaped_dot():
    # HELM's pattern is r"-?[\d,]+(?:.\d+)?" with an unescaped dot: "3 50" is read as one number
    assert final_number("costs 3 50") == "3 50"
    assert final_number("The answer is -1,000.") == "-1000"


def test_metrics_are_registered_by_name_with_their_family():
    m = get_reference_metric("f1_score")
    assert (m.name, m.family, m.fn) == ("f1_score", "accuracy", f1_score)
    m = get_reference_metric("quasi_prefix_exact_match")
    assert (m.family, m.fn) == ("accuracy", quasi_prefix_exact_match)


def test_expected_calibration_error_equal_mass_bins():
    probs, correct = [0.9, 0.8, 0.3, 0.6], [1, 0, 0, 1]
    # bins by confidence: {0.3, 0.6} -> |0.45 - 0.5|, {0.8, 0.9} -> |0.85 - 0.5|; weighted: (0.05 + 0.35) / 2
    assert expected_calibration_error(probs, correct, 2) == pytest.approx(0.2)
    assert expected_calibration_error(probs, correct, 1) == pytest.approx(0.15)  # |0.65 - 0.5|
    assert expected_calibration_error([1.0, 1.0], [1, 1], 10) == 0.0


def test_selective_accuracy():
    probs, correct = [0.9, 0.8, 0.3, 0.6], [1, 0, 0, 1]
    # HELM (uncertainty-calibration's get_selective_stats) reads accs[int(coverage * n)], the accuracy of the
    # int(coverage * n) + 1 most confident: int(0.5 * 4) + 1 = 3 -> 0.9 right, 0.8 wrong, 0.6 right = 2/3
    # (it was round(0.5 * 4) = 2 instances, 1/2, before we matched HELM)
    assert selective_accuracy(probs, correct, 0.5) == pytest.approx(2 / 3)
    assert selective_accuracy(probs, correct, 0.1) == 1.0  # int(0.4) + 1 = 1: the 0.9, right
    # running accuracy over 0.9, 0.8, 0.6, 0.3: 1, 1/2, 2/3, 1/2
    assert selective_coverage_accuracy_area(probs, correct) == pytest.approx((1 + 0.5 + 2 / 3 + 0.5) / 4)
    assert calibration_metrics(probs, correct)["max_prob"] == pytest.approx(0.65)


def _req(rid, iid, kind="score", choice=None, null=False):
    return Request(request_id=rid, instance_id=iid, kind=kind, prompt="p", choice_index=choice, is_null_context=null)


def test_joint_prediction_maps_the_letter_back_to_its_choice():
    inst = mc("e", "q", ["red", "blue", "green"], 1)
    req = _req("r", "e", "generate")
    pred, prob, carrier = predict(
        "multiple_choice_joint", inst, [req], {"r": Completion("r", " B", ("B",), (-0.5,), -0.5)}
    )
    assert (pred, carrier) == ("blue", req) and prob == pytest.approx(math.exp(-0.5))
    pred, _, _ = predict("multiple_choice_joint", inst, [req], {"r": Completion("r", " Z", ("Z",), (-0.1,), -0.1)})
    assert pred == " Z"  # not a choice letter: scored as is, so it matches nothing


def test_separate_original_and_calibrated_predictions():
    inst = mc("e", "q", ["a", "b", "c"], 0)
    reqs = [_req(f"c{i}", "e", choice=i) for i in range(3)] + [
        _req(f"n{i}", "e", choice=i, null=True) for i in range(3)
    ]
    lps = {"c0": -3.0, "c1": -1.0, "c2": -2.0, "n0": -4.0, "n1": -0.5, "n2": -2.5}
    completions = {k: Completion(k, "", logprob=v) for k, v in lps.items()}
    pred, prob, carrier = predict("multiple_choice_separate_original", inst, reqs[:3], completions)
    assert (pred, carrier.request_id) == ("b", "c1")
    assert prob == pytest.approx(math.exp(-1) / (math.exp(-3) + math.exp(-1) + math.exp(-2)))
    # calibrated: log p(c|prompt) - log p(c|"Answer:") = 1, -0.5, 0.5
    pred, prob, carrier = predict("multiple_choice_separate_calibrated", inst, reqs, completions)
    assert (pred, carrier.request_id) == ("a", "c0")
    assert prob == pytest.approx(math.exp(1) / (math.exp(1) + math.exp(-0.5) + math.exp(0.5)))


def test_score_instances_rows_and_aggregates():
    instances = [qa("e1", "q1", "Paris"), qa("e2", "q2", "4")]
    reqs = [_req("r1", "e1", "generate"), _req("r2", "e2", "generate")]
    completions = {
        "r1": Completion("r1", " Paris", ("Paris",), (-0.1,), -0.1, 10, 1, 0.5),
        "r2": Completion("r2", " 5", ("5",), (-2.0,), -2.0, 12, 1, 1.5),
    }
    rows, aggregates = score_instances("generation", ["exact_match", "f1_score"], instances, reqs, completions)
    assert len(rows) == 2 * metrics_per_instance(["exact_match", "f1_score"], ("accuracy", "calibration", "efficiency"))
    values = {(r.instance_id, r.metric): r.value for r in rows}
    assert values[("e1", "exact_match")] == 1.0 and values[("e2", "exact_match")] == 0.0
    assert values[("e2", "runtime_s")] == 1.5 and values[("e1", "num_prompt_tokens")] == 10
    agg = {a.metric: a for a in aggregates}
    assert agg["exact_match"].value == 0.5 and agg["exact_match"].count == 2 and agg["exact_match"].family == "accuracy"
    assert agg["max_prob"].value == pytest.approx((math.exp(-0.1) + math.exp(-2.0)) / 2)
    assert agg["ece_1_bin"].value == pytest.approx(abs((math.exp(-0.1) + math.exp(-2.0)) / 2 - 0.5))
    assert agg["requests_per_second"].value == pytest.approx(2 / 2.0)
    assert agg["tokens_per_second"].value == pytest.approx((10 + 1 + 12 + 1) / 2.0)
    assert "cost_usd" not in agg and "total_cost_usd" not in agg  # a local model: no price, no cost


def test_a_priced_models_cost_per_instance_and_per_scenario():
    from holistic_dagster.records import Price

    instances = [qa("e1", "q1", "Paris"), qa("e2", "q2", "4")]
    reqs = [_req("r1", "e1", "generate"), _req("r2", "e2", "generate")]
    completions = {
        "r1": Completion("r1", " Paris", ("Paris",), (-0.1,), -0.1, 1000, 10, 0.5),
        "r2": Completion("r2", " 5", ("5",), (-2.0,), -2.0, 3000, 30, 1.5),
    }
    price = Price(input_per_million=2.5, output_per_million=10.0)
    rows, aggregates = score_instances("generation", ["exact_match"], instances, reqs, completions, price=price)
    assert len(rows) == 2 * metrics_per_instance(
        ["exact_match"], ("accuracy", "calibration", "efficiency"), priced=True
    )
    cost = {r.instance_id: r.value for r in rows if r.metric == "cost_usd"}
    # 1,000 prompt tokens at $2.5/M and 10 output tokens at $10/M; 3,000 and 30
    assert cost == pytest.approx({"e1": 0.0025 + 0.0001, "e2": 0.0075 + 0.0003})
    agg = {a.metric: a for a in aggregates}
    assert agg["cost_usd"].value == pytest.approx(0.0052) and agg["total_cost_usd"].value == pytest.approx(0.0104)
