"""Dagster instance storage on a real, throwaway PostgreSQL cluster (initdb from the installed binaries, as a
non-root user, on a free loopback port): runs, event logs, dynamic partitions and sensor cursors written by
`dagster dev` are all there after the webserver and daemon restart."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from dagster import DagsterInstance

from holistic_dagster.settings import prepare_dagster_home
from tests.defs.dagster_dev import dagster_dev, graphql, wait_for_run
from tests.helpers import free_port, wait_until

pytestmark = pytest.mark.slow  # a PostgreSQL cluster and `dagster dev`, started twice

PG_BIN = next(
    (Path(d) for d in ("/usr/local/bin", "/usr/lib/postgresql/15/bin") if (Path(d) / "initdb").exists()), None
)


def _as_owner(cmd: list[str], owner: str | None) -> list[str]:
    # initdb and postgres refuse to run as root: run them as the cluster's owner
    return ["runuser", "-u", owner, "--", *cmd] if owner else cmd


@pytest.fixture(scope="module")
def postgres():
    if PG_BIN is None:
        pytest.fail("PostgreSQL binaries (initdb, pg_ctl) not found in /usr/local/bin or /usr/lib/postgresql/15/bin")
    # outside pytest's own (root-only) temporary folder, so the cluster's owner can reach it
    root = Path(tempfile.mkdtemp(prefix="holistic-pg-"))
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    owner = None
    if os.geteuid() == 0:
        owner = "postgres"
        if subprocess.run(["id", owner], capture_output=True).returncode != 0:
            subprocess.run(["useradd", "--system", "--no-create-home", owner], check=True)
        os.chmod(root, 0o755)
        for path in (root, sockets):
            shutil.chown(path, owner)
    port = free_port()
    run = lambda cmd: subprocess.run(_as_owner(cmd, owner), check=True, capture_output=True, text=True)  # noqa: E731
    run([str(PG_BIN / "initdb"), "-D", str(data), "-U", "dagster", "--auth=trust", "-E", "UTF8", "--no-sync"])
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
    run([str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "pg.log"), "-w", "start"])
    try:
        yield {  # initdb's own `postgres` database holds Dagster's tables
            "DAGSTER_PG_HOST": "127.0.0.1",
            "DAGSTER_PG_PORT": str(port),
            "DAGSTER_PG_USER": "dagster",
            "DAGSTER_PG_PASSWORD": "unused-with-trust-auth",
            "DAGSTER_PG_DB": "postgres",
        }
    finally:
        subprocess.run(_as_owner([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], owner))
        shutil.rmtree(root, ignore_errors=True)


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
