"""Passage ranking (MS MARCO TREC DL 2019, adapter method ranking_binary): RR@10 and NDCG@10 on hand-computed
cases, HELM's order of the candidates, and the scorer on hand-built predictions.

Every value below was also checked, while writing this module, against HELM's RankingMetric run with
pytrec_eval (trec_eval's recip_rank and ndcg_cut.10); these tests do not need either.
"""

from __future__ import annotations

import math

import pytest

from holistic_dagster.adaptation.methods.ranking_binary import binary_ranking_key, model_order
from holistic_dagster.metrics import METRICS, SCORERS
from holistic_dagster.metrics.ranking import first_stage_order, ndcg, ranking, reciprocal_rank
from holistic_dagster.metrics.scoring import Prediction, ScoringInput
from holistic_dagster.records import Completion, Instance, Reference, Request, SourceFile

SRC = SourceFile("test://msmarco", "0", "test")


def test_reciprocal_rank_counts_grades_two_and_three_in_the_top_10():
    # ranked grades 0, 1, 3, 2, 0: rank 2 has grade 1 (not relevant on this track), rank 3 grade 3 -> 1/3
    assert reciprocal_rank([0, 1, 3, 2, 0]) == pytest.approx(1 / 3)
    # only grade-1 passages in the top 10 (a grade 3 at rank 11 is past the cutoff) -> 0
    assert reciprocal_rank([1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 3]) == 0.0
    # the first relevant passage at rank 11 -> 0 at k=10, 1/11 at k=11
    assert reciprocal_rank([0] * 10 + [2]) == 0.0
    assert reciprocal_rank([0] * 10 + [2], k=11) == pytest.approx(1 / 11)
    # relevant_from=1 (binary tracks): grade 1 at rank 2 -> 1/2; grade 2 at rank 1 -> 1
    assert reciprocal_rank([0, 1, 3], relevant_from=1) == pytest.approx(1 / 2)
    assert reciprocal_rank([2, 0]) == 1.0
    assert reciprocal_rank([]) == 0.0


def test_ndcg_at_10_by_hand():
    # ranked grades 0, 1, 3, 2, 0 (gain = grade, discount log2(rank + 1)):
    #   DCG  = 0/log2(2) + 1/log2(3) + 3/log2(4) + 2/log2(5) + 0/log2(6)
    #        = 0 + 0.6309298 + 1.5 + 0.8613531 + 0 = 2.9922829
    #   IDCG = grades sorted 3, 2, 1: 3/log2(2) + 2/log2(3) + 1/log2(4) = 3 + 1.2618595 + 0.5 = 4.7618595
    #   NDCG = 2.9922829 / 4.7618595 = 0.6283854 (trec_eval ndcg_cut.10: 0.6283853745012301)
    dcg = 1 / math.log2(3) + 3 / math.log2(4) + 2 / math.log2(5)
    idcg = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert ndcg([0, 1, 3, 2, 0]) == pytest.approx(dcg / idcg)
    assert ndcg([0, 1, 3, 2, 0]) == pytest.approx(0.6283854, abs=1e-7)
    # the cut applies to both sums: ranked grades 1, 0, 2, 0 x 8, 3, 3 (the two 3s at ranks 12 and 13)
    #   DCG@10  = 1/log2(2) + 2/log2(4) = 1 + 1 = 2
    #   IDCG@10 = 3/log2(2) + 3/log2(3) + 2/log2(4) + 1/log2(5) = 3 + 1.8927893 + 1 + 0.4306766 = 6.3234659
    #   NDCG@10 = 2 / 6.3234659 = 0.3162823 (trec_eval: 0.31628225048007114)
    assert ndcg([1, 0, 2] + [0] * 8 + [3, 3]) == pytest.approx(0.3162823, abs=1e-7)
    # grade 1 is a gain (only RR binarizes): ranked 0, 1, 0 -> (1/log2(3)) / (1/log2(2)) = 0.6309298
    assert ndcg([0, 1, 0]) == pytest.approx(1 / math.log2(3))
    assert ndcg([3, 2, 1, 0]) == 1.0  # the ideal order
    assert ndcg([0, 0, 0]) == 0.0  # nothing relevant: no ideal DCG to divide by
    assert ndcg([]) == 0.0


