"""What the report's predictions pages and the CI gate's examples read: the evaluated originals that some model was
scored on, and for a set of them, their perturbed copies, every model's requests with their completions, and every
per-instance score (three queries for a whole version)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from holistic_dagster.metrics import lower_is_better
from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import Completions, Instances, InstanceScores
from holistic_dagster.warehouse.records import CompletionsRow, InstanceScoresRow, InstancesRow, PromptsRow


def scored_originals(store: ResultStore, version: str) -> pd.DataFrame:
    """(scenario, instance_id) of every original evaluated instance that some model was scored on."""
    return InstanceScores(store).scored_originals(version)


@dataclass(frozen=True)
class PredictionRows:
    """As the tables' typed records: a renamed column is named by the type checker in every reader."""

    instances: list[InstancesRow]  # the originals and their perturbed copies
    requests: list[tuple[PromptsRow, CompletionsRow]]  # every model's requests of those instances, with completions
    scores: list[InstanceScoresRow]  # every per-instance score of those instances


def prediction_rows(store: ResultStore, version: str, sample: dict[str, list[str]]) -> PredictionRows:
    """The rows behind the predictions of `sample` ({scenario: [original instance id]})."""
    originals = [f"{scenario}\x1f{i}" for scenario, ids in sample.items() for i in ids]
    instances = Instances(store).with_copies(version, originals)
    variants = [f"{r.scenario}\x1f{r.instance_id}" for r in instances]
    requests = Completions(store).with_prompts(version, variants)
    scores = InstanceScores(store).of_instances(version, variants)
    return PredictionRows(instances, requests, scores)


def worse_instances(
    store: ResultStore, version: str, scenario: str, family: str, metric: str, baseline: str, candidate: str
) -> pd.DataFrame:
    """The original instances where the candidate scored worse than the baseline on a metric: instance_id, input,
    both predictions and the size of the difference."""
    return InstanceScores(store).worse(version, scenario, family, metric, baseline, candidate, lower_is_better(metric))
