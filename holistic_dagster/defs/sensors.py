"""Automation: the model registry sensor (new models, new revisions, new suite versions -> runs) and the
schedule that re-evaluates stale partitions. Scores, leaderboard, regressions and report then follow by
declarative automation (see defs/assets.py). What to run is decided in holistic_dagster/automation.py; this
module only reads the Dagster instance and turns the decisions into requests."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import duckdb
from dagster import (
    AssetCheckSeverity,
    AssetKey,
    AssetRecordsFilter,
    DagsterEventType,
    DagsterRunStatus,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    MultiPartitionKey,
    RunRequest,
    RunsFilter,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    schedule,
    sensor,
)

from holistic_dagster.alerts.delivery import Alert, Outbox, deliver, send_alerts
from holistic_dagster.automation import planning as automation
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.defs.partitions import model_partitions, traffic_partitions, version_partitions
from holistic_dagster.defs.resources import HolisticResource
from holistic_dagster.defs.runner import fail_abandoned_runs
from holistic_dagster.errors import CatalogError
from holistic_dagster.shadow import log_key


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


def _evaluate_request(run: automation.EvaluateRun, catalog: Catalog, job_name: str | None = None) -> RunRequest:
    return RunRequest(
        job_name=job_name,
        partition_key=MultiPartitionKey({"model": run.model, "version": run.version}),
        run_key=run.run_key,
        asset_selection=suite_assets(catalog, run.version, EVALUATE),
        tags=run.tags,
    )


def make_registry_sensor(datasets_job, evaluate_job):
    @sensor(
        name="model_registry",
        default_status=DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=30,
        jobs=[datasets_job, evaluate_job],
    )
    def model_registry(context: SensorEvaluationContext, holistic: HolisticResource):
        """Watches the model registry the `holistic` resource names (resources/models.yaml; for entries with
        `watch: true`, also the TGI server's /info or the OpenAI-compatible server's /v1/models) and its
        catalog's suites/. What to run is decided by automation.plan_registry_tick."""
        catalog, models = holistic.catalog(), holistic.models()
        versions = catalog.suite_versions()
        previous = automation.read_cursor(context.cursor)
        identities, warnings = automation.model_identities(models, previous)
        for warning in warnings:
            context.log.warning(warning)
        plan = automation.plan_registry_tick(
            previous,
            identities,
            versions,
            catalog.newest_version(),
            lambda version: datasets_ready(context.instance, catalog, version),
        )
        for line in plan.log:
            context.log.info(line)
        partitions = []
        if new := [m for m in models if not context.instance.has_dynamic_partition(model_partitions.name, m)]:
            partitions.append(model_partitions.build_add_request(new))
        if new := [v for v in versions if not context.instance.has_dynamic_partition(version_partitions.name, v)]:
            partitions.append(version_partitions.build_add_request(new))
        cursor = automation.write_cursor(plan.cursor)
        if previous is None:  # the first tick records the registry
            return SensorResult(dynamic_partitions_requests=partitions, cursor=cursor)
        runs = [
            RunRequest(
                job_name=datasets_job.name,
                partition_key=run.version,
                run_key=run.run_key,
                asset_selection=suite_assets(catalog, run.version, ("dataset",)),
            )
            for run in plan.datasets
        ]
        runs += [_evaluate_request(run, catalog, evaluate_job.name) for run in plan.evaluations]
        if not runs and not partitions:
            return SkipReason("model registry and suites unchanged")
        return SensorResult(run_requests=runs, dynamic_partitions_requests=partitions, cursor=cursor)

    return model_registry


@sensor(name="abandoned_runs", default_status=DefaultSensorStatus.RUNNING, minimum_interval_seconds=60)
def abandoned_runs(context: SensorEvaluationContext):
    """Marks failed the in-process runs (`holistic demo` / `evaluate`) whose process was killed before it
    finished them: otherwise they show STARTED forever and hold back declarative automation."""
    failed = fail_abandoned_runs(context.instance)
    return SkipReason(f"marked failed: {', '.join(failed)}" if failed else "no abandoned runs")


def make_stale_schedule(evaluate_job, stale_partitions, cron_schedule: str):
    @schedule(
        name="rerun_stale",
        cron_schedule=cron_schedule,
        job=evaluate_job,
        default_status=DefaultScheduleStatus.RUNNING,
    )
    def rerun_stale(context: ScheduleEvaluationContext, holistic: HolisticResource):
        """Re-evaluates every model x version partition whose prompts or scores were produced by an older code
        version of their scenario (its YAML or template changed) or from an older dataset materialization."""
        stale = stale_partitions(context.instance)
        if not stale:
            return SkipReason("nothing stale")
        catalog = holistic.catalog()
        tick = context.scheduled_execution_time.isoformat()
        return [_evaluate_request(run, catalog) for run in automation.stale_runs(stale, tick)]

    return rerun_stale


