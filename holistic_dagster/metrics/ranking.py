"""Passage ranking (HELM's MS MARCO, TREC Deep Learning 2019 passage track), adapter method "ranking_binary".

An instance is one query; its references are the candidate passages in first-stage (BM25) order,
`metadata["relevance"]` the graded TREC judgement (0-3, 0 for unjudged) per reference index and
`metadata["first_stage_rank"]` the BM25 rank (1-based) per reference index. The model is asked, once per
candidate, whether the passage answers the query; the candidates are then ordered by its answers (HELM's
RankingMetric, `binary_ranking_key`) and the order is scored as trec_eval scores a run:
- rr_at_10: trec_eval's recip_rank over the top 10 (HELM's RR@10), with relevance binarized as HELM does for
  the TREC track: grades 2-3 are relevant, 0-1 are not (HELM's binarize_dict maps 1 to 0); MS MARCO's dev qrels
  (the regular track) have grade 1 alone, relevant (`metadata["relevant_from"]`, from the scenario's format);
- ndcg_at_10: trec_eval's ndcg_cut.10 with graded relevance (gain = the grade).
The same two measures of the first-stage order (bm25_*) are a baseline, the same for every model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from holistic_dagster.adaptation.methods.ranking_binary import METHOD, candidate_name, model_order
from holistic_dagster.metrics.registry import declare, scorer
from holistic_dagster.records import Instance, InstanceScore, ScenarioMetric

if TYPE_CHECKING:
    from holistic_dagster.metrics.scoring import ScoringInput

CUTOFF = 10  # RR@10, NDCG@10
RELEVANT_FROM = 2  # TREC DL 2019 passage qrels: 2 (highly relevant) and 3 (perfectly relevant) count as relevant

declare("rr_at_10", "accuracy", "reciprocal rank of the first relevant passage in the model's top 10",
        per_instance=True, mean_of_instances=True)  # fmt: skip
declare("ndcg_at_10", "accuracy", "NDCG@10 of the model's order, graded relevance as gain",
        per_instance=True, mean_of_instances=True)  # fmt: skip
declare("bm25_rr_at_10", "accuracy", "rr_at_10 of the first-stage (BM25) order: a baseline, the same for every model",
        per_instance=True, mean_of_instances=True)  # fmt: skip
declare("bm25_ndcg_at_10", "accuracy", "ndcg_at_10 of the first-stage (BM25) order: a baseline, the same for every "
        "model", per_instance=True, mean_of_instances=True)  # fmt: skip
METRIC_NAMES = ("rr_at_10", "ndcg_at_10", "bm25_rr_at_10", "bm25_ndcg_at_10")


def first_stage_order(instance: Instance) -> list[int]:
    """The reference indices in first-stage (BM25) order: ascending `metadata["first_stage_rank"]`, candidates
    without a rank (missing, None or < 1) last; ties and unranked candidates by reference index. Without the
    metadata, the references' own order (they are stored in first-stage order)."""
    n = len(instance.references)
    ranks = instance.metadata.get("first_stage_rank")
    if ranks is None:
        return list(range(n))

    def key(i: int) -> tuple[bool, int, int]:
        rank = ranks[i] if i < len(ranks) else None
        unranked = rank is None or rank < 1
        return unranked, 0 if unranked else int(rank), i

    return sorted(range(n), key=key)


def reciprocal_rank(ranked_grades: Sequence[int], k: int = CUTOFF, relevant_from: int = RELEVANT_FROM) -> float:
    """trec_eval's recip_rank limited to the top k: 1/r for the 1-based rank r of the first candidate whose grade
    is >= relevant_from among the first k, else 0. `ranked_grades`: the candidates' grades in ranked order."""
    for i, grade in enumerate(ranked_grades[:k]):
        if grade >= relevant_from:
            return 1.0 / (i + 1)
    return 0.0


def ndcg(ranked_grades: Sequence[int], k: int = CUTOFF) -> float:
    """trec_eval's ndcg_cut.k: DCG@k / IDCG@k with gain = the grade, DCG@k = sum over ranks r = 1..k of
    grade_r / log2(r + 1) (grades <= 0 add nothing); IDCG@k the same sum over the candidates' positive grades
    sorted descending (trec_eval's ideal comes from the qrels: here the same candidates' judgements). 0.0 when
    no candidate has a positive grade: trec_eval leaves the DCG (then 0) undivided, and pytrec_eval returns no
    value for a query without a positive judgement (HELM keeps only queries with a grade-2/3 passage).
    `ranked_grades`: the candidates' grades in ranked order."""
    dcg = _dcg(ranked_grades[:k])
    ideal = _dcg(sorted((g for g in ranked_grades if g > 0), reverse=True)[:k])
    return dcg / ideal if ideal > 0 else 0.0


def _dcg(grades: Iterable[int]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(grades) if g > 0)  # 0-based i: rank i + 1


def relevance_grades(instance: Instance) -> list[int]:
    """The graded judgement of each reference, by reference index (metadata["relevance"])."""
    grades = instance.metadata.get("relevance")
    if grades is None or len(grades) != len(instance.references):
        found = "none" if grades is None else f"{len(grades)} grades"
        raise ValueError(
            f"instance {instance.instance_id}: ranking needs metadata['relevance'], one grade per reference "
            f"({len(instance.references)}), found {found}"
        )
    return [int(g) for g in grades]


@scorer("ranking", "accuracy", METRIC_NAMES, methods=(METHOD,))
def ranking(given: ScoringInput) -> tuple[list[InstanceScore], list[ScenarioMetric]]:
    """Per query, RR@10 and NDCG@10 of the model's order and of the first-stage order. Each row points at the
    request of the order's top candidate and names that candidate; scenario values are the rows' means."""
    rows: list[InstanceScore] = []
    for p in given.predictions:
        inst = p.instance
        grades = relevance_grades(inst)
        by_index = {r.choice_index: r for r in p.requests if r.choice_index is not None and not r.is_null_context}
        for prefix, order in (("", model_order(p.requests, given.completions)), ("bm25_", first_stage_order(inst))):
            ranked = [grades[i] for i in order]
            top = order[0] if order else None
            carrier = by_index.get(top, p.carrier).request_id
            named = candidate_name(inst, top) if top is not None else "no candidate"
            relevant_from = int(inst.metadata.get("relevant_from", RELEVANT_FROM))  # MS MARCO dev: 1
            for name, value in (
                ("rr_at_10", reciprocal_rank(ranked, relevant_from=relevant_from)),
                ("ndcg_at_10", ndcg(ranked)),
            ):
                rows.append(InstanceScore(inst.instance_id, prefix + name, "accuracy", value, carrier, named))
    return rows, []
