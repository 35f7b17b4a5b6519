"""What the products' Dagster definitions share: the partition mapping from model x version to version, the
declarative automation conditions, asset check specs and results built from the quality checks' declarations, and
running a model x version stage with its checks."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AutomationCondition,
    MaterializeResult,
    MetadataValue,
    MultiPartitionKey,
    MultiToSingleDimensionPartitionMapping,
)

from holistic_dagster import quality
from holistic_dagster.config.redaction import errors_redacted
from holistic_dagster.defs.resources import HolisticResource, ModelBackends, ToxicityClassifierResource

with warnings.catch_warnings():  # beta, but the documented way to map model x version onto version
    warnings.simplefilter("ignore")
    BY_VERSION = MultiToSingleDimensionPartitionMapping(partition_dimension_name="version")


# Declarative automation (evaluated by the daemon's automation sensor): scores follow completions once their
# blocking checks pass; a version's leaderboard, regressions and report follow any updated score of it. A
# summary waits while anything upstream is still running, and a model that failed does not hold it back.
SCORES_FOLLOW = AutomationCondition.eager() & AutomationCondition.all_deps_blocking_checks_passed()
SUMMARY_FOLLOWS = (
    AutomationCondition.any_deps_updated().since_last_handled()
    & ~AutomationCondition.any_deps_in_progress()
    & ~AutomationCondition.in_progress()
).with_label("follows any updated score")


def check_specs(key: list[str], stage: str) -> list[AssetCheckSpec]:
    return [
        AssetCheckSpec(c.name, asset=AssetKey(key), description=c.description, blocking=c.blocking)
        for c in quality.STAGE_CHECKS[stage]
    ]


def check_results(outcomes: list[quality.CheckOutcome], stage: str) -> Iterator[AssetCheckResult]:
    errors = {c.name: c.blocking or c.error for c in quality.STAGE_CHECKS[stage]}
    for o in outcomes:
        yield AssetCheckResult(
            check_name=o.name,
            passed=o.passed,
            description=o.description,
            severity=AssetCheckSeverity.ERROR if errors[o.name] else AssetCheckSeverity.WARN,
            metadata={"details": MetadataValue.json(o.details)},
        )


def model_version(context: AssetExecutionContext) -> tuple[str, str]:
    key = context.partition_key
    assert isinstance(key, MultiPartitionKey)
    dims = key.keys_by_dimension
    return dims["model"], dims["version"]


def model_stage(
    context: AssetExecutionContext,
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
    with errors_redacted():  # Dagster stores a failed step's error, causes included, in its event log
        metadata = compute(stage, version, scenario, model)
    yield MaterializeResult(metadata=metadata)
    yield from check_results(quality.check_stage(stage_name, stage, version, scenario, model), stage_name)
