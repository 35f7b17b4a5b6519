"""The arena: battles between models' stored answers on a suite's arena scenarios, judged by its judge models (and
people: holistic vote), the ratings fitted to them, their jobs, and the sensor that fits the ratings again when new
votes come in."""

import dagster as dg

from holistic_dagster import quality
from holistic_dagster.config.redaction import errors_redacted
from holistic_dagster.defs import jobs
from holistic_dagster.defs.common import BY_VERSION, SUMMARY_FOLLOWS, check_results, check_specs, runs_for_changes
from holistic_dagster.defs.partitions import version_partitions
from holistic_dagster.defs.resources import HolisticResource, ModelBackends
from holistic_dagster.results.arena import bradley_terry_table, votes_seen
from holistic_dagster.stages import arena


def definitions(scenarios: list[str], sensor_interval_seconds: int) -> dg.Definitions:
    """`scenarios`: the open-ended ones, which a suite can put in its arena."""
    ratings_job = dg.define_asset_job(
        jobs.ARENA_RATINGS_JOB,
        selection=jobs.selection([["arena", "ratings"]]),
        description="The arena ratings again (new votes from `holistic vote`'s page).",
    )
    return dg.Definitions(
        assets=arena_assets(scenarios),
        jobs=[
            ratings_job,
            dg.define_asset_job(
                jobs.ARENA_JOB,
                selection=jobs.selection([["arena", "battles"], ["arena", "ratings"]]),
                description="Battles between models' stored answers on the suite's arena scenarios, judged by its "
                "judge models, and the Bradley-Terry / Elo ratings.",
            ),
        ],
        sensors=[make_votes_sensor(ratings_job, sensor_interval_seconds)],
    )


def arena_assets(scenarios: list[str]) -> list[dg.AssetsDefinition]:
    """Battles between models' stored answers on the suite's arena scenarios, judged by its judge models, and
    the ratings fitted to them: per suite version. `scenarios`: every scenario that can be arena-eligible (the
    suite's `arena:` section picks among them); the lineage runs through their completions."""

    @dg.asset(
        key=["arena", "battles"],
        partitions_def=version_partitions,
        group_name="arena",
        kinds={"duckdb"},
        deps=[dg.AssetDep(dg.AssetKey([s, "completions"]), partition_mapping=BY_VERSION) for s in scenarios],
        check_specs=check_specs(["arena", "battles"], "battles"),
    )
    def battles(context: dg.AssetExecutionContext, holistic: HolisticResource, model_backends: ModelBackends):
        """Every pair of models that answered an original instance of an arena scenario (their stored
        completions), sampled to the suite's max_battles with its seed, judged by each of the suite's judge models
        in both position orders (a verdict that flips with the order is a tie). Table `battles`."""
        version = context.partition_key
        stage = holistic.stage(context.run.run_id, model_backends)
        with errors_redacted():
            metadata = arena.judge_battles(stage, version)
        yield dg.MaterializeResult(
            metadata={k: dg.MetadataValue.json(v) if isinstance(v, dict) else v for k, v in metadata.items()}
        )
        yield from check_results(quality.check_stage("battles", stage, version), "battles")

    @dg.asset(
        key=["arena", "ratings"],
        partitions_def=version_partitions,
        automation_condition=SUMMARY_FOLLOWS & dg.AutomationCondition.all_deps_blocking_checks_passed(),
        group_name="arena",
        kinds={"duckdb"},
        deps=[dg.AssetKey(["arena", "battles"])],
        check_specs=check_specs(["arena", "ratings"], "arena_ratings"),
    )
    def ratings(context: dg.AssetExecutionContext, holistic: HolisticResource):
        """Per judge: Bradley-Terry ratings on the Elo scale (the suite's baseline at 1000) with bootstrap 95% CIs
        over prompts, the same with answer-length style control, online Elo, and the win-rate matrix. Tables
        `arena_ratings`, `arena_win_rates`."""
        version = context.partition_key
        stage = holistic.stage(context.run.run_id)
        metadata = arena.rate(stage, version)
        table = bradley_terry_table(stage.warehouse, version)
        yield dg.MaterializeResult(
            metadata={
                **{k: dg.MetadataValue.json(v) for k, v in metadata.items()},
                "bradley_terry": dg.MetadataValue.md(table.to_markdown(index=False)) if len(table) else "no votes",
            }
        )
        yield from check_results(quality.check_stage("arena_ratings", stage, version), "arena_ratings")

    return [battles, ratings]


def make_votes_sensor(ratings_job, interval_seconds: int):
    @dg.sensor(
        name="arena_votes",
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=interval_seconds,
        jobs=[ratings_job],
    )
    def arena_votes(context: dg.SensorEvaluationContext, holistic: HolisticResource):
        """New votes cast on `holistic vote`'s page (table `votes`) -> the arena ratings of their suite version
        are fitted again. The cursor is, per version, the number of votes and the time of the latest."""
        warehouse = holistic.deployment().warehouse()
        if not warehouse.path.exists():
            return dg.SkipReason("no warehouse yet")
        marks = votes_seen(warehouse)
        if marks is None:  # a warehouse from before the votes table
            return dg.SkipReason("no votes yet")
        return runs_for_changes(
            context, marks, ratings_job, version_partitions, lambda v, mark: f"votes:{v}:{mark}", "no new votes"
        )

    return arena_votes
