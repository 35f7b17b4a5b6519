"""One model x scenario partition of a suite version as its readers want it whole (the HELM exporter): the
original instances it scored, its prompts and completions, its per-instance scores (originals and worst case), its
scenario metrics, where it was imported from, and its provenance."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from holistic_dagster.warehouse import ResultStore


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
    keys = [version, scenario, model]
    where = "version = ? AND scenario = ? AND model = ?"
    per_instance = "SELECT instance_id, metric, family, value FROM instance_scores WHERE " + where
    return PartitionRecord(
        instances=store.df(
            'SELECT instance_id, split, subset, input, "references", metadata FROM instances WHERE version = ? AND '
            "scenario = ? AND perturbation = '' AND instance_id IN "
            f"(SELECT instance_id FROM instance_scores WHERE {where})",
            [version, scenario, *keys],
        ),
        prompts=store.df(f"SELECT * FROM prompts WHERE {where} ORDER BY instance_id, choice_index NULLS FIRST", keys),
        completions=store.df(f"SELECT * FROM completions WHERE {where}", keys).set_index("request_id"),
        scores=store.df(per_instance + " AND perturbation = ''", keys),
        worst=store.df(per_instance + " AND perturbation = 'worst'", keys),
        scenario_metrics=store.df(
            "SELECT metric, family, value FROM scenario_metrics WHERE "
            f"{where} AND perturbation = '' AND value IS NOT NULL",
            keys,
        ),
        imported=store.df(f"SELECT subset, run_spec, description FROM imported_runs WHERE {where}", keys),
        provenance=store.df(
            "SELECT p.* FROM provenance p WHERE provenance_id IN (SELECT provenance_id FROM scenario_metrics "
            f"WHERE {where})",
            keys,
        ),
    )


def scored_partitions(store: ResultStore, version: str) -> pd.DataFrame:
    """(model, scenario) of every partition of the version that has scores on its whole draw, in that order (an
    efficient evaluation's partition is left out: what it has beyond its anchors is an estimate, which a HELM run's
    stats could not mark as one)."""
    return store.df(
        "SELECT DISTINCT model, scenario FROM instance_scores s WHERE version = ? AND NOT EXISTS (SELECT 1 FROM "
        "partial_evaluations p WHERE p.model = s.model AND p.version = s.version AND p.scenario = s.scenario) "
        "ORDER BY model, scenario",
        [version],
    )
