"""One asset per scenario per stage ([scenario, dataset|prompts|completions|scores]) plus the per-version
leaderboard. Each asset function calls one pipeline stage, then reports that stage's quality checks."""

import warnings
from collections.abc import Iterator
from pathlib import Path

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetDep,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    AutomationCondition,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    MultiPartitionKey,
    MultiToSingleDimensionPartitionMapping,
    asset,
)

from holistic_dagster import quality
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.redaction import errors_redacted
from holistic_dagster.defs.partitions import model_version_partitions, traffic_partitions, version_partitions
from holistic_dagster.defs.resources import HolisticResource, ModelBackends, ToxicityClassifierResource
from holistic_dagster.errors import CatalogError
from holistic_dagster.report.markdown import comparison_table, headline_markdown
from holistic_dagster.report.tables import headline_tables
from holistic_dagster.shadow import log_key
from holistic_dagster.stages import arena, shadow, summaries
from holistic_dagster.stages import stability as stability_stage
from holistic_dagster.stages.completions import run_completions
from holistic_dagster.stages.dataset import build_dataset
from holistic_dagster.stages.prompts import build_prompts
from holistic_dagster.stages.scores import compute_scores

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


def _check_specs(key: list[str], stage: str) -> list[AssetCheckSpec]:
    return [
        AssetCheckSpec(c.name, asset=AssetKey(key), description=c.description, blocking=c.blocking)
        for c in quality.STAGE_CHECKS[stage]
    ]


def _results(outcomes: list[quality.CheckOutcome], stage: str) -> Iterator[AssetCheckResult]:
    errors = {c.name: c.blocking or c.error for c in quality.STAGE_CHECKS[stage]}
    for o in outcomes:
        yield AssetCheckResult(
            check_name=o.name,
            passed=o.passed,
            description=o.description,
            severity=AssetCheckSeverity.ERROR if errors[o.name] else AssetCheckSeverity.WARN,
            metadata={"details": MetadataValue.json(o.details)},
        )


def _keys(context: AssetExecutionContext) -> tuple[str, str]:
    key = context.partition_key
    assert isinstance(key, MultiPartitionKey)
    dims = key.keys_by_dimension
    return dims["model"], dims["version"]


def _model_stage(
    context: AssetExecutionContext,
    holistic: HolisticResource,
    scenario: str,
    stage_name: str,
    compute,
    backends: ModelBackends | None = None,
    toxicity: ToxicityClassifierResource | None = None,
) -> Iterator:
    """A model x version stage: compute it, then report its quality checks on what was stored."""
    model, version = _keys(context)
    stage = holistic.stage(context.run.run_id, backends, toxicity)
    with errors_redacted():  # Dagster stores a failed step's error, causes included, in its event log
        metadata = compute(stage, version, scenario, model)
    yield MaterializeResult(metadata=metadata)
    yield from _results(quality.check_stage(stage_name, stage, version, scenario, model), stage_name)


