"""Overlap metrics for generated summaries and translations.

- rouge_2: ROUGE-2 F-measure with Porter stemming, from Google's `rouge-score` (HELM's definition).
- bleu: sentence-level BLEU-4 from `sacrebleu` (its default tokenizer and exponential smoothing), in [0, 1].
  HELM's bleu_4 calls nltk's sentence_bleu on word_tokenize output, which needs downloaded tokenizer data
  and fails offline; sacrebleu is the reference implementation of BLEU and carries its own tokenizer.
"""

from __future__ import annotations

from functools import cache

from holistic_dagster.metrics import reference_metric


@cache
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rouge2"], use_stemmer=True)


@reference_metric("rouge_2", "ROUGE-2 F-measure (rouge-score, Porter stemming)")
def rouge_2(gold: str, pred: str) -> float:
    return float(_rouge().score(gold, pred)["rouge2"].fmeasure)


@reference_metric("bleu", "sentence BLEU-4 (sacrebleu), in [0, 1]")
def bleu(gold: str, pred: str) -> float:
    import sacrebleu

    return min(1.0, float(sacrebleu.sentence_bleu(pred, [gold]).score / 100))  # (1 + 4e-16 on a perfect match)