def prompts_builds(instance, scenarios: list[str]) -> list[automation.PromptsBuild]:
    """The latest prompts materialization of every evaluated partition, as plain records for
    automation.find_stale."""

    def history(key: AssetKey, partition: str, limit: int = 1):
        return instance.fetch_materializations(
            AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=limit
        ).records

    builds = []
    for scenario in scenarios:
        prompts_key, dataset_key = AssetKey([scenario, "prompts"]), AssetKey([scenario, "dataset"])
        for partition in instance.get_materialized_partitions(prompts_key):
            # a model x version key reads "<model>|<version>" (dimensions in alphabetical order)
            if "|" not in partition or not (records := history(prompts_key, partition)):
                continue
            model, version = partition.split("|")
            tags = records[0].asset_materialization.tags
            datasets = history(dataset_key, version, limit=100)
            builds.append(
                automation.PromptsBuild(
                    scenario=scenario,
                    model=model,
                    version=version,
                    code_version=tags.get("dagster/code_version"),
                    # the dataset materialization the prompts were built from
                    dataset_used=tags.get(f"dagster/input_event_pointer/{scenario}/dataset"),
                    dataset_history=[
                        (str(r.storage_id), r.asset_materialization.tags.get("dagster/data_version")) for r in datasets
                    ],
                )
            )
    return builds


def find_stale(instance, code_versions: dict[str, str], scenarios: list[str]) -> dict[tuple[str, str], set[str]]:
    """{(model, version): reasons} for every evaluated partition whose prompts are stale (automation.find_stale)."""
    return automation.find_stale(prompts_builds(instance, scenarios), code_versions)


def make_votes_sensor(ratings_job):
    @sensor(
        name="arena_votes",
        default_status=DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=30,
        jobs=[ratings_job],
    )
    def arena_votes(context: SensorEvaluationContext, holistic: HolisticResource):
        """New votes cast on `holistic vote`'s page (table `votes`) -> the arena ratings of their suite version
        are fitted again. The cursor is, per version, the number of votes and the time of the latest."""
        warehouse = holistic.deployment().warehouse()
        if not warehouse.path.exists():
            return SkipReason("no warehouse yet")
        try:
            seen = warehouse.df("SELECT version, count(*) AS n, max(voted_at)::VARCHAR AS last FROM votes GROUP BY 1")
        except duckdb.CatalogException:  # a warehouse from before the votes table
            return SkipReason("no votes yet")
        marks = {r.version: f"{r.n}@{r.last}" for r in seen.itertuples()}
        previous = json.loads(context.cursor) if context.cursor else {}
        changed = sorted(v for v, mark in marks.items() if previous.get(v) != mark)
        if not changed:
            return SkipReason("no new votes")
        requests = [
            RunRequest(job_name=ratings_job.name, partition_key=v, run_key=f"votes:{v}:{marks[v]}") for v in changed
        ]
        partitions = [
            version_partitions.build_add_request(
                [v for v in changed if not context.instance.has_dynamic_partition(version_partitions.name, v)]
            )
        ]
        return SensorResult(
            run_requests=requests,
            cursor=json.dumps(marks),
            dynamic_partitions_requests=[p for p in partitions if p.partition_keys],
        )

    return arena_votes


def make_traffic_sensor(shadow_job):
    @sensor(
        name="traffic_logs",
        default_status=DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=60,
        jobs=[shadow_job],
    )
    def traffic_logs(context: SensorEvaluationContext, holistic: HolisticResource):
        """New or changed traffic log files (*.jsonl in shadow.yaml's traffic_dir) -> a partition each and a run
        of the shadow evaluation (traffic, the candidates' answers, the judge's verdicts)."""
        try:
            directory = holistic.deployment().traffic_dir()
        except CatalogError as e:
            return SkipReason(str(e))
        if not directory.is_dir():
            return SkipReason(f"no traffic folder {directory} yet")
        marks = {}
        for path in sorted(directory.glob("*.jsonl")):
            stat = path.stat()
            marks[log_key(path)] = f"{stat.st_size}:{stat.st_mtime_ns}"
        previous = json.loads(context.cursor) if context.cursor else {}
        changed = [key for key, mark in marks.items() if previous.get(key) != mark]
        if not changed:
            return SkipReason("no new or changed traffic logs")
        new = [key for key in changed if not context.instance.has_dynamic_partition(traffic_partitions.name, key)]
        return SensorResult(
            run_requests=[
                RunRequest(job_name=shadow_job.name, partition_key=key, run_key=f"{key}:{marks[key]}")
                for key in changed
            ],
            dynamic_partitions_requests=[traffic_partitions.build_add_request(new)] if new else [],
            cursor=json.dumps(marks),
        )

    return traffic_logs