def scenario_assets(catalog: Catalog, scenario: str) -> list[AssetsDefinition]:
    spec = catalog.scenario(scenario)
    code_version = catalog.code_version(scenario)
    common = {"group_name": scenario, "code_version": code_version, "kinds": {"duckdb"}}

    @asset(
        key=[scenario, "dataset"],
        partitions_def=version_partitions,
        check_specs=_check_specs([scenario, "dataset"], "dataset"),
        description=f"{spec.description} The suite version's sample of instances, with references and the "
        f"checksum of every source file.",
        **common,
    )
    def dataset(context: AssetExecutionContext, holistic: HolisticResource):
        version = context.partition_key
        stage = holistic.stage(context.run.run_id)
        summary = build_dataset(stage, version, scenario)
        yield MaterializeResult(
            metadata={
                "num_test_instances": summary["num_test"],
                "num_train_instances": summary["num_train"],
                "source_files": MetadataValue.md("\n".join(f"- `{s}`" for s in summary["source_files"])),
            },
            # the content's version (source checksums + sample): the stale-partition schedule compares it
            data_version=DataVersion(summary["data_version"]),
        )
        yield from _results(quality.check_stage("dataset", stage, version, scenario), "dataset")

    @asset(
        key=[scenario, "prompts"],
        partitions_def=model_version_partitions,
        deps=[AssetDep(AssetKey([scenario, "dataset"]), partition_mapping=BY_VERSION)],
        check_specs=_check_specs([scenario, "prompts"], "prompts"),
        description=f"Rendered requests for {scenario} ({spec.adapter.method}), fitted to the model's context window.",
        **common,
    )
    def prompts(context: AssetExecutionContext, holistic: HolisticResource, model_backends: ModelBackends):
        backends = model_backends
        yield from _model_stage(context, holistic, scenario, "prompts", build_prompts, backends)

    @asset(
        key=[scenario, "completions"],
        pool="model_requests",  # concurrent runs share model servers: see dagster.yaml
        partitions_def=model_version_partitions,
        deps=[AssetKey([scenario, "prompts"])],
        check_specs=_check_specs([scenario, "completions"], "completions"),
        description=f"Raw model output for every {scenario} request: text, tokens, log-probabilities, latency.",
        **common,
    )
    def completions(context: AssetExecutionContext, holistic: HolisticResource, model_backends: ModelBackends):
        backends = model_backends
        yield from _model_stage(context, holistic, scenario, "completions", run_completions, backends)

    @asset(
        key=[scenario, "scores"],
        partitions_def=model_version_partitions,
        automation_condition=SCORES_FOLLOW,
        deps=[AssetKey([scenario, "completions"])],
        check_specs=_check_specs([scenario, "scores"], "scores"),
        description=f"{scenario} scores per instance and metric, and per metric family for the scenario.",
        **common,
    )
    def scores(
        context: AssetExecutionContext, holistic: HolisticResource, toxicity_classifier: ToxicityClassifierResource
    ):
        yield from _model_stage(context, holistic, scenario, "scores", compute_scores, toxicity=toxicity_classifier)

    return [dataset, prompts, completions, scores]


def leaderboard_asset(scenarios: list[str]) -> AssetsDefinition:
    @asset(
        key=["leaderboard"],
        partitions_def=version_partitions,
        automation_condition=SUMMARY_FOLLOWS,
        group_name="summary",
        kinds={"duckdb"},
        deps=[AssetDep(AssetKey([s, "scores"]), partition_mapping=BY_VERSION) for s in scenarios],
        check_specs=_check_specs(["leaderboard"], "leaderboard"),
    )
    def leaderboard(context: AssetExecutionContext, holistic: HolisticResource):
        """Models x scenarios for one suite version, one table per metric family (never blended).
        Read from DuckDB directly: cross-model summaries do not go through an IO manager."""
        version = context.partition_key
        stage = holistic.stage(context.run.run_id)
        summary = summaries.summarize(stage, version)
        cells = summary["cells"]
        metadata = {"num_models": int(cells["model"].nunique()), "num_scenarios": int(cells["scenario"].nunique())}
        applicability = stage.warehouse.df("SELECT * FROM applicability WHERE version = ?", [version])
        for table in headline_tables(cells, summary["win_rates"], applicability, summary["main_metric"]):
            metadata[table.family] = MetadataValue.md(headline_markdown(table))
        yield MaterializeResult(metadata=metadata)
        yield from _results(quality.check_stage("leaderboard", stage, version), "leaderboard")

    return leaderboard


def regressions_asset() -> AssetsDefinition:
    @asset(
        key=["regressions"],
        partitions_def=version_partitions,
        automation_condition=SUMMARY_FOLLOWS,
        group_name="summary",
        kinds={"duckdb"},
        deps=[AssetKey(["leaderboard"])],
        check_specs=_check_specs(["regressions"], "regressions"),
    )
    def regressions(context: AssetExecutionContext, holistic: HolisticResource):
        """Each model with a `previous` revision in resources/models.yaml against that revision, per scenario
        and family: paired difference, bootstrap CI, permutation p-value, verdict (table `comparisons`).
        The check fails, naming scenario and family, when a new revision is significantly worse."""
        version = context.partition_key
        stage = holistic.stage(context.run.run_id)
        frame = summaries.find_regressions(stage, version)
        counts = frame["verdict"].value_counts().to_dict() if len(frame) else {}
        yield MaterializeResult(
            metadata={
                "num_comparisons": len(frame),
                **{f"num_{k.replace(' ', '_')}": int(v) for k, v in counts.items()},
                "comparisons": MetadataValue.md(comparison_table(frame)) if len(frame) else "none",
            }
        )
        yield from _results(quality.check_regressions(frame), "regressions")

    return regressions


