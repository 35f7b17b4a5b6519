"""The alert_webhook sensor through the real daemon (`dagster dev`) on the repository's own dagster.yaml (SQLite,
run-sharded event log: what `holistic ui` runs): failed checks of two runs, one after the other, each reach the
receiver on loopback. Before, every tick after the first raised and nothing was ever posted."""

from __future__ import annotations

import shutil

import pytest
from dagster import DagsterInstance, materialize

from holistic_dagster.settings import REPO_ROOT
from tests.conftest import write
from tests.defs.dagster_dev import dagster_dev, graphql
from tests.helpers import wait_until
from tests.servers.webhook_receiver import WebhookReceiver
from tests.test_alert_delivery import _failing_check

pytestmark = pytest.mark.slow  # starts dagster dev; the sensor ticks every 30 s

ALERT_CURSOR = """{ sensorOrError(sensorSelector: {repositoryLocationName: "%s", repositoryName: "__repository__",
  sensorName: "alert_webhook"}) { ... on Sensor { sensorState { typeSpecificData { ... on SensorData {
  lastCursor } } } } } }"""


def test_the_daemon_posts_the_failed_checks_of_every_run(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").symlink_to(REPO_ROOT / "dagster.yaml")  # the shipped instance configuration
    shutil.copytree(REPO_ROOT / "resources", tmp_path / "resources")
    write(tmp_path / "resources" / "alerts.yaml", "webhook: {url_env: TEST_ALERT_HOOK}\n")
    # the sensors tick as often as the daemon looks (every 5 s; they tick every 30 s by default)
    write(tmp_path / "resources" / "automation.yaml", "sensor_interval_seconds: 5\n")
    log = tmp_path / "dagster_dev.log"
    with WebhookReceiver() as receiver:
        env = {
            "DAGSTER_HOME": str(home),
            "HOLISTIC_RESOURCES": str(tmp_path / "resources"),
            "HOLISTIC_WAREHOUSE": str(tmp_path / "warehouse.duckdb"),
            "TEST_ALERT_HOOK": receiver.url(),
        }
        with dagster_dev(env, log) as (port, location), DagsterInstance.local_temp(str(home)) as instance:

            def cursor() -> str | None:
                state = graphql(port, ALERT_CURSOR % location)["sensorOrError"]["sensorState"]
                return state["typeSpecificData"]["lastCursor"]

            wait_until(cursor, timeout_s=240, interval_s=2, what="the alert_webhook sensor's first tick",
                       diagnostics=lambda: log.read_text()[-3000:])  # fmt: skip
            for n, name in enumerate(["first_run", "second_run"], start=1):
                materialize(_failing_check(name), instance=instance)
                wait_until(lambda n=n: len(receiver.bodies) >= n, timeout_s=240, interval_s=2,
                           what=f"the daemon to post run {n}'s failed check",
                           diagnostics=lambda: log.read_text()[-3000:])  # fmt: skip
            assert "Called `get_event_records` on a run-sharded" not in log.read_text()
    texts = [b["text"] for b in receiver.bodies]
    assert len(texts) == 2 and "first_run_is_fine failed on first_run" in texts[0]
    assert "second_run_is_fine failed on second_run" in texts[1]
