"""Dagster instance storage on a real, throwaway PostgreSQL cluster (initdb from the installed binaries, as a
non-root user, on a free loopback port): runs, event logs, dynamic partitions and sensor cursors written by
`dagster dev` are all there after the webserver and daemon restart."""

from __future__ import annotations

import pytest
from dagster import DagsterInstance

from holistic_dagster.settings import prepare_dagster_home
from tests.defs.dagster_dev import dagster_dev, graphql, wait_for_run
from tests.helpers import wait_until
from tests.services import postgres_cluster

pytestmark = pytest.mark.slow  # a PostgreSQL cluster and `dagster dev`, started twice


@pytest.fixture(scope="module")
def postgres():
    with postgres_cluster() as env:
        yield env


SENSOR = """{ sensorOrError(sensorSelector: {repositoryLocationName: "%s", repositoryName: "__repository__",
  sensorName: "model_registry"}) { ... on Sensor { sensorState { status
  typeSpecificData { ... on SensorData { lastCursor } } ticks(limit: 5) { status } } } } }"""


def test_runs_partitions_and_sensor_cursor_survive_a_restart(postgres, tmp_path, monkeypatch, suite_run):
    for key, value in postgres.items():
        monkeypatch.setenv(key, value)
    home = prepare_dagster_home(tmp_path / "dagster_home")
    assert (home / "dagster.yaml").resolve().name == "dagster.postgres.yaml"
    env = {**postgres, "DAGSTER_HOME": str(home), "HOLISTIC_WAREHOUSE": str(suite_run["path"])}
    log = tmp_path / "dagster_dev.log"
    with dagster_dev(env, log) as (port, location):
        states = []

        def sensor_cursor() -> str | None:
            states.append(graphql(port, SENSOR % location)["sensorOrError"]["sensorState"])
            return states[-1]["typeSpecificData"]["lastCursor"]

        cursor = wait_until(  # the daemon's first sensor tick records the registry
            sensor_cursor,
            timeout_s=120,
            interval_s=2,
            what="a sensor tick with a cursor",
            diagnostics=lambda: f"sensor state: {states[-1]}\n{log.read_text()[-2000:]}",
        )
        launched = graphql(
            port,
            """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) {
            __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }""",
            {"p": {"selector": {"repositoryLocationName": location, "repositoryName": "__repository__",
                                "jobName": "leaderboard_job"},
                   "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "v2"}]}}},
        )["launchRun"]  # fmt: skip
        assert launched["__typename"] == "LaunchRunSuccess", launched
        run_id = launched["run"]["runId"]
        assert wait_for_run(port, run_id) == "SUCCESS", log.read_text()[-3000:]

    assert "sqlite" not in " ".join(p.name for p in home.rglob("*.db"))  # nothing went to embedded SQLite
    with dagster_dev(env, log) as (port, location):  # a new webserver and daemon, same database
        run = graphql(
            port,
            '{ runOrError(runId: "%s") { ... on Run { status eventConnection { events { __typename } } } } }' % run_id,
        )["runOrError"]
        assert run["status"] == "SUCCESS"
        events = {e["__typename"] for e in run["eventConnection"]["events"]}
        assert {"RunStartEvent", "MaterializationEvent", "RunSuccessEvent"} <= events
        state = graphql(port, SENSOR % location)["sensorOrError"]["sensorState"]
        assert state["typeSpecificData"]["lastCursor"] == cursor  # the registry is unchanged: the same cursor
    with monkeypatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(home))
        storage = DagsterInstance.get()
        assert "Postgres" in type(storage.run_storage).__name__
        assert {"demo-gpt2-untrained", "demo-llama-tuned"} <= set(storage.get_dynamic_partitions("model"))
        assert storage.get_run_by_id(run_id) is not None and storage.all_logs(run_id)


def test_the_alert_sensor_posts_every_new_failure_on_postgres_storage(postgres, tmp_path, monkeypatch):
    from tests.servers.webhook_receiver import WebhookReceiver
    from tests.test_alert_delivery import every_tick_posts_the_new_failures_once

    for key, value in postgres.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("DAGSTER_HOME", str(prepare_dagster_home(tmp_path / "dagster_home")))
    with DagsterInstance.get() as instance, WebhookReceiver() as receiver:
        assert "Postgres" in type(instance.event_log_storage).__name__
        every_tick_posts_the_new_failures_once(instance, tmp_path, receiver, monkeypatch)