def alerts_asset() -> AssetsDefinition:
    @asset(
        key=["alerts"],
        partitions_def=version_partitions,
        automation_condition=SUMMARY_FOLLOWS,
        group_name="summary",
        kinds={"duckdb"},
        deps=[AssetKey(["leaderboard"]), AssetDep(AssetKey(["stability"]), partition_mapping=BY_VERSION)],
        check_specs=_check_specs(["alerts"], "alerts"),
    )
    def alerts(context: AssetExecutionContext, holistic: HolisticResource):
        """Graded regression alerts (resources/alerts.yaml): each model against its baseline per rule and
        scenario (metric drops with the paired test deciding significance, absolute floors, p50/p95 latency
        ratios): critical fails a blocking check (ERROR), warning a WARN check; the alert_webhook sensor posts
        them. Table `alerts`."""
        version = context.partition_key
        stage = holistic.stage(context.run.run_id)
        findings = summaries.grade_alerts(stage, version, holistic.deployment().alerts())
        levels = {level: sum(f.level == level for f in findings) for level in ("critical", "warning", "ok")}
        shown = [f.message for f in findings if f.level != "ok"][:30]
        yield MaterializeResult(
            metadata={**levels, "alerts": MetadataValue.md("\n".join(f"- {m}" for m in shown) or "none")}
        )
        yield from _results(quality.check_alerts(findings), "alerts")

    return alerts


def stability_asset(scenarios: list[str]) -> AssetsDefinition:
    @asset(
        key=["stability"],
        partitions_def=model_version_partitions,
        group_name="summary",
        kinds={"duckdb"},
        deps=[AssetKey([s, "completions"]) for s in scenarios],
        pool="model_requests",
    )
    def stability(context: AssetExecutionContext, holistic: HolisticResource, model_backends: ModelBackends):
        """Output stability of one model: a seeded sample of its generation requests (20 instances per scenario,
        the same for every model) asked twice more past the completion cache, each answer compared with the stored
        one (table `stability`); the alerts' stability rules compare the agreement with the baseline's."""
        model, version = _keys(context)
        stage = holistic.stage(context.run.run_id, model_backends)
        with errors_redacted():
            metadata = stability_stage.measure_stability(stage, version, model)
        return MaterializeResult(metadata={**metadata, "per_scenario": MetadataValue.json(metadata["per_scenario"])})

    return stability