@sensor(name="alert_webhook", default_status=DefaultSensorStatus.RUNNING, minimum_interval_seconds=30)
def alert_webhook(context: SensorEvaluationContext, holistic: HolisticResource):
    """Failed asset checks (ERROR: critical, WARN: warning) since the last tick, posted to the Slack-compatible
    webhook whose URL is in the environment variable resources/alerts.yaml names (unset: nothing is posted).

    Check results are read run by run (the runs updated since the last tick, and those still going): the one
    way that works on every event log storage, SQLite's run-sharded one (the default install) included. Alerts
    not posted wait in the cursor's outbox and are tried again with a growing delay (alerts.delivery.deliver);
    those given up on are recorded in the warehouse (`undelivered_alerts`), and later alerts still go out."""
    spec = holistic.deployment().alerts()
    state = _alert_cursor(context.cursor)
    now = time.time()
    if state is None:  # the first tick starts from now: an instance's old failures are not news
        runs = {r.dagster_run.run_id: _last_check_cursor(context.instance, r.dagster_run.run_id)
                for r in context.instance.get_run_records(RunsFilter(statuses=IN_PROGRESS))}  # fmt: skip
        context.update_cursor(json.dumps({"after": now, "runs": runs, "outbox": Outbox().to_json()}))
        return SkipReason("started: failed checks from now on are posted")
    new, seen, num_results = _new_failed_checks(context.instance, state)
    done = deliver(Outbox.from_json(state.get("outbox")), new, lambda items: send_alerts(items, spec), now)
    if done.undeliverable:
        _record_undelivered(holistic, done.undeliverable, done.error, now)
    context.update_cursor(json.dumps({**seen, "outbox": done.outbox.to_json()}))
    if done.message == "nothing to post":
        return SkipReason(
            f"no failed check among {num_results} new result(s)" if num_results else "no new check results"
        )
    if "none posted" in done.message:
        hook = spec.webhook
        return SkipReason(f"{done.message} (webhook: ${hook.url_env} unset, or below min_level {hook.min_level})")
    return SkipReason(done.message)


IN_PROGRESS = [DagsterRunStatus.QUEUED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED]


def _alert_cursor(cursor: str | None) -> dict | None:
    """The sensor's state, or None on its first tick (a cursor of an earlier release restarts it from now)."""
    try:
        state = json.loads(cursor or "")
    except json.JSONDecodeError:
        return None
    return state if isinstance(state, dict) and "after" in state else None


def _last_check_cursor(instance, run_id: str) -> str | None:
    return instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION).cursor


def _new_failed_checks(instance, state: dict) -> tuple[list[Alert], dict, int]:
    """(the failed checks recorded since the state's cursors, the new state, how many check results were read)."""
    after, cursors = float(state["after"]), dict(state.get("runs", {}))
    since = datetime.fromtimestamp(after, timezone.utc)
    records = {r.dagster_run.run_id: r for r in instance.get_run_records(RunsFilter(updated_after=since))}
    records.update({r.dagster_run.run_id: r for r in instance.get_run_records(RunsFilter(statuses=IN_PROGRESS))})
    items, watermark, num_results = [], after, 0
    for run_id, record in records.items():
        found = instance.get_records_for_run(
            run_id, cursor=cursors.get(run_id), of_type=DagsterEventType.ASSET_CHECK_EVALUATION
        )
        cursors[run_id] = found.cursor
        num_results += len(found.records)
        partition = record.dagster_run.tags.get("dagster/partition", "")
        for event in found.records:
            check = event.event_log_entry.dagster_event.event_specific_data
            if check.passed:
                continue
            level = "critical" if check.severity == AssetCheckSeverity.ERROR else "warning"
            where = check.asset_key.to_user_string()
            if partition or check.partition:  # which results failed (e.g. the suite version)
                where += f" [{partition or check.partition}]"
            items.append(Alert(level, f"{check.check_name} failed on {where}", check.description or ""))
        if record.dagster_run.status not in IN_PROGRESS:
            watermark = max(watermark, record.update_timestamp.timestamp())
    # a finished run updated before the watermark is never read again; a run in progress keeps its cursor
    keep = {run_id for run_id, r in records.items()
            if r.dagster_run.status in IN_PROGRESS or r.update_timestamp.timestamp() >= watermark}  # fmt: skip
    return items, {"after": watermark, "runs": {k: v for k, v in cursors.items() if k in keep}}, num_results


def _record_undelivered(holistic: HolisticResource, alerts: list[Alert], error: str, now: float) -> None:
    """The alerts given up on, in the warehouse (`undelivered_alerts`): someone can still read them there."""
    import pandas as pd

    at = datetime.fromtimestamp(now, timezone.utc).replace(tzinfo=None)
    rows = [{"recorded_at": at, "level": a.level, "title": a.title, "text": a.text, "error": error} for a in alerts]
    frame = pd.DataFrame(rows).drop_duplicates(["title"])
    holistic.deployment().warehouse().upsert("undelivered_alerts", frame)
