"""The summaries of a suite version across its models: the leaderboard (CIs and win rates), the regression tests
of new revisions, the graded alerts, output stability and the HTML report; their jobs; and the sensor that posts
failed checks to the alerts webhook."""

import json
import time
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg

from holistic_dagster import quality
from holistic_dagster.alerts.delivery import Alert, Outbox, deliver, send_alerts
from holistic_dagster.config.redaction import errors_redacted
from holistic_dagster.defs import jobs
from holistic_dagster.defs.common import BY_VERSION, SUMMARY_FOLLOWS, check_results, check_specs, model_version
from holistic_dagster.defs.partitions import model_version_partitions, version_partitions
from holistic_dagster.defs.resources import HolisticResource, ModelBackends
from holistic_dagster.report.markdown import comparison_table, headline_markdown
from holistic_dagster.results.headline import suite_headline
from holistic_dagster.stages import stability as stability_stage
from holistic_dagster.stages import summaries


def definitions(scenarios: list[str], sensor_interval_seconds: int) -> dg.Definitions:
    return dg.Definitions(
        assets=[
            leaderboard_asset(scenarios),
            regressions_asset(),
            alerts_asset(),
            stability_asset(scenarios),
            report_asset(),
        ],
        jobs=[
            dg.define_asset_job(
                jobs.LEADERBOARD_JOB,
                selection=jobs.selection(jobs.SUMMARY_ASSETS),
                description="The per-version leaderboard (with CIs and win rates), regression tests, graded alerts "
                "and HTML report.",
            ),
            dg.define_asset_job(
                jobs.STABILITY_JOB,
                selection=jobs.selection([["stability"]]),
                description="Output stability of a model: a sample of its requests asked again past the cache.",
            ),
        ],
        sensors=[alert_sensor(sensor_interval_seconds)],
    )


def leaderboard_asset(scenarios: list[str]) -> dg.AssetsDefinition:
    @dg.asset(
        key=["leaderboard"],
        partitions_def=version_partitions,
        automation_condition=SUMMARY_FOLLOWS,
        group_name="summary",
        kinds={"duckdb"},
        deps=[dg.AssetDep(dg.AssetKey([s, "scores"]), partition_mapping=BY_VERSION) for s in scenarios],
        check_specs=check_specs(["leaderboard"], "leaderboard"),
    )
    def leaderboard(context: dg.AssetExecutionContext, holistic: HolisticResource):
        """Models x scenarios for one suite version, one table per metric family (never blended).
        Read from DuckDB directly: cross-model summaries do not go through an IO manager."""
        version = context.partition_key
        stage = holistic.stage(context.run.run_id)
        summary = summaries.summarize(stage, version)
        cells = summary["cells"]
        metadata = {"num_models": int(cells["model"].nunique()), "num_scenarios": int(cells["scenario"].nunique())}
        for table in suite_headline(stage.warehouse, stage.catalog, version).tables:
            metadata[table.family] = dg.MetadataValue.md(headline_markdown(table))
        yield dg.MaterializeResult(metadata=metadata)
        yield from check_results(quality.check_stage("leaderboard", stage, version), "leaderboard")

    return leaderboard


def regressions_asset() -> dg.AssetsDefinition:
    @dg.asset(
        key=["regressions"],
        partitions_def=version_partitions,
        automation_condition=SUMMARY_FOLLOWS,
        group_name="summary",
        kinds={"duckdb"},
        deps=[dg.AssetKey(["leaderboard"])],
        check_specs=check_specs(["regressions"], "regressions"),
    )
    def regressions(context: dg.AssetExecutionContext, holistic: HolisticResource):
        """Each model with a `previous` revision in resources/models.yaml against that revision, per scenario
        and family: paired difference, bootstrap CI, permutation p-value, verdict (table `comparisons`).
        The check fails, naming scenario and family, when a new revision is significantly worse."""
        version = context.partition_key
        stage = holistic.stage(context.run.run_id)
        frame = summaries.find_regressions(stage, version)
        counts = frame["verdict"].value_counts().to_dict() if len(frame) else {}
        yield dg.MaterializeResult(
            metadata={
                "num_comparisons": len(frame),
                **{f"num_{k.replace(' ', '_')}": int(v) for k, v in counts.items()},
                "comparisons": dg.MetadataValue.md(comparison_table(frame)) if len(frame) else "none",
            }
        )
        yield from check_results(quality.check_regressions(frame), "regressions")

    return regressions


def alerts_asset() -> dg.AssetsDefinition:
    @dg.asset(
        key=["alerts"],
        partitions_def=version_partitions,
        automation_condition=SUMMARY_FOLLOWS,
        group_name="summary",
        kinds={"duckdb"},
        deps=[dg.AssetKey(["leaderboard"]), dg.AssetDep(dg.AssetKey(["stability"]), partition_mapping=BY_VERSION)],
        check_specs=check_specs(["alerts"], "alerts"),
    )
    def alerts(context: dg.AssetExecutionContext, holistic: HolisticResource):
        """Graded regression alerts (resources/alerts.yaml): each model against its baseline per rule and
        scenario (metric drops with the paired test deciding significance, absolute floors, p50/p95 latency
        ratios): critical fails a blocking check (ERROR), warning a WARN check; the alert_webhook sensor posts
        them. Table `alerts`."""
        version = context.partition_key
        stage = holistic.stage(context.run.run_id)
        findings = summaries.grade_alerts(stage, version, holistic.deployment().alerts())
        levels = {level: sum(f.level == level for f in findings) for level in ("critical", "warning", "ok")}
        shown = [f.message for f in findings if f.level != "ok"][:30]
        yield dg.MaterializeResult(
            metadata={**levels, "alerts": dg.MetadataValue.md("\n".join(f"- {m}" for m in shown) or "none")}
        )
        yield from check_results(quality.check_alerts(findings), "alerts")

    return alerts


