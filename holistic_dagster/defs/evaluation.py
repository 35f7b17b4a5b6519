"""The evaluation: per scenario its dataset (per suite version), and per model its prompts, completions and scores
(the quality checks of each), the jobs that run them, the sensor that evaluates new models, new revisions and new
suite versions, the schedule that re-evaluates stale partitions, and the sensor that marks killed in-process runs
failed. What to run is decided in automation/planning.py; this module reads the Dagster instance and turns the
decisions into requests."""

import dagster as dg

from holistic_dagster import quality, settings
from holistic_dagster.automation import planning
from holistic_dagster.clients.identity import model_identities
from holistic_dagster.clients.registry import installed_models
from holistic_dagster.config.automation import AutomationSettings
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.defs import jobs
from holistic_dagster.defs.common import BY_VERSION, SCORES_FOLLOW, check_results, check_specs, model_stage
from holistic_dagster.defs.partitions import model_partitions, model_version_partitions, version_partitions
from holistic_dagster.defs.resources import HolisticResource, ModelBackends, ToxicityClassifierResource
from holistic_dagster.defs.runner import fail_abandoned_runs
from holistic_dagster.efficient.anchors import DEFAULT_ANCHORS
from holistic_dagster.results.efficient import all_estimates, measured_accuracy
from holistic_dagster.stages.completions import run_completions
from holistic_dagster.stages.dataset import build_dataset
from holistic_dagster.stages.efficient import fit_anchors
from holistic_dagster.stages.prompts import build_prompts
from holistic_dagster.stages.scores import compute_scores


def definitions(catalog: Catalog, scenarios: list[str], automation: AutomationSettings) -> dg.Definitions:
    """The evaluation's assets, jobs, sensors and schedule for the catalog's loadable scenarios."""
    datasets_job = dg.define_asset_job(
        jobs.DATASETS_JOB,
        selection=jobs.selection(jobs.dataset_keys(scenarios)),
        description="Load and sample every scenario's data for a suite version.",
    )
    evaluate_job = dg.define_asset_job(
        jobs.EVALUATE_JOB,
        selection=jobs.selection(jobs.model_keys(scenarios)),
        description="Prompts, completions and scores of every scenario for one model.",
    )
    anchors_job = dg.define_asset_job(
        jobs.ANCHORS_JOB,
        selection=jobs.selection(jobs.anchor_keys(scenarios)),
        description="Fit every scenario's anchors for efficient evaluation on the models evaluated in full.",
    )
    code_versions = {s: catalog.code_version(s) for s in scenarios}
    return dg.Definitions(
        assets=[a for s in scenarios for a in [*scenario_assets(catalog, s), anchors_asset(catalog, s)]],
        jobs=[datasets_job, evaluate_job, anchors_job],
        sensors=[
            make_registry_sensor(datasets_job, evaluate_job, automation.sensor_interval_seconds),
            make_completion_sensor(evaluate_job, automation.housekeeping_interval_seconds),
            dg.sensor(
                name="abandoned_runs",
                default_status=dg.DefaultSensorStatus.RUNNING,
                minimum_interval_seconds=automation.housekeeping_interval_seconds,
            )(abandoned_runs),
        ],
        schedules=[
            make_stale_schedule(
                evaluate_job,
                lambda instance: find_stale(instance, code_versions, scenarios),
                automation.rerun_stale_cron,
            )
        ],
    )


