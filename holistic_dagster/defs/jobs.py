"""The named jobs and the asset selections they run: one definition, read by the products' definitions, the CLI's
runner (defs/runner.py) and the sensors."""

from __future__ import annotations

from collections.abc import Iterable

from dagster import AssetKey, AssetSelection

DATASET = "dataset"
ANCHORS = "anchors"  # a scenario's anchors for efficient evaluation, fitted on the models evaluated in full
MODEL_STAGES = ("prompts", "completions", "scores")  # one model's evaluation of a scenario, in order

DATASETS_JOB = "datasets"
ANCHORS_JOB = "anchors_job"
EVALUATE_JOB = "evaluate_model"
LEADERBOARD_JOB = "leaderboard_job"
STABILITY_JOB = "stability_job"
ARENA_JOB = "arena_job"
ARENA_RATINGS_JOB = "arena_ratings_job"
SHADOW_JOB = "shadow_job"

# every step that sends model requests: concurrent runs share model servers (dagster.yaml limits the pool; the
# Celery executor sends these steps to the model's queue)
MODEL_REQUESTS_POOL = "model_requests"

BUDGET_STOP_TAG = "holistic/stopped_for_budget"  # on a run whose spending reached its budget: what, and where
BUDGET_TAG = "holistic/max_cost"  # a run's budget in USD (`holistic evaluate --max-cost`), over the suite's
SAMPLE_TAG = "holistic/sample"  # a sequential gate's batch: each scenario's first n instances of the seeded order
EFFICIENT_TAG = (
    "holistic/efficient"  # an efficient evaluation: the anchors per scenario (`holistic evaluate --efficient`)
)

SUMMARY_ASSETS = (["leaderboard"], ["regressions"], ["alerts"], ["report"])  # a version's summaries, in order


def scenario_keys(scenarios: Iterable[str], stages: Iterable[str]) -> list[AssetKey]:
    """The assets of the scenarios' stages (a run covers a suite's scenarios, not the catalog's)."""
    stages = tuple(stages)
    return [AssetKey([s, stage]) for s in scenarios for stage in stages]


def dataset_keys(scenarios: Iterable[str]) -> list[AssetKey]:
    return scenario_keys(scenarios, (DATASET,))


def anchor_keys(scenarios: Iterable[str]) -> list[AssetKey]:
    return scenario_keys(scenarios, (ANCHORS,))


def model_keys(scenarios: Iterable[str]) -> list[AssetKey]:
    return scenario_keys(scenarios, MODEL_STAGES)


def selection(keys: Iterable[AssetKey | list[str]]) -> AssetSelection:
    return AssetSelection.assets(*keys)
