"""Automation end to end, in process: the registry sensor's ticks, the runs it requests, declarative
automation of the leaderboard, and the stale-partition schedule."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone

import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    SensorResult,
    SkipReason,
    build_schedule_context,
    build_sensor_context,
    evaluate_automation_conditions,
)

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.definitions import build_definitions
from holistic_dagster.defs.resources import HolisticResource
from holistic_dagster.defs.runner import evaluate_suite, quiet_logs
from holistic_dagster.settings import REPO_ROOT
from holistic_dagster.warehouse import Warehouse
from tests.conftest import write
from tests.defs.dagster_dev import dagster_dev, graphql
from tests.helpers import replaced, wait_until

# materializes a suite and the runs the sensor requests, in process and under `dagster dev`; the models are the
# weightless echo backend: what is tested is the automation, not a model
pytestmark = pytest.mark.slow

TICK = datetime(2026, 11, 30, 3, 0, tzinfo=timezone.utc)
ONE_MODEL = "models:\n  base: {backend: echo, path: echo}\n"
NEWCOMER = "  newcomer: {backend: echo, path: echo}\n"
SUITE = "version: {v}\nscenarios:\n  synthetic_reasoning: {{max_eval_instances: 8, seed: 5}}\n"


@pytest.fixture
def world(tmp_path, monkeypatch):
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    for suite in (tmp_path / "assets" / "suites").glob("*.yaml"):
        suite.unlink()
    write(tmp_path / "assets" / "suites" / "a1.yaml", SUITE.format(v="a1"))
    write(tmp_path / "resources" / "models.yaml", ONE_MODEL)
    monkeypatch.setenv("HOLISTIC_CATALOG", str(tmp_path / "assets"))
    monkeypatch.setenv("HOLISTIC_RESOURCES", str(tmp_path / "resources"))
    resource = HolisticResource(
        warehouse_path=str(tmp_path / "wh.duckdb"),
        catalog_dir=str(tmp_path / "assets"),
        models_file=str(tmp_path / "resources" / "models.yaml"),
    )
    defs = build_definitions(Catalog(tmp_path / "assets"), resource)
    (tmp_path / "dagster_home").mkdir()
    (tmp_path / "dagster_home" / "dagster.yaml").symlink_to(REPO_ROOT / "dagster.yaml")
    instance = DagsterInstance.local_temp(str(tmp_path / "dagster_home"))  # (a schedule context needs a ref)
    evaluate_suite(defs, instance, "a1", ["base"], catalog=Catalog(tmp_path / "assets"))
    return {"root": tmp_path, "defs": defs, "instance": instance, "wh": Warehouse(tmp_path / "wh.duckdb")}


def tick(world, cursor):
    sensor = world["defs"].get_sensor_def("model_registry")
    resources = {"holistic": world["defs"].resources["holistic"]}
    context = build_sensor_context(
        instance=world["instance"], cursor=cursor, definitions=world["defs"], resources=resources
    )
    result = sensor(context)
    if isinstance(result, SensorResult):
        for request in result.dynamic_partitions_requests or []:
            world["instance"].add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return result


def launch(world, request):
    """What the daemon does with a run request."""
    job = world["defs"].resolve_job_def(request.job_name)
    result = job.execute_in_process(
        partition_key=request.partition_key,
        instance=world["instance"],
        run_config=quiet_logs(),
        tags=request.tags,
        asset_selection=request.asset_selection,
    )
    assert result.success
    return result


def follow_automation(world, cursor=None):
    """One evaluation of the declarative automation conditions, and the summary runs it requests, launched
    (what the daemon's automation sensor does)."""
    result = evaluate_automation_conditions(defs=world["defs"], instance=world["instance"], cursor=cursor)
    summaries = [AssetKey(["leaderboard"]), AssetKey(["regressions"]), AssetKey(["report"])]
    requested = {key: set(result.get_requested_partitions(key)) for key in summaries}
    for version in set().union(*requested.values()):
        keys = [k for k in summaries if version in requested[k]]
        job = world["defs"].resolve_job_def("leaderboard_job")
        assert job.execute_in_process(
            partition_key=version, instance=world["instance"], asset_selection=keys, run_config=quiet_logs()
        ).success
    return result.cursor, requested


def test_a_new_model_line_gets_evaluated_and_onto_the_leaderboard(world):
    first = tick(world, None)
    assert isinstance(first, SensorResult) and not first.run_requests  # first start: no run flood
    automation, requested = follow_automation(world)  # the automation sensor's first evaluation: nothing to do
    assert not any(requested.values())
    cursor = first.cursor
    assert isinstance(tick(world, cursor), SkipReason)  # nothing new

    write(
        world["root"] / "resources" / "models.yaml",
        ONE_MODEL + NEWCOMER,
    )
    second = tick(world, cursor)
    (run,) = second.run_requests
    assert run.job_name == "evaluate_model" and run.tags["holistic/reason"] == "new model"
    assert run.partition_key.keys_by_dimension == {"model": "newcomer", "version": "a1"}  # base is not re-run
    launch(world, run)
    assert world["wh"].df("SELECT count(*) FROM instance_scores WHERE model = 'newcomer'").iat[0, 0] > 0

    _, requested = follow_automation(world, automation)
    assert "a1" in requested[AssetKey(["leaderboard"])]  # the leaderboard follows the new scores
    board = world["wh"].df("SELECT DISTINCT model FROM leaderboard WHERE version = 'a1'")
    assert set(board["model"]) == {"base", "newcomer"}
    again = tick(world, second.cursor)
    assert isinstance(again, SkipReason) or not again.run_requests  # the same request is not made twice

    # a new revision of an existing model is evaluated again; a new suite version for every model
    write(
        world["root"] / "resources" / "models.yaml",
        replaced(ONE_MODEL, "}", ', revision: "r2"}') + NEWCOMER,
    )
    revised = tick(world, second.cursor)
    assert [r.partition_key.keys_by_dimension["model"] for r in revised.run_requests] == ["base"]
    assert revised.run_requests[0].tags["holistic/reason"] == "new revision"
    write(world["root"] / "assets" / "suites" / "a2.yaml", SUITE.format(v="a2"))
    new_suite = tick(world, revised.cursor)
    (datasets,) = new_suite.run_requests  # datasets first; the evaluations wait for them
    assert datasets.job_name == "datasets" and datasets.partition_key == "a2"
    launch(world, datasets)
    ready = tick(world, new_suite.cursor)
    evaluations = sorted(r.partition_key.keys_by_dimension["model"] for r in ready.run_requests)
    assert evaluations == ["base", "newcomer"] and all(
        r.tags["holistic/reason"] == "new suite version" for r in ready.run_requests
    )


def test_the_schedule_reruns_partitions_whose_scenario_changed(world):
    schedule = world["defs"].get_schedule_def("rerun_stale")
    assert schedule.cron_schedule == "0 3 * * *"
    resources = {"holistic": world["defs"].resources["holistic"]}
    # (with: a schedule context enters an instance of its own, and leaves it as Dagster's current state storage
    # for every later definitions load in the process unless it is exited)
    with build_schedule_context(instance=world["instance"], scheduled_execution_time=TICK, resources=resources) as c:
        fresh = schedule(c)
    assert isinstance(fresh, SkipReason), [r.tags for r in fresh]
    spec = world["root"] / "assets" / "scenarios" / "synthetic_reasoning.yaml"
    spec.write_text(spec.read_text() + "# edited\n")
    changed = build_definitions(Catalog(world["root"] / "assets"), world["defs"].resources["holistic"])
    with build_schedule_context(instance=world["instance"], scheduled_execution_time=TICK, resources=resources) as c:
        (run,) = changed.get_schedule_def("rerun_stale")(c)
    assert run.partition_key.keys_by_dimension == {"model": "base", "version": "a1"}
    assert run.tags["holistic/reason"] == "stale: synthetic_reasoning definition changed"


SENSOR_CURSOR = """{ sensorOrError(sensorSelector: {repositoryLocationName: "%s", repositoryName: "__repository__",
  sensorName: "model_registry"}) { ... on Sensor { sensorState { typeSpecificData { ... on SensorData {
  lastCursor } } } } } }"""


def test_the_daemon_brings_a_new_model_onto_the_leaderboard_and_report_without_a_click(world):
    """Reproduces issue 11: under `dagster dev` the registry sensor evaluated a new model, but the leaderboard,
    regressions and report never followed (Dagster's automation sensor is stopped unless declared running)."""
    root, wh = world["root"], world["wh"]
    report = root / "reports" / "a1" / "index.html"
    assert "newcomer" not in report.read_text()
    env = {
        "HOLISTIC_CATALOG": str(root / "assets"),
        "HOLISTIC_RESOURCES": str(root / "resources"),
        "HOLISTIC_WAREHOUSE": str(wh.path),
        "DAGSTER_HOME": str(root / "dagster_home"),
    }
    # the sensors tick as often as the daemon looks (every 5 s; they tick every 30 s by default)
    write(root / "resources" / "automation.yaml", "sensor_interval_seconds: 5\n")
    log = root / "dagster_dev.log"
    with dagster_dev(env, log) as (port, location):
        wait_until(  # the registry sensor's first tick records the registry as it is
            lambda: graphql(port, SENSOR_CURSOR % location)["sensorOrError"]["sensorState"]["typeSpecificData"][
                "lastCursor"
            ],
            timeout_s=180,
            interval_s=2,
            what="the model_registry sensor's first tick",
            diagnostics=lambda: log.read_text()[-3000:],
        )
        write(root / "resources" / "models.yaml", ONE_MODEL + NEWCOMER)

        def summarized() -> bool:
            rates = wh.df("SELECT DISTINCT model FROM win_rates WHERE version = 'a1'")
            return set(rates["model"]) == {"base", "newcomer"} and "newcomer" in report.read_text()

        wait_until(
            summarized,
            timeout_s=600,
            interval_s=5,
            what="the new model's evaluation and the leaderboard and report that follow it",
            diagnostics=lambda: log.read_text()[-5000:],
            ignoring=(OSError,),
        )
    runs = world["instance"].get_runs()
    by_sensor = {r.tags.get("dagster/sensor_name") for r in runs if "leaderboard" in str(r.asset_selection)}
    assert "automation_conditions" in by_sensor, [dict(r.tags) for r in runs]