def scenario_assets(catalog: Catalog, scenario: str) -> list[dg.AssetsDefinition]:
    spec = catalog.scenario(scenario)
    code_version = catalog.code_version(scenario)
    common = {"group_name": scenario, "code_version": code_version, "kinds": {"duckdb"}}

    @dg.asset(
        key=[scenario, "dataset"],
        partitions_def=version_partitions,
        check_specs=check_specs([scenario, "dataset"], "dataset"),
        description=f"{spec.description} The suite version's sample of instances, with references and the "
        f"checksum of every source file.",
        **common,
    )
    def dataset(context: dg.AssetExecutionContext, holistic: HolisticResource):
        version = context.partition_key
        stage = holistic.stage(context.run.run_id)
        summary = build_dataset(stage, version, scenario)
        yield dg.MaterializeResult(
            metadata={
                "num_test_instances": summary["num_test"],
                "num_train_instances": summary["num_train"],
                "source_files": dg.MetadataValue.md("\n".join(f"- `{s}`" for s in summary["source_files"])),
            },
            # the content's version (source checksums + sample): the stale-partition schedule compares it
            data_version=dg.DataVersion(summary["data_version"]),
        )
        yield from check_results(quality.check_stage("dataset", stage, version, scenario), "dataset")

    @dg.asset(
        key=[scenario, "prompts"],
        partitions_def=model_version_partitions,
        deps=[dg.AssetDep(dg.AssetKey([scenario, "dataset"]), partition_mapping=BY_VERSION)],
        check_specs=check_specs([scenario, "prompts"], "prompts"),
        description=f"Rendered requests for {scenario} ({spec.adapter.method}), fitted to the model's context window.",
        **common,
    )
    def prompts(context: dg.AssetExecutionContext, holistic: HolisticResource, model_backends: ModelBackends):
        yield from model_stage(context, holistic, scenario, "prompts", build_prompts, model_backends)

    @dg.asset(
        key=[scenario, "completions"],
        pool=jobs.MODEL_REQUESTS_POOL,
        partitions_def=model_version_partitions,
        deps=[dg.AssetKey([scenario, "prompts"])],
        check_specs=check_specs([scenario, "completions"], "completions"),
        description=f"Raw model output for every {scenario} request: text, tokens, log-probabilities, latency.",
        **common,
    )
    def completions(context: dg.AssetExecutionContext, holistic: HolisticResource, model_backends: ModelBackends):
        yield from model_stage(context, holistic, scenario, "completions", run_completions, model_backends)

    @dg.asset(
        key=[scenario, "scores"],
        partitions_def=model_version_partitions,
        automation_condition=SCORES_FOLLOW,
        deps=[dg.AssetKey([scenario, "completions"])],
        check_specs=check_specs([scenario, "scores"], "scores"),
        description=f"{scenario} scores per instance and metric, and per metric family for the scenario.",
        **common,
    )
    def scores(
        context: dg.AssetExecutionContext, holistic: HolisticResource, toxicity_classifier: ToxicityClassifierResource
    ):
        yield from model_stage(context, holistic, scenario, "scores", compute_scores, toxicity=toxicity_classifier)

    return [dataset, prompts, completions, scores]


def anchors_asset(catalog: Catalog, scenario: str) -> dg.AssetsDefinition:
    @dg.asset(
        key=[scenario, jobs.ANCHORS],
        partitions_def=version_partitions,
        group_name=scenario,
        code_version=catalog.code_version(scenario),
        kinds={"duckdb"},
        deps=[dg.AssetDep(dg.AssetKey([scenario, "scores"]), partition_mapping=BY_VERSION)],
        check_specs=check_specs([scenario, jobs.ANCHORS], jobs.ANCHORS),
    )
    def anchors(context: dg.AssetExecutionContext, holistic: HolisticResource):
        """The instances a model evaluated efficiently answers, and how its full-draw score is estimated from them:
        fitted on every model with results on the whole draw (an item response model from 10 models on, else a
        random sample), validated by leaving each of them out. Read from DuckDB directly (a fan-in over models)."""
        version = context.partition_key
        stage = holistic.stage(context.run.run_id)
        k = int(context.run.tags.get(jobs.EFFICIENT_TAG, DEFAULT_ANCHORS))
        facts = fit_anchors(stage, version, scenario, k)
        validation = facts["validation"]
        yield dg.MaterializeResult(
            metadata={
                "method": facts["method"],
                "anchors": f"{facts['anchors']} of {facts['n_full']} instances",
                "fitted_on": dg.MetadataValue.md("\n".join(f"- {m}" for m in facts["models"]) or "no model"),
                **{f"validation_{k}": round(v, 4) if isinstance(v, float) else v for k, v in validation.items()},
            }
        )
        yield from check_results(quality.check_stage(jobs.ANCHORS, stage, version, scenario), jobs.ANCHORS)

    return anchors