def stability_asset(scenarios: list[str]) -> dg.AssetsDefinition:
    @dg.asset(
        key=["stability"],
        partitions_def=model_version_partitions,
        group_name="summary",
        kinds={"duckdb"},
        deps=[dg.AssetKey([s, "completions"]) for s in scenarios],
        pool=jobs.MODEL_REQUESTS_POOL,
    )
    def stability(context: dg.AssetExecutionContext, holistic: HolisticResource, model_backends: ModelBackends):
        """Output stability of one model: a seeded sample of its generation requests (20 instances per scenario,
        the same for every model) asked twice more past the completion cache, each answer compared with the stored
        one (table `stability`); the alerts' stability rules compare the agreement with the baseline's."""
        model, version = model_version(context)
        stage = holistic.stage(context.run.run_id, model_backends)
        with errors_redacted():
            metadata = stability_stage.measure_stability(stage, version, model)
        return dg.MaterializeResult(
            metadata={**metadata, "per_scenario": dg.MetadataValue.json(metadata["per_scenario"])}
        )

    return stability


def report_asset() -> dg.AssetsDefinition:
    @dg.asset(
        key=["report"],
        partitions_def=version_partitions,
        automation_condition=SUMMARY_FOLLOWS,
        group_name="summary",
        kinds={"html"},
        deps=[dg.AssetKey(["leaderboard"]), dg.AssetKey(["regressions"]), dg.AssetKey(["arena", "ratings"])],
    )
    def report(context: dg.AssetExecutionContext, holistic: HolisticResource):
        """The static HTML report of the suite version, a folder that opens offline: per family a models x
        scenarios table of headline metrics with 95% CIs and mean win rates; per scenario every metric, the
        accuracy under perturbation chart and the reliability diagram; per scenario a sample of predictions
        (exact prompt, completion, scores, top log-probabilities), two models side by side."""
        stage = holistic.stage(context.run.run_id)
        written = summaries.write_report(stage, context.partition_key)
        return dg.MaterializeResult(
            metadata={
                "path": dg.MetadataValue.path(written["path"]),
                "url": dg.MetadataValue.url(Path(written["path"]).resolve().as_uri()),
                "num_models": written["num_models"],
                "num_scenarios": written["num_scenarios"],
                "num_pages": written["num_files"],
                "num_bytes": written["num_bytes"],
                "predictions_per_scenario": dg.MetadataValue.json(written["num_predictions"]),
            }
        )

    return report


def alert_sensor(interval_seconds: int) -> dg.SensorDefinition:
    return dg.sensor(
        name="alert_webhook", default_status=dg.DefaultSensorStatus.RUNNING, minimum_interval_seconds=interval_seconds
    )(alert_webhook)


def alert_webhook(context: dg.SensorEvaluationContext, holistic: HolisticResource):
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
                for r in context.instance.get_run_records(dg.RunsFilter(statuses=IN_PROGRESS))}  # fmt: skip
        context.update_cursor(json.dumps({"after": now, "runs": runs, "outbox": Outbox().to_json()}))
        return dg.SkipReason("started: failed checks from now on are posted")
    new, seen, num_results = _new_failed_checks(context.instance, state)
    done = deliver(Outbox.from_json(state.get("outbox")), new, lambda items: send_alerts(items, spec), now)
    if done.undeliverable:
        _record_undelivered(holistic, done.undeliverable, done.error, now)
    context.update_cursor(json.dumps({**seen, "outbox": done.outbox.to_json()}))
    if done.message == "nothing to post":
        return dg.SkipReason(
            f"no failed check among {num_results} new result(s)" if num_results else "no new check results"
        )
    if "none posted" in done.message:
        hook = spec.webhook
        return dg.SkipReason(f"{done.message} (webhook: ${hook.url_env} unset, or below min_level {hook.min_level})")
    return dg.SkipReason(done.message)


IN_PROGRESS = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]


def _alert_cursor(cursor: str | None) -> dict | None:
    """The sensor's state, or None on its first tick (a cursor of an earlier release restarts it from now)."""
    try:
        state = json.loads(cursor or "")
    except json.JSONDecodeError:
        return None
    return state if isinstance(state, dict) and "after" in state else None


def _last_check_cursor(instance, run_id: str) -> str | None:
    return instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION).cursor


def _new_failed_checks(instance, state: dict) -> tuple[list[Alert], dict, int]:
    """(the failed checks recorded since the state's cursors, the new state, how many check results were read)."""
    after, cursors = float(state["after"]), dict(state.get("runs", {}))
    since = datetime.fromtimestamp(after, timezone.utc)
    records = {r.dagster_run.run_id: r for r in instance.get_run_records(dg.RunsFilter(updated_after=since))}
    records.update({r.dagster_run.run_id: r for r in instance.get_run_records(dg.RunsFilter(statuses=IN_PROGRESS))})
    items, watermark, num_results = [], after, 0
    for run_id, record in records.items():
        found = instance.get_records_for_run(
            run_id, cursor=cursors.get(run_id), of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        )
        cursors[run_id] = found.cursor
        num_results += len(found.records)
        partition = record.dagster_run.tags.get("dagster/partition", "")
        for event in found.records:
            check = event.event_log_entry.dagster_event.event_specific_data
            if check.passed:
                continue
            level = "critical" if check.severity == dg.AssetCheckSeverity.ERROR else "warning"
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
    frame = pd.DataFrame(rows).drop_duplicates(["level", "title", "text"])  # the table's key: every give-up kept
    holistic.deployment().warehouse().upsert("undelivered_alerts", frame)