def test_binary_ranking_key_follows_helm():
    assert binary_ranking_key(" Yes", -0.25) == (2, -0.25)
    assert binary_ranking_key("YES\n", -0.25) == (2, -0.25)  # stripped and lower-cased
    assert binary_ranking_key(" No", -0.25) == (1, 0.25)
    assert binary_ranking_key(" Maybe", -0.25) == (0, 0.25)
    assert binary_ranking_key(" Yes.", -0.25) == (0, 0.25)  # not exactly "yes": another output


def _requests(instance_id: str, n: int) -> list[Request]:
    return [Request(f"{instance_id}-r{i}", instance_id, "generate", f"prompt {i}", choice_index=i) for i in range(n)]


def test_model_order_yes_then_uncertain_no_then_confident_no_then_others():
    answers = [
        (" No", -0.1, ""),  # 0: a confident No (p = 0.90)
        (" Yes", -0.5, ""),  # 1: a Yes (p = 0.61)
        ("Maybe", -2.0, ""),  # 2: another output
        (" YES", -0.05, ""),  # 3: the most confident Yes (p = 0.95)
        ("No", -1.2, ""),  # 4: an uncertain No (p = 0.30)
        (" Yes", 0.0, "timeout"),  # 5: the request failed
        ("", -0.3, ""),  # 6: another output
    ]
    requests = _requests("q", len(answers))
    completions = {
        r.request_id: Completion(r.request_id, text, logprob=lp, error=err)
        for r, (text, lp, err) in zip(requests, answers)
    }
    # Yes by descending logprob: 3 (-0.05), 1 (-0.5); No by ascending logprob (least sure first): 4 (-1.2),
    # 0 (-0.1); others by ascending logprob, as HELM's (0, -logprob): 2 (-2.0), 6 (-0.3); the failure last: 5
    assert model_order(requests, completions) == [3, 1, 4, 0, 2, 6, 5]
    assert model_order(reversed(requests), completions) == [3, 1, 4, 0, 2, 6, 5]


def test_model_order_breaks_ties_by_reference_index():
    requests = _requests("q", 4)
    answers = [(" Yes", -0.4), (" No", -0.4), (" Yes", -0.4), (" No", -0.4)]
    completions = {r.request_id: Completion(r.request_id, t, logprob=lp) for r, (t, lp) in zip(requests, answers)}
    assert model_order(requests, completions) == [0, 2, 1, 3]
    assert model_order(requests[::-1], completions) == [0, 2, 1, 3]
    null = Request("q-null", "q", "score", "x", choice_index=0, is_null_context=True)
    assert model_order([*requests, null], completions) == [0, 2, 1, 3]  # a null-context request is no candidate
    with pytest.raises(ValueError, match="two requests for candidate 0"):
        model_order([*requests, Request("q-dup", "q", "generate", "p", choice_index=0)], completions)


def _instance(instance_id: str, grades: list[int], **metadata) -> Instance:
    references = tuple(Reference(f"passage {i}", g >= 2) for i, g in enumerate(grades))
    return Instance(instance_id, "test", f"query {instance_id}", references, SRC, "0", metadata={
        "relevance": grades, **metadata})  # fmt: skip


def test_first_stage_order():
    inst = _instance("q", [0, 0, 0, 0, 0], first_stage_rank=[3, 1, 2, None, 0])
    assert first_stage_order(inst) == [1, 2, 0, 3, 4]  # unranked (None, 0) last, by reference index
    assert first_stage_order(_instance("q", [0, 0, 0])) == [0, 1, 2]  # no ranks: the references' order


def test_ranking_metrics_are_declared_as_accuracy_rows():
    for name in ("rr_at_10", "ndcg_at_10", "bm25_rr_at_10", "bm25_ndcg_at_10"):
        m = METRICS[name]
        assert (m.family, m.per_instance, m.mean_of_instances, m.headline, m.bounds) == (
            "accuracy", True, True, False, (0.0, 1.0))  # fmt: skip
        assert not m.lower_is_better
    s = SCORERS["ranking"]
    assert (s.family, s.methods, s.fn) == ("accuracy", ("ranking_binary",), ranking)
    assert set(s.metrics) == {"rr_at_10", "ndcg_at_10", "bm25_rr_at_10", "bm25_ndcg_at_10"}


def _prediction(inst: Instance, answers: list[tuple[str, float]]) -> tuple[Prediction, dict[str, Completion]]:
    requests = _requests(inst.instance_id, len(answers))
    completions = {r.request_id: Completion(r.request_id, t, logprob=lp) for r, (t, lp) in zip(requests, answers)}
    first = completions[requests[0].request_id]
    return Prediction(inst, first.text, math.exp(first.logprob), 0.0, requests[0], tuple(requests)), completions


