"""The one assembly point: every scenario's assets, the leaderboard, jobs, sensors and resources."""

from __future__ import annotations

from dagster import AssetKey, AssetSelection, Definitions, define_asset_job

from holistic_dagster.catalog import Catalog
from holistic_dagster.defs.assets import leaderboard_asset, regressions_asset, report_asset, scenario_assets
from holistic_dagster.defs.resources import (
    HolisticResource,
    ModelBackends,
    OpenAIBackend,
    TGIBackend,
    ToxicityClassifierResource,
    TransformersBackend,
)
from holistic_dagster.defs.sensors import find_stale, make_registry_sensor, make_stale_schedule


def build_definitions(catalog: Catalog | None = None, resource: HolisticResource | None = None) -> Definitions:
    catalog = catalog or Catalog()
    scenarios = catalog.scenario_names()
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
    code_versions = {s: a.code_versions_by_key[AssetKey([s, "prompts"])] for s, a in _prompts_assets(assets)}
    return Definitions(
        assets=[*assets, leaderboard_asset(scenarios), regressions_asset(), report_asset()],
        jobs=[
            datasets_job,
            evaluate_job,
            define_asset_job(
                "leaderboard_job",
                selection=AssetSelection.assets(["leaderboard"], ["regressions"], ["report"]),
                description="The per-version leaderboard (with CIs and win rates), regression tests and HTML report.",
            ),
        ],
        sensors=[make_registry_sensor(datasets_job, evaluate_job)],
        schedules=[make_stale_schedule(evaluate_job, lambda instance: find_stale(instance, code_versions, scenarios))],
        resources={
            "holistic": resource or HolisticResource(),
            "model_backends": ModelBackends(
                transformers=TransformersBackend(), tgi=TGIBackend(), openai=OpenAIBackend()
            ),
            "toxicity_classifier": ToxicityClassifierResource(),
        },
    )


def _prompts_assets(assets):
    for a in assets:
        for key in a.keys:
            if key.path[-1] == "prompts":
                yield key.path[0], a


defs = build_definitions()
