"""Materializing a suite version from code, as Dagster runs that the UI then shows (the CLI's evaluate and demo
through defs/local.py, the Python API and the tests): datasets for the version, each model's evaluation, then the
summaries; the arena's round; the sequential gate's batches; and runs a killed process left marked as started."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psutil
from dagster import (
    DagsterInstance,
    DagsterRunStatus,
    Definitions,
    ExecuteInProcessResult,
    MultiPartitionKey,
    RunsFilter,
)

from holistic_dagster import settings
from holistic_dagster.automation import freshness
from holistic_dagster.config.catalog import Catalog
from holistic_dagster.defs import ledger
from holistic_dagster.defs.jobs import (
    ANCHORS_JOB,
    ARENA_JOB,
    BUDGET_TAG,
    DATASETS_JOB,
    EFFICIENT_TAG,
    EVALUATE_JOB,
    LEADERBOARD_JOB,
    SAMPLE_TAG,
    anchor_keys,
    dataset_keys,
    model_keys,
    scenario_keys,
)
from holistic_dagster.defs.partitions import model_partitions, version_partitions
from holistic_dagster.errors import HolisticError
from holistic_dagster.stages.budget import check_budget, estimate_cost, left_of, spent_on
from holistic_dagster.stages.context import StageContext


def quiet_logs() -> dict:
    """The run config of a run the CLI starts: Dagster's console logger says nothing (a failed step's stack trace
    included: RunFailed prints each failure's one line and where the full log is), unless HOLISTIC_DEBUG
    (`holistic --debug`) asks for its warnings and errors."""
    level = "WARNING" if os.environ.get("HOLISTIC_DEBUG", "") not in ("", "0") else "CRITICAL"
    return {"loggers": {"console": {"config": {"log_level": level}}}}


# which process executes an in-process run: a run whose process has died unfinished is marked failed
HOST_TAG, PID_TAG, PROCESS_START_TAG = "holistic/host", "holistic/pid", "holistic/process_started"


def process_tags() -> dict[str, str]:
    me = psutil.Process()
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(me.pid), PROCESS_START_TAG: f"{me.create_time():.2f}"}


def _alive(pid: int, started: float) -> bool:
    try:
        return abs(psutil.Process(pid).create_time() - started) < 0.05  # the same process, not a reused pid
    except psutil.Error:
        return False


def fail_abandoned_runs(instance: DagsterInstance) -> list[str]:
    """Marks failed the runs this host executed in process (the CLI, evaluate_suite) whose process ended
    without finishing them (SIGKILL, OOM, a closed laptop): they would show STARTED forever and hold back
    declarative automation, and Dagster's run monitoring cannot see a process its run launcher did not start.
    Returns their run ids."""
    host, failed = socket.gethostname(), []
    unfinished = [DagsterRunStatus.STARTING, DagsterRunStatus.STARTED]
    for run in instance.get_runs(RunsFilter(statuses=unfinished, tags={HOST_TAG: host})):
        pid, started = int(run.tags[PID_TAG]), float(run.tags[PROCESS_START_TAG])
        if not _alive(pid, started):
            instance.report_run_failed(
                run, f"the process that ran it (pid {pid} on {host}) ended without finishing it (killed or crashed)"
            )
            if instance.event_log_storage.supports_global_concurrency_limits:  # its pool slots, held till now
                instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
            failed.append(run.run_id)
    ledger.forget(ledger.killed(instance.root_directory))  # their marks: dealt with
    return failed


class RunFailed(HolisticError):
    def __init__(self, label: str, result: ExecuteInProcessResult):
        failures = [
            f"{e.step_key}: {_root_cause(e.step_failure_data.error)}"
            for e in result.all_events
            if e.is_step_failure and e.step_failure_data and e.step_failure_data.error
        ]
        # a blocking check's own finding (counts, reason), not just Dagster's "1 blocking asset check failed"
        failures += [
            f"check {c.check_name} on {c.asset_key.to_user_string()}: {c.description or 'failed'}"
            for c in result.get_asset_check_evaluations()
            if not c.passed and c.blocking
        ]
        self.result = result
        where = (
            f"the full log: run {result.run_id[:8]} in the Dagster UI (holistic ui); Dagster's own stack traces: "
            "holistic --debug"
        )
        super().__init__(
            f"{label} failed (Dagster run {result.run_id}):\n"
            + "\n".join([*(failures or ["see the Dagster UI"]), where])
        )


def _root_cause(error) -> str:
    """The user's error under Dagster's wrappers: the first of ours (a HolisticError such as a DataFormatError or
    a CatalogError, which names the file and says what is wrong), not the library error it was raised from (a
    truncated GGUF's "cannot reshape array"); else the innermost error."""
    ours = _our_errors()
    chain = []
    while error is not None:
        chain.append(error)
        error = error.cause
    mine = [e for e in chain if e.cls_name in ours]
    return (mine[0] if mine else chain[-1]).message.strip()


def _our_errors() -> set[str]:
    found, todo = set(), [HolisticError]
    while todo:
        cls = todo.pop()
        found.add(cls.__name__)
        todo += cls.__subclasses__()
    return found


@dataclass
class SuiteRun:
    label: str
    result: ExecuteInProcessResult | None  # None: skipped
    skipped: str = ""  # why (its inputs are unchanged since the run it names)


def register_partitions(instance: DagsterInstance, models: Sequence[str], versions: Sequence[str]) -> None:
    for partitions, keys in ((model_partitions, models), (version_partitions, versions)):
        new = [k for k in keys if not instance.has_dynamic_partition(partitions.name, k)]
        if new:
            instance.add_dynamic_partitions(partitions.name, new)


def evaluate_suite(
    defs: Definitions,
    instance: DagsterInstance,
    version: str,
    models: Sequence[str],
    announce: Callable[[str], None] = lambda _: None,
    catalog: Catalog | None = None,
    skip_unchanged: bool = False,
    max_cost: float | None = None,
    efficient: int | None = None,
) -> list[SuiteRun]:
    """Runs `datasets`, `evaluate_model` per model, and `leaderboard_job` on the suite version's scenarios;
    efficient: each model answers only that many anchors per scenario (fitted first by `anchors_job` on the models
    evaluated in full) and its metrics are estimated (the main accuracy metric by the item response fit, every
    other mean over instances as the anchors' stratified sample);
    raises RunFailed on the first failure. skip_unchanged: a step whose inputs are those of its last successful
    run, and whose outputs remain, is not run (holistic_dagster.freshness); each step's inputs are taken just
    before it, after the steps it depends on. With a budget (max_cost, or the suite's) a priced model's prompts
    are built first and its whole evaluation estimated: past the budget, BudgetExceeded before any request."""
    deployment = defs.resources["holistic"].deployment()
    catalog = catalog or deployment.catalog()
    # a suite's optional scenario without data here (downloaded first where downloads are on) is skipped, with why
    scenarios, skipped = deployment.runnable(version, download=settings.allow_download())
    for name, why in skipped.items():
        announce(f"{name}: skipped, {why}")
    if abandoned := fail_abandoned_runs(instance):
        announce(f"marked {len(abandoned)} run(s) failed whose process was killed: {', '.join(abandoned)}")
    register_partitions(instance, models, [version])
    warehouse, registry = deployment.warehouse(), deployment.models()
    jobs = [
        (DATASETS_JOB, version, dataset_keys(scenarios)),
        *[(EVALUATE_JOB, MultiPartitionKey({"model": m, "version": version}), model_keys(scenarios)) for m in models],
        (LEADERBOARD_JOB, version, None),
    ]
    steps = freshness.suite_steps(deployment, version, models, registry, efficient)
    budget = max_cost if max_cost is not None else catalog.suite(version).max_cost
    source = "--max-cost" if max_cost is not None else f"suite {version}'s max_cost"
    tags = process_tags() | ({BUDGET_TAG: repr(max_cost)} if max_cost is not None else {})
    tags |= {EFFICIENT_TAG: str(efficient)} if efficient else {}

    def execute(label: str, job: str, key, selection):
        with ledger.running(instance.root_directory):
            result = defs.resolve_job_def(job).execute_in_process(
                partition_key=key,
                instance=instance,
                run_config=quiet_logs(),
                raise_on_error=False,
                asset_selection=selection,
                tags=tags,
            )
        if not result.success:
            raise RunFailed(label, result)
        return result

    runs, anchored = [], False
    for (job, key, selection), (label, inputs) in zip(jobs, steps, strict=True):
        if efficient and job == EVALUATE_JOB and not anchored:  # the anchors, before the first model asks them
            announce(f"anchors for {version} ({efficient} per scenario)")
            execute("anchors", ANCHORS_JOB, version, anchor_keys(scenarios))
            anchored = True
        step = inputs()
        if skip_unchanged and freshness.mark_skippable(warehouse, step).skip_reason:
            announce(f"{label}: skipped, {step.skip_reason}")
            runs.append(SuiteRun(label, None, step.skip_reason))
            continue
        announce(label)
        model = key.keys_by_dimension["model"] if job == EVALUATE_JOB else None
        if model is not None and budget is not None and getattr(registry.get(model), "price", None) is not None:
            execute(f"{label} (prompts)", job, key, scenario_keys(scenarios, ("prompts",)))
            announce(_within_budget(StageContext(warehouse, catalog, deployment), version, model, scenarios,
                                    budget, source))  # fmt: skip
            selection = scenario_keys(scenarios, ("completions", "scores"))
        result = execute(label, job, key, selection)
        # the files as the step left them: those a dataset read, a demo model's checkpoint once built
        freshness.record(warehouse, step, result.run_id, inputs().files)
        runs.append(SuiteRun(label, result))
    return runs


def _within_budget(stage: StageContext, version: str, model: str, scenarios, budget: float, source: str) -> str:
    """Refuses (BudgetExceeded) an evaluation whose estimate is past what is left of its budget (what earlier runs
    spent on it counted); else says the estimate against what is left."""
    estimate = estimate_cost(stage, version, model, scenarios)
    left, where = left_of(budget, spent_on(stage, model, version), source)
    check_budget(estimate, left, where)
    return (
        f"{model}: estimated at most ${estimate.cost:.4f} of the ${left:.4f} left of the ${budget:g} budget ({where})"
    )


def run_arena(defs: Definitions, instance: DagsterInstance, version: str) -> ExecuteInProcessResult:
    """The arena job (battles judged by the suite's judges, then the ratings) for a suite version, as a Dagster
    run the UI shows; raises RunFailed naming the failed step or blocking check."""
    if abandoned := fail_abandoned_runs(instance):
        logging.getLogger("holistic_dagster").warning("marked failed, their process was killed: %s", abandoned)
    register_partitions(instance, [], [version])
    with ledger.running(instance.root_directory):
        result = defs.resolve_job_def(ARENA_JOB).execute_in_process(
            partition_key=version, instance=instance, run_config=quiet_logs(), raise_on_error=False, tags=process_tags()
        )
    if not result.success:
        raise RunFailed("arena", result)
    return result


def gate_in_batches(
    defs: Definitions,
    instance: DagsterInstance,
    version: str,
    candidate: str,
    baseline: str,
    rule,
    alpha: float,
    main_metric: dict[str, str],
    look: int,
    announce: Callable[[str], None] = lambda _: None,
):
    """`holistic gate --sequential --evaluate`: the candidate answers each scenario's instances in the seeded order,
    `look` more per Dagster run, until every scenario's sequential test has stopped (alerts.sequential_gate)."""
    from holistic_dagster.alerts.sequential_gate import BatchedGate

    deployment = defs.resources["holistic"].deployment()
    warehouse = deployment.warehouse()
    scenarios = deployment.runnable(version)[0]
    gate = BatchedGate(warehouse, version, candidate, baseline, rule, alpha, main_metric, scenarios, look)
    if abandoned := fail_abandoned_runs(instance):
        announce(f"marked {len(abandoned)} run(s) failed whose process was killed: {', '.join(abandoned)}")
    register_partitions(instance, [candidate], [version])
    key = MultiPartitionKey({"model": candidate, "version": version})
    while (batch := gate.batch()) is not None:
        n = max(batch.values())
        announce(f"{candidate}: the first {n} instances of {', '.join(batch)}")
        with ledger.running(instance.root_directory):
            result = defs.resolve_job_def(EVALUATE_JOB).execute_in_process(
                partition_key=key, instance=instance, run_config=quiet_logs(), raise_on_error=False,
                asset_selection=model_keys(batch), tags=process_tags() | {SAMPLE_TAG: str(n)},
            )  # fmt: skip
        if not result.success:
            raise RunFailed(f"{candidate}'s batch of {n}", result)
        gate.observe(warehouse)
    return gate.result
