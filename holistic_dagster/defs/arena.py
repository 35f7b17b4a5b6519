"""The arena: battles between models' stored answers on a suite's arena scenarios, judged by its judge models (and
people: holistic vote), the ratings fitted to them, their jobs, and the sensor that fits the ratings again when new
votes come in."""

import json

import duckdb
from dagster import (
    AssetDep,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    AutomationCondition,
    DefaultSensorStatus,
    Definitions,
    MaterializeResult,
    MetadataValue,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    asset,
    define_asset_job,
    sensor,
)

from holistic_dagster import quality
from holistic_dagster.config.redaction import errors_redacted
from holistic_dagster.defs import jobs
from holistic_dagster.defs.common import BY_VERSION, SUMMARY_FOLLOWS, check_results, check_specs
from holistic_dagster.defs.partitions import version_partitions
from holistic_dagster.defs.resources import HolisticResource, ModelBackends
from holistic_dagster.stages import arena


def definitions(scenarios: list[str]) -> Definitions:
    """`scenarios`: the open-ended ones, which a suite can put in its arena."""
    ratings_job = define_asset_job(
        jobs.ARENA_RATINGS_JOB,
        selection=jobs.selection([["arena", "ratings"]]),
        description="The arena ratings again (new votes from `holistic vote`'s page).",
    )
    return Definitions(
        assets=arena_assets(scenarios),
        jobs=[
            ratings_job,
            define_asset_job(
                jobs.ARENA_JOB,
                selection=jobs.selection([["arena", "battles"], ["arena", "ratings"]]),
                description="Battles between models' stored answers on the suite's arena scenarios, judged by its "
                "judge models, and the Bradley-Terry / Elo ratings.",
            ),
        ],
        sensors=[make_votes_sensor(ratings_job)],
    )


def arena_assets(scenarios: list[str]) -> list[AssetsDefinition]:
    """Battles between models' stored answers on the suite's arena scenarios, judged by its judge models, and
    the ratings fitted to them: per suite version. `scenarios`: every scenario that can be arena-eligible (the
    suite's `arena:` section picks among them); the lineage runs through their completions."""

    @asset(
        key=["arena", "battles"],
        partitions_def=version_partitions,
        group_name="arena",
        kinds={"duckdb"},
        deps=[AssetDep(AssetKey([s, "completions"]), partition_mapping=BY_VERSION) for s in scenarios],
        check_specs=check_specs(["arena", "battles"], "battles"),
    )
    def battles(context: AssetExecutionContext, holistic: HolisticResource, model_backends: ModelBackends):
        """Every pair of models that answered an original instance of an arena scenario (their stored
        completions), sampled to the suite's max_battles with its seed, judged by each of the suite's judge models
        in both position orders (a verdict that flips with the order is a tie). Table `battles`."""
        version = context.partition_key
        stage = holistic.stage(context.run.run_id, model_backends)
        with errors_redacted():
            metadata = arena.judge_battles(stage, version)
        yield MaterializeResult(
            metadata={k: MetadataValue.json(v) if isinstance(v, dict) else v for k, v in metadata.items()}
        )
        yield from check_results(quality.check_stage("battles", stage, version), "battles")

    @asset(
        key=["arena", "ratings"],
        partitions_def=version_partitions,
        automation_condition=SUMMARY_FOLLOWS & AutomationCondition.all_deps_blocking_checks_passed(),
        group_name="arena",
        kinds={"duckdb"},
        deps=[AssetKey(["arena", "battles"])],
        check_specs=check_specs(["arena", "ratings"], "arena_ratings"),
    )
    def ratings(context: AssetExecutionContext, holistic: HolisticResource):
        """Per judge: Bradley-Terry ratings on the Elo scale (the suite's baseline at 1000) with bootstrap 95% CIs
        over prompts, the same with answer-length style control, online Elo, and the win-rate matrix. Tables
        `arena_ratings`, `arena_win_rates`."""
        version = context.partition_key
        stage = holistic.stage(context.run.run_id)
        metadata = arena.rate(stage, version)
        table = stage.warehouse.df(
            "SELECT judge, model, round(rating, 1) AS rating, round(ci_low, 1) AS ci_low, round(ci_high, 1) AS ci_high,"
            " num_battles, round(mean_answer_tokens, 1) AS mean_answer_tokens FROM arena_ratings "
            "WHERE version = ? AND method = 'bradley_terry' ORDER BY judge, rating DESC",
            [version],
        )
        yield MaterializeResult(
            metadata={
                **{k: MetadataValue.json(v) for k, v in metadata.items()},
                "bradley_terry": MetadataValue.md(table.to_markdown(index=False)) if len(table) else "no votes",
            }
        )
        yield from check_results(quality.check_stage("arena_ratings", stage, version), "arena_ratings")

    return [battles, ratings]


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
