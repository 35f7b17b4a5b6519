"""The one assembly point: every scenario's assets, the leaderboard, jobs, sensors and resources."""

from __future__ import annotations

from dagster import AssetSelection, Definitions, define_asset_job

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
from holistic_dagster.defs.sensors import registry_partitions


def build_definitions(catalog: Catalog | None = None, resource: HolisticResource | None = None) -> Definitions:
    catalog = catalog or Catalog()
    scenarios = catalog.scenario_names()
    assets = [a for s in scenarios for a in scenario_assets(catalog, s)]
    datasets = AssetSelection.assets(*[[s, "dataset"] for s in scenarios])
    per_model = AssetSelection.assets(
        *[[s, stage] for s in scenarios for stage in ("prompts", "completions", "scores")]
    )
    return Definitions(
        assets=[*assets, leaderboard_asset(scenarios), regressions_asset(), report_asset()],
        jobs=[
            define_asset_job(
                "datasets", selection=datasets, description="Load and sample every scenario's data for a suite version."
            ),
            define_asset_job(
                "evaluate_model",
                selection=per_model,
                description="Prompts, completions and scores of every scenario for one model.",
            ),
            define_asset_job(
                "leaderboard_job",
                selection=AssetSelection.assets(["leaderboard"], ["regressions"], ["report"]),
                description="The per-version leaderboard (with CIs and win rates), regression tests and HTML report.",
            ),
        ],
        sensors=[registry_partitions],
        resources={
            "holistic": resource or HolisticResource(),
            "model_backends": ModelBackends(
                transformers=TransformersBackend(), tgi=TGIBackend(), openai=OpenAIBackend()
            ),
            "toxicity_classifier": ToxicityClassifierResource(),
        },
    )


defs = build_definitions()