def datasets_ready(instance, deployment: Deployment, version: str) -> bool:
    """Every scenario of the version that runs here has its dataset materialized for that version."""
    return all(
        version in instance.get_materialized_partitions(key) for key in jobs.dataset_keys(_suite(deployment, version))
    )


def _suite(deployment: Deployment, version: str) -> list[str]:
    """The version's scenarios a run covers: those whose data is here (an optional one without data is skipped;
    a sensor never downloads)."""
    return deployment.runnable(version)[0]


def _evaluate_request(run: planning.EvaluateRun, deployment: Deployment, job_name: str | None = None) -> dg.RunRequest:
    tags = dict(run.tags)
    if run.reason == "new model" and (anchors := deployment.automation().efficient_anchors):
        tags[jobs.EFFICIENT_TAG] = str(anchors)  # resources/automation.yaml: efficiently first
    return dg.RunRequest(
        job_name=job_name,
        partition_key=dg.MultiPartitionKey({"model": run.model, "version": run.version}),
        run_key=run.run_key,
        asset_selection=jobs.model_keys(_suite(deployment, run.version)),
        tags=tags,
    )


def make_completion_sensor(evaluate_job, interval_seconds: int):
    @dg.sensor(
        name="complete_undecided",
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=interval_seconds,
        jobs=[evaluate_job],
    )
    def complete_undecided(context: dg.SensorEvaluationContext, holistic: HolisticResource):
        """With `efficient_anchors` in resources/automation.yaml: evaluates in full each scenario on which a model
        evaluated efficiently has an estimate whose interval holds another model's measured value (its place
        there is undecided). What to run is decided by planning.undecided_estimates."""
        deployment = holistic.deployment()
        if not deployment.automation().efficient_anchors or not deployment.warehouse_path.exists():
            return dg.SkipReason("efficient_anchors is not set in resources/automation.yaml")
        warehouse = deployment.warehouse()
        plan = planning.undecided_estimates(
            all_estimates(warehouse, deployment.catalog()).to_dict("records"),
            measured_accuracy(warehouse).to_dict("records"),
        )
        if not plan:
            return dg.SkipReason("no estimate leaves a model's place undecided")
        return [
            dg.RunRequest(
                partition_key=dg.MultiPartitionKey({"model": run.model, "version": run.version}),
                run_key=run.run_key,
                asset_selection=jobs.model_keys(run.scenarios),
                tags=run.tags,
            )
            for run in plan
        ]

    return complete_undecided


def make_registry_sensor(datasets_job, evaluate_job, interval_seconds: int):
    @dg.sensor(
        name="model_registry",
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=interval_seconds,
        jobs=[datasets_job, evaluate_job],
    )
    def model_registry(context: dg.SensorEvaluationContext, holistic: HolisticResource):
        """Watches the model registry the `holistic` resource names (resources/models.yaml; for entries with
        `watch: true`, also the TGI server's /info or the OpenAI-compatible server's /v1/models) and its
        catalog's suites/. What to run is decided by planning.plan_registry_tick. A ladder model counts from
        the tick after its weights are installed (then it is a new model)."""
        deployment = holistic.deployment()
        catalog = deployment.catalog()
        models, not_installed = installed_models(holistic.models(), settings.model_cache_dir())
        for note in not_installed:
            context.log.info(note)
        versions = catalog.suite_versions()
        previous = planning.read_cursor(context.cursor)
        identities, warnings = model_identities(models, previous)
        for warning in warnings:
            context.log.warning(warning)
        plan = planning.plan_registry_tick(
            previous,
            identities,
            catalog.automatic_versions(),  # not a suite marked `automatic: false`: it runs by hand only
            catalog.newest_version(),
            lambda version: datasets_ready(context.instance, deployment, version),
        )
        for line in plan.log:
            context.log.info(line)
        partitions = []
        if new := [m for m in models if not context.instance.has_dynamic_partition(model_partitions.name, m)]:
            partitions.append(model_partitions.build_add_request(new))
        if new := [v for v in versions if not context.instance.has_dynamic_partition(version_partitions.name, v)]:
            partitions.append(version_partitions.build_add_request(new))
        cursor = planning.write_cursor(plan.cursor)
        if previous is None:  # the first tick records the registry
            return dg.SensorResult(dynamic_partitions_requests=partitions, cursor=cursor)
        runs = [
            dg.RunRequest(
                job_name=datasets_job.name,
                partition_key=run.version,
                run_key=run.run_key,
                asset_selection=jobs.dataset_keys(_suite(deployment, run.version)),
            )
            for run in plan.datasets
        ]
        runs += [_evaluate_request(run, deployment, evaluate_job.name) for run in plan.evaluations]
        if not runs and not partitions:
            return dg.SkipReason("model registry and suites unchanged")
        return dg.SensorResult(run_requests=runs, dynamic_partitions_requests=partitions, cursor=cursor)

    return model_registry


