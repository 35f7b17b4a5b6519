"""The one assembly point: every scenario's assets, the leaderboard, jobs, sensors and resources."""

from __future__ import annotations

import logging

from dagster import (
    AssetSelection,
    AutomationConditionSensorDefinition,
    DefaultSensorStatus,
    Definitions,
    define_asset_job,
    definitions,
)

from holistic_dagster import settings
from holistic_dagster.adaptation.methods import adapter_method
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.defs.assets import (
    alerts_asset,
    arena_assets,
    leaderboard_asset,
    regressions_asset,
    report_asset,
    scenario_assets,
    shadow_assets,
    stability_asset,
)
from holistic_dagster.defs.resources import (
    HolisticResource,
    ModelBackends,
    OpenAIBackend,
    TGIBackend,
    ToxicityClassifierResource,
    TransformersBackend,
)
from holistic_dagster.defs.sensors import (
    abandoned_runs,
    alert_webhook,
    find_stale,
    make_registry_sensor,
    make_stale_schedule,
    make_traffic_sensor,
    make_votes_sensor,
)

# declarative automation (scores after completions, summaries after scores: defs/assets.py) runs only while a
# sensor evaluates the conditions; Dagster's default one is stopped until someone starts it in the UI
AUTOMATION = AutomationConditionSensorDefinition(
    "automation_conditions",
    target=AssetSelection.all(),
    default_status=DefaultSensorStatus.RUNNING,
    description="Evaluates the assets' automation conditions: scores, leaderboard, regressions and report follow.",
)


def build_definitions(catalog: Catalog | None = None, resource: HolisticResource | None = None) -> Definitions:
    # one configured catalog and registry for assets, sensors and schedules: the holistic resource's
    holistic = resource or HolisticResource()
    catalog = catalog or holistic.catalog()
    scenarios, broken = catalog.loadable_scenarios()
    for name, problem in broken.items():
        logging.getLogger("holistic_dagster").warning("scenario %s left out of the definitions: %s", name, problem)
    assets = [a for s in scenarios for a in scenario_assets(catalog, s)]
    datasets = AssetSelection.assets(*[[s, "dataset"] for s in scenarios])
    per_model = AssetSelection.assets(
        *[[s, stage] for s in scenarios for stage in ("prompts", "completions", "scores")]
    )
    datasets_job = define_asset_job(
        "datasets", selection=datasets, description="Load and sample every scenario's data for a suite version."
    )
    evaluate_job = define_asset_job(
        "evaluate_model",
        selection=per_model,
        description="Prompts, completions and scores of every scenario for one model.",
    )
    arena_ratings_job = define_asset_job(
        "arena_ratings_job",
        selection=AssetSelection.assets(["arena", "ratings"]),
        description="The arena ratings again (new votes from `holistic vote`'s page).",
    )
    shadow_job = define_asset_job(
        "shadow_job",
        selection=AssetSelection.groups("shadow"),
        description="Shadow evaluation of a production traffic log: its records (PII removed), the candidates' "
        "answers to the same prompts, the judge's verdicts and win rates (resources/shadow.yaml).",
    )
    code_versions = {s: catalog.code_version(s) for s in scenarios}
    cron = holistic.deployment().automation().rerun_stale_cron
    return Definitions(
        # steps as Celery tasks where the deployment says so (settings.executor); otherwise Dagster's default
        executor=_scale_out_executor(),
        assets=[
            *assets,
            leaderboard_asset(scenarios),
            regressions_asset(),
            alerts_asset(),
            stability_asset(scenarios),
            report_asset(),
            # open-ended scenarios (generation) are the ones a suite can put in its arena
            *arena_assets([s for s in scenarios if adapter_method(catalog.scenario(s).adapter.method).open_ended]),
            *shadow_assets(),
        ],
        jobs=[
            datasets_job,
            evaluate_job,
            define_asset_job(
                "leaderboard_job",
                selection=AssetSelection.assets(["leaderboard"], ["regressions"], ["alerts"], ["report"]),
                description="The per-version leaderboard (with CIs and win rates), regression tests, graded alerts "
                "and HTML report.",
            ),
            arena_ratings_job,
            shadow_job,
            define_asset_job(
                "stability_job",
                selection=AssetSelection.assets(["stability"]),
                description="Output stability of a model: a sample of its requests asked again past the cache.",
            ),
            define_asset_job(
                "arena_job",
                selection=AssetSelection.assets(["arena", "battles"], ["arena", "ratings"]),
                description="Battles between models' stored answers on the suite's arena scenarios, judged by its "
                "judge models, and the Bradley-Terry / Elo ratings.",
            ),
        ],
        sensors=[
            make_registry_sensor(datasets_job, evaluate_job),
            AUTOMATION,
            abandoned_runs,
            make_votes_sensor(arena_ratings_job),
            make_traffic_sensor(shadow_job),
            alert_webhook,
        ],
        schedules=[
            make_stale_schedule(evaluate_job, lambda instance: find_stale(instance, code_versions, scenarios), cron)
        ],
        resources={
            "holistic": holistic,
            "model_backends": ModelBackends(
                transformers=TransformersBackend(), tgi=TGIBackend(), openai=OpenAIBackend()
            ),
            "toxicity_classifier": ToxicityClassifierResource(),
        },
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
