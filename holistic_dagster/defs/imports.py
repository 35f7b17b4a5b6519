"""Partitions imported from HELM (holistic_dagster.helm) in Dagster: the model and version partitions added, and
per imported scenario a runless materialization of its completions and scores assets whose metadata names the HELM
run folder and its files' checksums. The UI then shows them beside evaluated partitions, marked as imported; the
stale-partition schedule, which follows prompts materializations, leaves them alone."""

from __future__ import annotations

from dagster import AssetKey, AssetMaterialization, DagsterInstance, MetadataValue, MultiPartitionKey

from holistic_dagster.defs.jobs import MODEL_STAGES
from holistic_dagster.defs.partitions import model_partitions, version_partitions
from holistic_dagster.warehouse.rows import json_list

STAGES = MODEL_STAGES[1:]  # what an imported run has: completions and scores (not our prompts)


def record_imported(instance: DagsterInstance, version: str, parts, scenarios_with_assets: set[str]) -> list[str]:
    """Records the imported partitions; returns the scenarios that have no asset here (not in the catalog)."""
    for name, keys in ((model_partitions.name, {p.model for p in parts}), (version_partitions.name, {version})):
        new = sorted(k for k in keys if not instance.has_dynamic_partition(name, k))
        if new:
            instance.add_dynamic_partitions(name, new)
    missing = []
    for part in parts:
        if part.scenario not in scenarios_with_assets:
            missing.append(part.scenario)
            continue
        runs = part.frames["imported_runs"]
        metadata = {
            "imported_from": "HELM",
            "helm_runs": MetadataValue.json(
                [{"run": r.run_name, "folder": r.folder, "files": json_list(r.files)} for r in runs.itertuples()]
            ),
            "instances": int(part.frames["instance_scores"]["instance_id"].nunique()),
        }
        for stage in STAGES:
            instance.report_runless_asset_event(
                AssetMaterialization(
                    asset_key=AssetKey([part.scenario, stage]),
                    partition=MultiPartitionKey({"model": part.model, "version": version}),
                    description=f"imported from HELM ({len(runs)} run folder(s))",
                    metadata=metadata,
                )
            )
    return sorted(set(missing))
