"""What the products' Dagster definitions share: the partition mapping from model x version to version, the
declarative automation conditions, asset check specs and results built from the quality checks' declarations, and
running a model x version stage with its checks."""

from __future__ import annotations

import json
import sys
import time
import warnings
from collections.abc import Callable, Iterator

import dagster as dg

from holistic_dagster import quality
from holistic_dagster.config.redaction import errors_redacted
from holistic_dagster.defs.jobs import BUDGET_STOP_TAG, BUDGET_TAG, EFFICIENT_TAG, SAMPLE_TAG
from holistic_dagster.defs.resources import HolisticResource, ModelBackends, ToxicityClassifierResource
from holistic_dagster.stages.budget import BudgetReached

with warnings.catch_warnings():  # beta, but the documented way to map model x version onto version
    warnings.simplefilter("ignore")
    BY_VERSION = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="version")


# Declarative automation (evaluated by the daemon's automation sensor): scores follow completions once their
# blocking checks pass; a version's leaderboard, regressions and report follow any updated score of it. A
# summary waits while anything upstream is still running, and a model that failed does not hold it back.
SCORES_FOLLOW = dg.AutomationCondition.eager() & dg.AutomationCondition.all_deps_blocking_checks_passed()
SUMMARY_FOLLOWS = (
    dg.AutomationCondition.any_deps_updated().since_last_handled()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
).with_label("follows any updated score")


def check_specs(key: list[str], stage: str) -> list[dg.AssetCheckSpec]:
    return [
        dg.AssetCheckSpec(c.name, asset=dg.AssetKey(key), description=c.description, blocking=c.blocking)
        for c in quality.STAGE_CHECKS[stage]
    ]


def check_results(outcomes: list[quality.CheckOutcome], stage: str) -> Iterator[dg.AssetCheckResult]:
    errors = {c.name: c.blocking or c.error for c in quality.STAGE_CHECKS[stage]}
    for o in outcomes:
        yield dg.AssetCheckResult(
            check_name=o.name,
            passed=o.passed,
            description=o.description,
            severity=dg.AssetCheckSeverity.ERROR if errors[o.name] else dg.AssetCheckSeverity.WARN,
            metadata={"details": dg.MetadataValue.json(o.details)},
        )


def model_version(context: dg.AssetExecutionContext) -> tuple[str, str]:
    key = context.partition_key
    assert isinstance(key, dg.MultiPartitionKey)
    dims = key.keys_by_dimension
    return dims["model"], dims["version"]


def model_stage(
    context: dg.AssetExecutionContext,
    holistic: HolisticResource,
    scenario: str,
    stage_name: str,
    compute,
    backends: ModelBackends | None = None,
    toxicity: ToxicityClassifierResource | None = None,
) -> Iterator:
    """A model x version stage: compute it, then report its quality checks on what was stored."""
    model, version = model_version(context)
    stage = holistic.stage(context.run.run_id, backends, toxicity)
    if budget := context.run.tags.get(BUDGET_TAG):  # set by `holistic evaluate --max-cost`
        stage.max_cost = float(budget)
    if anchors := context.run.tags.get(EFFICIENT_TAG):  # set by `holistic evaluate --efficient`
        stage.efficient = int(anchors)
    if sample := context.run.tags.get(SAMPLE_TAG):  # set by `holistic gate --sequential --evaluate`, per batch
        stage.sample = int(sample)
    started = time.perf_counter()
    with errors_redacted():  # Dagster stores a failed step's error, causes included, in its event log
        try:
            metadata = compute(stage, version, scenario, model)
        except BudgetReached as e:  # the run says so where the UI lists runs, not only in the step's error
            context.instance.add_run_tags(context.run.run_id, {BUDGET_STOP_TAG: e.summary})
            raise
    if holistic.show_progress and stage_name == "completions" and not sys.stdout.isatty():
        # a log (CI, a pipe) gets a line per scenario where a terminal gets progress bars: never minutes of silence
        failed = f", {metadata['num_failed']} failed" if metadata.get("num_failed") else ""
        print(
            f"  {model} on {scenario}: {metadata['num_completions']} requests ({metadata['num_sent']} sent, "
            f"{metadata['num_from_cache']} from the cache{failed}) in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
    yield dg.MaterializeResult(metadata=metadata)
    yield from check_results(quality.check_stage(stage_name, stage, version, scenario, model), stage_name)


def runs_for_changes(
    context: dg.SensorEvaluationContext,
    marks: dict[str, str],
    job,
    partitions: dg.DynamicPartitionsDefinition,
    run_key: Callable[[str, str], str],
    nothing: str,
) -> dg.SensorResult | dg.SkipReason:
    """A run of `job` for each partition whose mark (what it holds: a count and a time, a file's size and mtime)
    differs from the one in the sensor's cursor; partitions seen for the first time are added; the cursor becomes
    the marks."""
    previous = json.loads(context.cursor) if context.cursor else {}
    changed = sorted(key for key, mark in marks.items() if previous.get(key) != mark)
    if not changed:
        return dg.SkipReason(nothing)
    new = [key for key in changed if not context.instance.has_dynamic_partition(partitions.name, key)]
    return dg.SensorResult(
        run_requests=[dg.RunRequest(job_name=job.name, partition_key=k, run_key=run_key(k, marks[k])) for k in changed],
        dynamic_partitions_requests=[partitions.build_add_request(new)] if new else [],
        cursor=json.dumps(marks),
    )