def test_ranking_scorer_by_hand():
    # query a: 5 candidates in BM25 order, grades 0, 1, 0, 3, 2
    a = _instance("a", [0, 1, 0, 3, 2], first_stage_rank=[1, 2, 3, 4, 5], docids=[10, 11, 12, 13, 14])
    pa, ca = _prediction(a, [(" No", -0.2), (" Yes", -0.9), (" No", -2.3), (" Yes", -0.1), (" No", -0.7)])
    # model order: Yes 3 (-0.1), 1 (-0.9); No 2 (-2.3), 4 (-0.7), 0 (-0.2) -> grades 3, 1, 0, 2, 0
    #   RR@10 = 1 (grade 3 at rank 1)
    #   DCG  = 3/1 + 1/log2(3) + 0 + 2/log2(5) + 0 = 3 + 0.6309298 + 0.8613531 = 4.4922829
    #   IDCG = 3/1 + 2/log2(3) + 1/log2(4) = 4.7618595 -> NDCG@10 = 0.9433884 (HELM + trec_eval: 0.94338837)
    # BM25 order 0..4 -> grades 0, 1, 0, 3, 2
    #   RR@10 = 1/4 (grade 3 at rank 4; the grade 1 at rank 2 does not count)
    #   DCG  = 1/log2(3) + 3/log2(5) + 2/log2(6) = 0.6309298 + 1.2920297 + 0.7737056 = 2.6966651
    #   NDCG@10 = 2.6966651 / 4.7618595 = 0.5663050 (HELM + trec_eval: 0.56630504)
    # query b: no docids; the model's top candidate is 1 (the only Yes), BM25's top is 2 (rank 1)
    b = _instance("b", [2, 0, 1], first_stage_rank=[2, 3, 1])
    pb, cb = _prediction(b, [(" No", -0.5), (" Yes", -1.0), ("No", -0.01)])
    # model order 1, 0, 2 -> grades 0, 2, 1: RR = 1/2; DCG = 2/log2(3) + 1/log2(4) = 1.2618595 + 0.5 = 1.7618595,
    #   IDCG = 2 + 1/log2(3) = 2.6309298 -> NDCG = 0.6696718 (HELM + trec_eval: 0.66967182)
    # BM25 order 2, 0, 1 -> grades 1, 2, 0: RR = 1/2; DCG = 1 + 2/log2(3) = 2.2618595 -> NDCG = 0.8597187
    #   (HELM + trec_eval: 0.85971870)
    rows, aggregates = ranking(ScoringInput("ranking_binary", [pa, pb], {**ca, **cb}))
    assert aggregates == []
    got = {(r.instance_id, r.metric): r for r in rows}
    assert len(got) == len(rows) == 8
    expected = {
        ("a", "rr_at_10"): (1.0, "a-r3", "docid 13"),
        ("a", "ndcg_at_10"): (0.9433884, "a-r3", "docid 13"),
        ("a", "bm25_rr_at_10"): (0.25, "a-r0", "docid 10"),
        ("a", "bm25_ndcg_at_10"): (0.5663050, "a-r0", "docid 10"),
        ("b", "rr_at_10"): (0.5, "b-r1", "reference 1"),
        ("b", "ndcg_at_10"): (0.6696718, "b-r1", "reference 1"),
        ("b", "bm25_rr_at_10"): (0.5, "b-r2", "reference 2"),
        ("b", "bm25_ndcg_at_10"): (0.8597187, "b-r2", "reference 2"),
    }
    for key, (value, request_id, named) in expected.items():
        row = got[key]
        assert row.value == pytest.approx(value, abs=1e-7), key
        assert (row.family, row.request_id, row.prediction, row.perturbation) == ("accuracy", request_id, named, "")


def test_ranking_scorer_needs_one_grade_per_reference():
    inst = Instance("q", "test", "query", (Reference("p0", False), Reference("p1", True)), SRC, "0",
                    metadata={"relevance": [0]})  # fmt: skip
    pred, completions = _prediction(inst, [(" No", -0.1), (" Yes", -0.1)])
    with pytest.raises(ValueError, match=r"one grade per reference \(2\), found 1 grades"):
        ranking(ScoringInput("ranking_binary", [pred], completions))
