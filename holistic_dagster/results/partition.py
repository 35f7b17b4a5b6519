"""One model x scenario partition of a suite version as its readers want it whole (the HELM exporter): the
original instances it scored, its prompts and completions, its per-instance scores (originals and worst case), its
scenario metrics, where it was imported from, and its provenance."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import (
    Completions,
    ImportedRuns,
    Instances,
    InstanceScores,
    Prompts,
    ScenarioMetrics,
)


@dataclass
class PartitionRecord:
    instances: pd.DataFrame  # the original instances scored
    prompts: pd.DataFrame  # by instance, the unscored choice first
    completions: pd.DataFrame  # indexed by request_id
    scores: pd.DataFrame  # per instance, unperturbed
    worst: pd.DataFrame  # per instance, the worst case over perturbations
    scenario_metrics: pd.DataFrame  # unperturbed, defined
    imported: pd.DataFrame  # the HELM runs it was imported from (none: evaluated here)
    provenance: pd.DataFrame


def partition_record(store: ResultStore, version: str, scenario: str, model: str) -> PartitionRecord:
    scores = InstanceScores(store)
    return PartitionRecord(
        instances=Instances(store).scored_originals(version, scenario, model),
        prompts=Prompts(store).of_partition(version, scenario, model),
        completions=Completions(store).where(version=version, scenario=scenario, model=model).set_index("request_id"),
        scores=scores.values(version, scenario, model, ""),
        worst=scores.values(version, scenario, model, "worst"),
        scenario_metrics=ScenarioMetrics(store).unperturbed(version, scenario, model),
        imported=ImportedRuns(store).where(version=version, scenario=scenario, model=model)[
            ["subset", "run_spec", "description"]
        ],
        provenance=ScenarioMetrics(store).provenance(version, scenario, model),
    )


def scored_partitions(store: ResultStore, version: str) -> pd.DataFrame:
    """(model, scenario) of every partition of the version that has scores on its whole draw, in that order (an
    efficient evaluation's partition is left out: what it has beyond its anchors is an estimate, which a HELM run's
    stats could not mark as one)."""
    return InstanceScores(store).full_partitions(version)
