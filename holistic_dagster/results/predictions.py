"""What the report's predictions pages and the CI gate's examples read: the evaluated originals that some model was
scored on, and for a set of them, their perturbed copies, every model's requests with their completions, and every
per-instance score (three queries for a whole version)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from holistic_dagster.metrics import lower_is_better
from holistic_dagster.warehouse import ResultStore

ORIGINAL_ID = "coalesce(nullif(original_instance_id, ''), instance_id)"  # an instance's original (itself if one)


def scored_originals(store: ResultStore, version: str) -> pd.DataFrame:
    """(scenario, instance_id) of every original evaluated instance that some model was scored on."""
    return store.df(
        "SELECT DISTINCT i.scenario, i.instance_id FROM instances i JOIN instance_scores s "
        "USING (version, scenario, instance_id) WHERE i.version = ? AND i.split = 'test' AND i.perturbation = ''",
        [version],
    )


def _among(scenario: str, instance_id: str) -> str:
    """SQL: the row's (scenario, instance id) is among a list parameter of "scenario<US>id" keys (pairs in one
    list parameter; the unit separator occurs in neither)."""
    return f"{scenario} || chr(31) || {instance_id} IN (SELECT unnest(?::VARCHAR[]))"


@dataclass(frozen=True)
class PredictionRows:
    instances: list[dict[str, Any]]  # the originals and their perturbed copies
    requests: list[dict[str, Any]]  # every model's requests of those instances, each with its completion
    scores: list[dict[str, Any]]  # every per-instance score of those instances


def prediction_rows(store: ResultStore, version: str, sample: dict[str, list[str]]) -> PredictionRows:
    """The rows behind the predictions of `sample` ({scenario: [original instance id]})."""
    originals = [f"{scenario}\x1f{i}" for scenario, ids in sample.items() for i in ids]
    instances = store.df(
        'SELECT scenario, instance_id, perturbation, original_instance_id, input, "references" FROM instances '
        f"WHERE version = ? AND {_among('scenario', ORIGINAL_ID)}",
        [version, originals],
    ).to_dict("records")
    variants = [f"{r['scenario']}\x1f{r['instance_id']}" for r in instances]
    requests = store.df(
        "SELECT p.scenario, p.model, p.instance_id, p.request_id, p.prompt, p.continuation, p.choice_index, "
        "c.text, c.logprob, c.tokens, c.logprobs, c.top_logprobs, c.finish_reason, c.error, c.latency_s "
        "FROM prompts p JOIN completions c USING (model, version, scenario, request_id) "
        f"WHERE p.version = ? AND {_among('p.scenario', 'p.instance_id')} "
        "ORDER BY p.model, p.instance_id, p.choice_index NULLS FIRST, p.request_id",
        [version, variants],
    ).to_dict("records")
    scores = store.df(
        "SELECT scenario, model, instance_id, family, metric, perturbation, value, request_id, prediction "
        f"FROM instance_scores WHERE version = ? AND {_among('scenario', 'instance_id')} "
        "ORDER BY model, instance_id, family, metric, perturbation",
        [version, variants],
    ).to_dict("records")
    return PredictionRows(instances, requests, scores)


def worse_instances(
    store: ResultStore, version: str, scenario: str, family: str, metric: str, baseline: str, candidate: str
) -> pd.DataFrame:
    """The original instances where the candidate scored worse than the baseline on a metric: instance_id, input,
    both predictions and the size of the difference."""
    worse = "c.value > b.value" if lower_is_better(metric) else "c.value < b.value"
    return store.df(
        "SELECT i.instance_id, i.input, b.prediction AS baseline_prediction, c.prediction AS candidate_prediction, "
        "abs(c.value - b.value) AS size FROM instance_scores b "
        "JOIN instance_scores c USING (version, scenario, instance_id, family, metric, perturbation) "
        "JOIN instances i USING (version, scenario, instance_id) "
        "WHERE b.version = ? AND b.scenario = ? AND b.family = ? AND b.metric = ? AND b.perturbation = '' "
        f"AND b.model = ? AND c.model = ? AND i.split = 'test' AND i.perturbation = '' AND {worse}",
        [version, scenario, family, metric, baseline, candidate],
    )