def report_asset() -> AssetsDefinition:
    @asset(
        key=["report"],
        partitions_def=version_partitions,
        automation_condition=SUMMARY_FOLLOWS,
        group_name="summary",
        kinds={"html"},
        deps=[AssetKey(["leaderboard"]), AssetKey(["regressions"]), AssetKey(["arena", "ratings"])],
    )
    def report(context: AssetExecutionContext, holistic: HolisticResource):
        """The static HTML report of the suite version, a folder that opens offline: per family a models x
        scenarios table of headline metrics with 95% CIs and mean win rates; per scenario every metric, the
        accuracy under perturbation chart and the reliability diagram; per scenario a sample of predictions
        (exact prompt, completion, scores, top log-probabilities), two models side by side."""
        stage = holistic.stage(context.run.run_id)
        written = summaries.write_report(stage, context.partition_key)
        return MaterializeResult(
            metadata={
                "path": MetadataValue.path(written["path"]),
                "url": MetadataValue.url(Path(written["path"]).resolve().as_uri()),
                "num_models": written["num_models"],
                "num_scenarios": written["num_scenarios"],
                "num_pages": written["num_files"],
                "num_bytes": written["num_bytes"],
                "predictions_per_scenario": MetadataValue.json(written["num_predictions"]),
            }
        )

    return report


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
        check_specs=_check_specs(["arena", "battles"], "battles"),
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
        yield from _results(quality.check_stage("battles", stage, version), "battles")

    @asset(
        key=["arena", "ratings"],
        partitions_def=version_partitions,
        automation_condition=SUMMARY_FOLLOWS & AutomationCondition.all_deps_blocking_checks_passed(),
        group_name="arena",
        kinds={"duckdb"},
        deps=[AssetKey(["arena", "battles"])],
        check_specs=_check_specs(["arena", "ratings"], "arena_ratings"),
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
        yield from _results(quality.check_stage("arena_ratings", stage, version), "arena_ratings")

    return [battles, ratings]


def shadow_assets() -> list[AssetsDefinition]:
    """Shadow evaluation of candidate models on production traffic, one partition per traffic log file
    (resources/shadow.yaml): the log's records with PII removed, the candidates' answers to the same prompts,
    and the judge's verdicts with each candidate's win rate against production per traffic slice."""

    def _log(context: AssetExecutionContext, holistic: HolisticResource):
        spec = holistic.deployment().shadow()
        key = context.partition_key
        return spec, key, holistic.stage(context.run.run_id)

    @asset(
        key=["shadow", "traffic"],
        partitions_def=traffic_partitions,
        group_name="shadow",
        kinds={"duckdb"},
        check_specs=_check_specs(["shadow", "traffic"], "shadow_traffic"),
    )
    def traffic(context: AssetExecutionContext, holistic: HolisticResource):
        """The traffic log's requests and production's answers (OpenAI chat/completions or completions shape),
        with the configured PII fields dropped and PII patterns replaced before anything is stored."""
        spec, log, stage = _log(context, holistic)
        path = traffic_log_path(holistic.deployment().traffic_dir(), log)
        metadata = shadow.load_traffic(stage, spec, log, path)
        yield MaterializeResult(
            metadata={
                **metadata,
                "slices": MetadataValue.json(metadata["slices"]),
                "quarantined_lines": MetadataValue.json(metadata["quarantined_lines"]),
                "path": MetadataValue.path(str(path)),
            }
        )
        yield from _results(quality.check_traffic(stage.warehouse, log), "shadow_traffic")

    @asset(
        key=["shadow", "answers"],
        partitions_def=traffic_partitions,
        group_name="shadow",
        kinds={"duckdb"},
        deps=[AssetKey(["shadow", "traffic"])],
        pool="model_requests",
    )
    def answers(context: AssetExecutionContext, holistic: HolisticResource, model_backends: ModelBackends):
        """Each candidate model's answers to the log's prompts (greedy), through the completion cache."""
        spec, log, _ = _log(context, holistic)
        stage = holistic.stage(context.run.run_id, model_backends)
        with errors_redacted():
            metadata = shadow.answer_traffic(stage, spec, log)
        return MaterializeResult(metadata={k: MetadataValue.json(v) for k, v in metadata.items()})

    @asset(
        key=["shadow", "verdicts"],
        partitions_def=traffic_partitions,
        group_name="shadow",
        kinds={"duckdb"},
        deps=[AssetKey(["shadow", "answers"])],
        check_specs=_check_specs(["shadow", "verdicts"], "shadow_verdicts"),
    )
    def verdicts(context: AssetExecutionContext, holistic: HolisticResource, model_backends: ModelBackends):
        """The judge's comparison of each candidate answer with production's (both position orders), and each
        candidate's win rate against production per traffic slice with a 95% bootstrap CI."""
        spec, log, _ = _log(context, holistic)
        stage = holistic.stage(context.run.run_id, model_backends)
        with errors_redacted():
            metadata = shadow.judge_traffic(stage, spec, log)
        yield MaterializeResult(
            metadata={k: MetadataValue.json(v) if isinstance(v, dict) else v for k, v in metadata.items()}
        )
        yield from _results(
            quality.check_shadow_verdicts(stage.warehouse, log, spec.max_failure_rate), "shadow_verdicts"
        )

    return [traffic, answers, verdicts]


def traffic_log_path(directory: Path, log: str) -> Path:
    """The log file whose partition key is `log` (holistic_dagster.shadow.log_key of its name)."""
    found = [p for p in sorted(directory.glob("*.jsonl")) if log_key(p) == log]
    if not found:
        raise CatalogError(f"no traffic log for partition {log!r} in {directory}")
    return found[0]
