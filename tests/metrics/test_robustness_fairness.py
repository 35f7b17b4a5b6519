"""Robustness and fairness: the worst case over an instance and its perturbations, and per-perturbation
means, on a hand-computed case; summarization overlap metrics by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from holistic_dagster.metrics import get_reference_metric
from holistic_dagster.metrics.scoring import score_instances
from holistic_dagster.records import Completion, Request
from tests.adaptation.test_adaptation import qa


def variant(original, perturbation: str):
    return replace(
        original,
        instance_id=f"{original.instance_id}~{perturbation}",
        perturbation=perturbation,
        original_id=original.instance_id,
    )


def test_worst_case_and_per_perturbation_by_hand():
    e1, e2, e3 = qa("e1", "q1", "Paris"), qa("e2", "q2", "4"), qa("e3", "q3", "blue")
    answers = {  # instance -> the model's answer
        "e1": "Paris",
        "e2": "4",
        "e3": "red",
        "e1~typos": "Lyon",
        "e2~lowercase": "4",
        "e3~typos": "blue",  # robustness
        "e2~gender": "5",  # fairness
    }
    instances = [
        e1,
        e2,
        e3,
        variant(e1, "typos"),
        variant(e2, "lowercase"),
        variant(e3, "typos"),
        variant(e2, "gender"),
    ]
    requests = [Request(f"r-{iid}", iid, "generate", "p") for iid in answers]
    completions = {
        f"r-{iid}": Completion(f"r-{iid}", text, ("x",), (-0.5,), -0.5, 3, 1, 0.1) for iid, text in answers.items()
    }
    families = ("accuracy", "calibration", "robustness", "fairness", "efficiency")
    rows, aggregates = score_instances("generation", ["exact_match"], instances, requests, completions, families)
    agg = {(a.family, a.metric, a.perturbation): a for a in aggregates}
    assert agg[("accuracy", "exact_match", "")].value == pytest.approx(2 / 3)
    # worst case: e1 min(1, 0) = 0; e2 min(1, 1) = 1; e3 min(0, 1) = 0
    assert agg[("robustness", "exact_match", "worst")].value == pytest.approx(1 / 3)
    # per perturbation, the original standing in where the perturbation changed nothing
    assert agg[("robustness", "exact_match", "typos")].value == pytest.approx((0 + 1 + 1) / 3)
    assert agg[("robustness", "exact_match", "lowercase")].value == pytest.approx((1 + 1 + 0) / 3)
    assert agg[("fairness", "exact_match", "worst")].value == pytest.approx((1 + 0 + 0) / 3)
    assert agg[("fairness", "exact_match", "gender")].value == pytest.approx(1 / 3)
    assert all(a.count == 3 for a in aggregates if a.family in ("robustness", "fairness"))
    by_key = {(r.instance_id, r.family, r.metric): r for r in rows}
    worst_e1 = by_key[("e1", "robustness", "exact_match")]
    assert (worst_e1.value, worst_e1.request_id, worst_e1.perturbation) == (0.0, "r-e1~typos", "worst")
    assert by_key[("e1~typos", "robustness", "exact_match")].perturbation == "typos"
    # calibration and efficiency are about the originals only
    assert agg[("calibration", "ece_1_bin", "")].count == 3
    assert sum(1 for r in rows if r.metric == "runtime_s") == 3
    assert agg[("efficiency", "requests_per_second", "")].value == pytest.approx(3 / 0.3)  # originals only


def test_families_not_applicable_produce_no_rows():
    e1 = qa("e1", "q1", "Paris")
    instances = [e1, variant(e1, "typos")]
    requests = [Request("r1", "e1", "generate", "p"), Request("r2", "e1~typos", "generate", "p")]
    completions = {"r1": Completion("r1", "Paris"), "r2": Completion("r2", "Lyon")}
    rows, aggregates = score_instances("generation", ["exact_match"], instances, requests, completions, ("accuracy",))
    assert {r.family for r in rows} == {"accuracy"} and {a.family for a in aggregates} == {"accuracy"}
    assert [r.instance_id for r in rows] == ["e1"]


@pytest.mark.parametrize(
    "name, gold, pred, expected",
    [
        # bigrams: gold {the cat, cat sat, sat on, on the, the mat}, pred shares 3 of its 5 -> P = R = F = 0.6
        ("rouge_2", "the cat sat on the mat", "the cat was on the mat", 0.6),
        # stemmed: {the cat, cat sat} vs {the cat, cat sit}: "cats" matches "cat", "sits" (sit) is not "sat"
        ("rouge_2", "The cats sat.", "the cat sits", 0.5),
        ("rouge_2", "a b", "c d", 0.0),
        ("bleu", "the cat sat on the mat", "the cat sat on the mat", 1.0),
        ("bleu", "the cat sat on the mat", "dogs run", 0.0),
    ],
)
def test_summarization_metrics(name, gold, pred, expected):
    assert get_reference_metric(name).fn(gold, pred) == pytest.approx(expected, abs=1e-9)
    assert get_reference_metric(name).family == "accuracy"
