"""Accuracy metrics with HELM's definitions (helm/benchmark/metrics/evaluate_reference_metrics.py)."""

from __future__ import annotations

import re
import string

from holistic_dagster.metrics.registry import reference_metric

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_FINAL_NUMBER = re.compile(r"-?[\d,]+(?:.\d+)?")  # HELM's pattern, unescaped dot included


def normalize_text(text: str) -> str:
    """HELM's (QuAC's) normalisation: lower case, drop punctuation, drop articles, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _answered(pred: str) -> bool:
    """HELM strips a completion before scoring it, and an empty prediction never matches: neither does one
    of whitespace only."""
    return bool(pred.strip())


@reference_metric("exact_match", "the prediction equals a correct reference (whitespace stripped)")
def exact_match(gold: str, pred: str) -> float:
    return float(_answered(pred) and gold.strip() == pred.strip())


@reference_metric("quasi_exact_match", "equal after normalisation (lower case, no punctuation, no articles, one space)")
def quasi_exact_match(gold: str, pred: str) -> float:
    return float(_answered(pred) and normalize_text(gold) == normalize_text(pred))


@reference_metric("prefix_exact_match")
def prefix_exact_match(gold: str, pred: str) -> float:
    """The prediction starts with the gold answer ("Yes, Elmendorf" for "Yes")."""
    return float(_answered(pred) and pred.strip().startswith(gold.strip()))


@reference_metric("quasi_prefix_exact_match")
def quasi_prefix_exact_match(gold: str, pred: str) -> float:
    """prefix_exact_match on normalised text: "the Yes! Elmendorf" starts with "yes"."""
    return float(_answered(pred) and normalize_text(pred).startswith(normalize_text(gold)))


@reference_metric("f1_score")
def f1_score(gold: str, pred: str) -> float:
    """Set-based token F1 over normalised words (HELM uses nltk's f_measure on word sets)."""
    g, p = set(normalize_text(gold).split()), set(normalize_text(pred).split())
    common = len(g & p)
    if not g or not p or not common:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def final_number(text: str) -> str:
    matches = _FINAL_NUMBER.findall(text)
    return matches[-1].replace(",", "") if matches else ""


@reference_metric("final_number_exact_match")
def final_number_exact_match(gold: str, pred: str) -> float:
    """The last number in the prediction equals the last number in the gold answer (GSM8K)."""
    return exact_match(final_number(gold), final_number(pred))
