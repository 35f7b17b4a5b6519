"""Automation: the model registry sensor (new models, new revisions, new suite versions -> runs) and the
schedule that re-evaluates stale partitions. Scores, leaderboard, regressions and report then follow by
declarative automation (see defs/assets.py)."""

from __future__ import annotations

import json

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    MultiPartitionKey,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    schedule,
    sensor,
)

from holistic_dagster.catalog import Catalog, load_models
from holistic_dagster.defs.partitions import model_partitions, version_partitions
from holistic_dagster.defs.watch import model_identity
from holistic_dagster.settings import automation_config


def suite_assets(catalog: Catalog, version: str, stages: tuple[str, ...]) -> list[AssetKey]:
    """The assets of the suite version's scenarios (a run covers the suite's scenarios, not the catalog's)."""
    return [AssetKey([s, stage]) for s in catalog.suite(version).scenarios for stage in stages]


EVALUATE = ("prompts", "completions", "scores")


def datasets_ready(instance, catalog: Catalog, version: str) -> bool:
    """Every scenario of the version has its dataset materialized for that version."""
    return all(
        version in instance.get_materialized_partitions(AssetKey([s, "dataset"]))
        for s in catalog.suite(version).scenarios
    )


def make_registry_sensor(datasets_job, evaluate_job):
    @sensor(
        name="model_registry",
        default_status=DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=30,
        jobs=[datasets_job, evaluate_job],
    )
    def model_registry(context: SensorEvaluationContext):
        """Watches resources/models.yaml (and, for entries with `watch: true`, the TGI server's /info or the
        OpenAI-compatible server's /v1/models) and assets/suites/. A new model or a new revision of one is
        evaluated on the current suite version; a new suite version is evaluated for every registered model
        (its datasets first). The cursor remembers what was seen: the first tick records the registry as it
        is and requests nothing (no run flood), a tick with nothing new requests nothing, and run keys make
        a repeated request a no-op."""
        catalog = Catalog()
        models = load_models()
        versions = catalog.suite_versions()
        current = catalog.newest_version()
        seen = json.loads(context.cursor) if context.cursor else None
        identities = {}
        for name, spec in models.items():
            identity, note = model_identity(spec, (seen or {}).get("models", {}).get(name))
            identities[name] = identity
            if note:
                context.log.warning(f"{name}: {note}")
        partitions = []
        if new := [m for m in models if not context.instance.has_dynamic_partition(model_partitions.name, m)]:
            partitions.append(model_partitions.build_add_request(new))
        if new := [v for v in versions if not context.instance.has_dynamic_partition(version_partitions.name, v)]:
            partitions.append(version_partitions.build_add_request(new))
        if seen is None:
            cursor = {"models": identities, "versions": versions, "pending": []}
            context.log.info(f"first tick: {len(models)} model(s) and {len(versions)} suite version(s) recorded")
            return SensorResult(dynamic_partitions_requests=partitions, cursor=json.dumps(cursor))
        pending = [tuple(p) for p in seen.get("pending", [])]
        for name, identity in identities.items():
            if seen["models"].get(name) != identity:
                reason = "new model" if name not in seen["models"] else "new revision"
                pending.append((name, current, identity, reason))
        for version in versions:
            if version not in seen["versions"]:
                pending += [(name, version, identities[name], "new suite version") for name in models]
        runs, waiting = [], []
        for version in sorted({p[1] for p in pending}):
            if not datasets_ready(context.instance, catalog, version):
                runs.append(
                    RunRequest(
                        job_name=datasets_job.name,
                        partition_key=version,
                        run_key=f"datasets:{version}",
                        asset_selection=suite_assets(catalog, version, ("dataset",)),
                    )
                )
        for name, version, identity, reason in dict.fromkeys(pending):
            if name not in models:
                continue  # removed from the registry meanwhile
            if not datasets_ready(context.instance, catalog, version):
                waiting.append((name, version, identity, reason))
                continue
            runs.append(
                RunRequest(
                    job_name=evaluate_job.name,
                    partition_key=MultiPartitionKey({"model": name, "version": version}),
                    run_key=f"evaluate:{name}:{version}:{identity}",
                    asset_selection=suite_assets(catalog, version, EVALUATE),
                    tags={"holistic/reason": reason},
                )
            )
        cursor = {"models": identities, "versions": versions, "pending": waiting}
        if not runs and not partitions:
            return SkipReason("model registry and suites unchanged")
        return SensorResult(run_requests=runs, dynamic_partitions_requests=partitions, cursor=json.dumps(cursor))

    return model_registry


def make_stale_schedule(evaluate_job, stale_partitions):
    @schedule(
        name="rerun_stale",
        cron_schedule=automation_config()["rerun_stale_cron"],
        job=evaluate_job,
        default_status=DefaultScheduleStatus.RUNNING,
    )
    def rerun_stale(context: ScheduleEvaluationContext):
        """Re-evaluates every model x version partition whose prompts or scores were produced by an older code
        version of their scenario (its YAML or template changed) or from an older dataset materialization."""
        stale = stale_partitions(context.instance)
        if not stale:
            return SkipReason("nothing stale")
        catalog = Catalog()
        tick_time = context.scheduled_execution_time.isoformat()
        return [
            RunRequest(
                partition_key=MultiPartitionKey({"model": model, "version": version}),
                run_key=f"stale:{model}:{version}:{tick_time}",
                asset_selection=suite_assets(catalog, version, EVALUATE),
                tags={"holistic/reason": "stale: " + ", ".join(sorted(why))},
            )
            for (model, version), why in sorted(stale.items())
        ]

    return rerun_stale


def find_stale(instance, code_versions: dict[str, str], scenarios: list[str]) -> dict[tuple[str, str], set[str]]:
    """{(model, version): reasons} for every evaluated partition whose prompts were built by another code
    version of the scenario than the current one, or from another data version of the dataset than the
    latest."""

    def history(key: AssetKey, partition: str, limit: int = 1):
        return instance.fetch_materializations(
            AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=limit
        ).records

    stale: dict[tuple[str, str], set[str]] = {}
    for scenario in scenarios:
        prompts_key, dataset_key = AssetKey([scenario, "prompts"]), AssetKey([scenario, "dataset"])
        for partition in instance.get_materialized_partitions(prompts_key):
            # a model x version key reads "<model>|<version>" (dimensions in alphabetical order)
            model, version = partition.split("|") if "|" in partition else (None, None)
            records = history(prompts_key, partition)
            if not records or model is None:
                continue
            prompts = records[0].asset_materialization
            reasons = set()
            if prompts.tags.get("dagster/code_version") != code_versions.get(scenario):
                reasons.add(f"{scenario} definition changed")
            # the dataset materialization the prompts were built from, against the latest one, by data version
            used = prompts.tags.get(f"dagster/input_event_pointer/{scenario}/dataset")
            datasets = history(dataset_key, version, limit=100)
            versions = {str(r.storage_id): r.asset_materialization.tags.get("dagster/data_version") for r in datasets}
            if used and datasets and versions.get(used) != versions[str(datasets[0].storage_id)]:
                reasons.add(f"{scenario} dataset changed")
            if reasons:
                stale.setdefault((model, version), set()).update(reasons)
    return stale
