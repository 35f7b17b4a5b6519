"""Shadow evaluation of candidate models on production traffic, one partition per traffic log file
(resources/shadow.yaml): the assets, their job and the sensor that picks up new or changed logs."""

from pathlib import Path

import dagster as dg

from holistic_dagster import quality
from holistic_dagster.config.redaction import errors_redacted
from holistic_dagster.defs import jobs
from holistic_dagster.defs.common import check_results, check_specs, runs_for_changes
from holistic_dagster.defs.partitions import traffic_partitions
from holistic_dagster.defs.resources import HolisticResource, ModelBackends
from holistic_dagster.errors import CatalogError
from holistic_dagster.shadow import log_key
from holistic_dagster.stages import shadow


def definitions(sensor_interval_seconds: int) -> dg.Definitions:
    shadow_job = dg.define_asset_job(
        jobs.SHADOW_JOB,
        selection=jobs.AssetSelection.groups("shadow"),
        description="Shadow evaluation of a production traffic log: its records (PII removed), the candidates' "
        "answers to the same prompts, the judge's verdicts and win rates (resources/shadow.yaml).",
    )
    return dg.Definitions(
        assets=shadow_assets(), jobs=[shadow_job], sensors=[make_traffic_sensor(shadow_job, sensor_interval_seconds)]
    )


def shadow_assets() -> list[dg.AssetsDefinition]:
    """Shadow evaluation of candidate models on production traffic, one partition per traffic log file
    (resources/shadow.yaml): the log's records with PII removed, the candidates' answers to the same prompts,
    and the judge's verdicts with each candidate's win rate against production per traffic slice."""

    def _log(context: dg.AssetExecutionContext, holistic: HolisticResource):
        spec = holistic.deployment().shadow()
        key = context.partition_key
        return spec, key, holistic.stage(context.run.run_id)

    @dg.asset(
        key=["shadow", "traffic"],
        partitions_def=traffic_partitions,
        group_name="shadow",
        kinds={"duckdb"},
        check_specs=check_specs(["shadow", "traffic"], "shadow_traffic"),
    )
    def traffic(context: dg.AssetExecutionContext, holistic: HolisticResource):
        """The traffic log's requests and production's answers (OpenAI chat/completions or completions shape),
        with the configured PII fields dropped and PII patterns replaced before anything is stored."""
        spec, log, stage = _log(context, holistic)
        path = traffic_log_path(holistic.deployment().traffic_dir(), log)
        metadata = shadow.load_traffic(stage, spec, log, path)
        yield dg.MaterializeResult(
            metadata={
                **metadata,
                "slices": dg.MetadataValue.json(metadata["slices"]),
                "quarantined_lines": dg.MetadataValue.json(metadata["quarantined_lines"]),
                "path": dg.MetadataValue.path(str(path)),
            }
        )
        yield from check_results(quality.check_traffic(stage.warehouse, log, spec.pii.policy), "shadow_traffic")

    @dg.asset(
        key=["shadow", "answers"],
        partitions_def=traffic_partitions,
        group_name="shadow",
        kinds={"duckdb"},
        deps=[dg.AssetKey(["shadow", "traffic"])],
        pool=jobs.MODEL_REQUESTS_POOL,
    )
    def answers(context: dg.AssetExecutionContext, holistic: HolisticResource, model_backends: ModelBackends):
        """Each candidate model's answers to the log's prompts (greedy), through the completion cache."""
        spec, log, _ = _log(context, holistic)
        stage = holistic.stage(context.run.run_id, model_backends)
        with errors_redacted():
            metadata = shadow.answer_traffic(stage, spec, log)
        return dg.MaterializeResult(metadata={k: dg.MetadataValue.json(v) for k, v in metadata.items()})

    @dg.asset(
        key=["shadow", "verdicts"],
        partitions_def=traffic_partitions,
        group_name="shadow",
        kinds={"duckdb"},
        deps=[dg.AssetKey(["shadow", "answers"])],
        check_specs=check_specs(["shadow", "verdicts"], "shadow_verdicts"),
    )
    def verdicts(context: dg.AssetExecutionContext, holistic: HolisticResource, model_backends: ModelBackends):
        """The judge's comparison of each candidate answer with production's (both position orders), and each
        candidate's win rate against production per traffic slice with a 95% bootstrap CI."""
        spec, log, _ = _log(context, holistic)
        stage = holistic.stage(context.run.run_id, model_backends)
        with errors_redacted():
            metadata = shadow.judge_traffic(stage, spec, log)
        yield dg.MaterializeResult(
            metadata={k: dg.MetadataValue.json(v) if isinstance(v, dict) else v for k, v in metadata.items()}
        )
        yield from check_results(
            quality.check_shadow_verdicts(stage.warehouse, log, spec.max_failure_rate), "shadow_verdicts"
        )

    return [traffic, answers, verdicts]


def traffic_log_path(directory: Path, log: str) -> Path:
    """The log file whose partition key is `log` (holistic_dagster.shadow.log_key of its name)."""
    found = [p for p in sorted(directory.glob("*.jsonl")) if log_key(p) == log]
    if not found:
        raise CatalogError(f"no traffic log for partition {log!r} in {directory}")
    return found[0]


def make_traffic_sensor(shadow_job, interval_seconds: int):
    @dg.sensor(
        name="traffic_logs",
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=interval_seconds,
        jobs=[shadow_job],
    )
    def traffic_logs(context: dg.SensorEvaluationContext, holistic: HolisticResource):
        """New or changed traffic log files (*.jsonl in shadow.yaml's traffic_dir) -> a partition each and a run
        of the shadow evaluation (traffic, the candidates' answers, the judge's verdicts)."""
        try:
            directory = holistic.deployment().traffic_dir()
        except CatalogError as e:
            return dg.SkipReason(str(e))
        if not directory.is_dir():
            return dg.SkipReason(f"no traffic folder {directory} yet")
        marks = {}
        for path in sorted(directory.glob("*.jsonl")):
            stat = path.stat()
            marks[log_key(path)] = f"{stat.st_size}:{stat.st_mtime_ns}"
        return runs_for_changes(
            context,
            marks,
            shadow_job,
            traffic_partitions,
            lambda key, mark: f"{key}:{mark}",
            "no new or changed traffic logs",
        )

    return traffic_logs