def abandoned_runs(context: dg.SensorEvaluationContext):
    """Marks failed the in-process runs (`holistic demo` / `evaluate`) whose process was killed before it
    finished them: otherwise they show STARTED forever and hold back declarative automation."""
    failed = fail_abandoned_runs(context.instance)
    return dg.SkipReason(f"marked failed: {', '.join(failed)}" if failed else "no abandoned runs")


def make_stale_schedule(evaluate_job, stale_partitions, cron_schedule: str):
    @dg.schedule(
        name="rerun_stale",
        cron_schedule=cron_schedule,
        job=evaluate_job,
        default_status=dg.DefaultScheduleStatus.RUNNING,
    )
    def rerun_stale(context: dg.ScheduleEvaluationContext, holistic: HolisticResource):
        """Re-evaluates every model x version partition whose prompts or scores were produced by an older code
        version of their scenario (its YAML or template changed) or from an older dataset materialization."""
        stale = stale_partitions(context.instance)
        if not stale:
            return dg.SkipReason("nothing stale")
        deployment = holistic.deployment()
        tick = context.scheduled_execution_time.isoformat()
        return [_evaluate_request(run, deployment) for run in planning.stale_runs(stale, tick)]

    return rerun_stale


def prompts_builds(instance, scenarios: list[str]) -> list[planning.PromptsBuild]:
    """The latest prompts materialization of every evaluated partition, as plain records for
    planning.find_stale."""

    def history(key: dg.AssetKey, partition: str, limit: int = 1):
        return instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=limit
        ).records

    builds = []
    for scenario in scenarios:
        prompts_key, dataset_key = dg.AssetKey([scenario, "prompts"]), dg.AssetKey([scenario, "dataset"])
        for partition in instance.get_materialized_partitions(prompts_key):
            # a model x version key reads "<model>|<version>" (dimensions in alphabetical order)
            if "|" not in partition or not (records := history(prompts_key, partition)):
                continue
            model, version = partition.split("|")
            tags = records[0].asset_materialization.tags
            datasets = history(dataset_key, version, limit=100)
            builds.append(
                planning.PromptsBuild(
                    scenario=scenario,
                    model=model,
                    version=version,
                    code_version=tags.get("dagster/code_version"),
                    # the dataset materialization the prompts were built from
                    dataset_used=tags.get(f"dagster/input_event_pointer/{scenario}/dataset"),
                    dataset_history=[
                        (str(r.storage_id), r.asset_materialization.tags.get("dagster/data_version")) for r in datasets
                    ],
                )
            )
    return builds


def find_stale(instance, code_versions: dict[str, str], scenarios: list[str]) -> dict[tuple[str, str], set[str]]:
    """{(model, version): reasons} for every evaluated partition whose prompts are stale (planning.find_stale)."""
    return planning.find_stale(prompts_builds(instance, scenarios), code_versions)
