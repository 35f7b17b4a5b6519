"""Every product's definitions merged with the resources and the executor: what Dagster loads (through
holistic_dagster/definitions.py) and what the CLI and the tests build with their own catalog and deployment."""

from __future__ import annotations

import logging
from collections.abc import Collection

from dagster import (
    AssetSelection,
    AutomationConditionSensorDefinition,
    DefaultSensorStatus,
    Definitions,
    definitions,
)

from holistic_dagster import settings
from holistic_dagster.adaptation.methods import adapter_method
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.defs import arena, evaluation, shadow, summaries
from holistic_dagster.defs.resources import HolisticResource, ToxicityClassifierResource, model_backends


def automation_sensor(interval_seconds: int) -> AutomationConditionSensorDefinition:
    """Declarative automation (scores after completions, summaries after scores: defs/common.py) runs only while a
    sensor evaluates the conditions; Dagster's default one is stopped until someone starts it in the UI."""
    return AutomationConditionSensorDefinition(
        "automation_conditions",
        target=AssetSelection.all(),
        default_status=DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=interval_seconds,
        description="Evaluates the assets' automation conditions: scores, leaderboard, regressions and report follow.",
    )


def build_definitions(
    catalog: Catalog | None = None, resource: HolisticResource | None = None, only: Collection[str] | None = None
) -> Definitions:
    """Every product's definitions for one configured catalog and deployment (the holistic resource's), merged.
    only: the assets of these scenarios alone, for a command that runs one suite (the CLI: building every
    scenario's assets cost it about a second); what Dagster loads holds every loadable scenario."""
    holistic = resource or HolisticResource()
    catalog = catalog or holistic.catalog()
    scenarios, broken = catalog.loadable_scenarios(only)
    for name, problem in broken.items():
        logging.getLogger("holistic_dagster").warning("scenario %s left out of the definitions: %s", name, problem)
    # open-ended scenarios are the ones a suite can put in its arena
    open_ended = [s for s in scenarios if adapter_method(catalog.scenario(s).adapter.method).open_ended]
    automation = holistic.deployment().automation()
    return Definitions.merge(
        evaluation.definitions(catalog, scenarios, automation),
        summaries.definitions(scenarios, automation.sensor_interval_seconds),
        arena.definitions(open_ended, automation.sensor_interval_seconds),
        shadow.definitions(automation.housekeeping_interval_seconds),
        Definitions(
            sensors=[automation_sensor(automation.sensor_interval_seconds)],
            # steps as Celery tasks where the deployment says so (settings.executor); otherwise Dagster's default
            executor=_scale_out_executor(),
            resources={
                "holistic": holistic,
                "model_backends": model_backends(),
                "toxicity_classifier": ToxicityClassifierResource(),
            },
        ),
    )


def _scale_out_executor():
    if settings.executor() != "celery":
        return None
    from holistic_dagster.defs.celery import holistic_celery_executor

    return holistic_celery_executor


@definitions
def defs() -> Definitions:
    # built when Dagster loads the code location (workspace.yaml), not on import: the CLI and the tests
    # import build_definitions and build their own, with their own catalog and resource
    return build_definitions()
