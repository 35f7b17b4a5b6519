"""Graded alerts through Dagster: the `alerts` asset grades a model against the revision it replaces with the
rules of an alerts.yaml, a critical finding fails its blocking ERROR check, and the alert_webhook sensor posts
the failed checks to a Slack-compatible receiver on loopback, once, with the URL read from the variable the file
names."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dagster import AssetCheckSeverity, AssetKey, DagsterInstance, MultiPartitionKey, build_sensor_context

from holistic_dagster.config.deployment import Deployment
from holistic_dagster.definitions import build_definitions
from holistic_dagster.defs.resources import HolisticResource
from holistic_dagster.stages.completions import run_completions
from holistic_dagster.stages.context import StageContext
from holistic_dagster.stages.prompts import build_prompts
from holistic_dagster.stages.scores import compute_scores
from holistic_dagster.warehouse import Warehouse
from tests.conftest import write
from tests.servers.webhook_receiver import TOKEN, WebhookReceiver

# the alerts and stability assets through Dagster (grading and delivery have fast unit tests)
pytestmark = pytest.mark.slow

ALERTS = """
baseline: previous
rules:
  - {kind: metric, name: accuracy floor, critical: {below: 0.5}}
  - {kind: metric, name: accuracy drop, warning: {drop: 0.1}}
webhook: {url_env: TEST_ALERT_HOOK}
"""


@pytest.fixture
def graded(arena_world, tmp_path, monkeypatch):
    """A copy of the arena's warehouse with oracle's and wrong's scores, and a registry in which `wrong` is the
    new revision of `oracle` (it answers every question wrongly)."""
    wh = Warehouse(shutil.copy(arena_world["wh"].path, tmp_path / "warehouse.duckdb"))
    registry = Path(arena_world["resource"].models_file).read_text()
    models = write(tmp_path / "models.yaml", registry.replace("path: wrong}", "path: wrong, previous: oracle}"))
    stage = StageContext(wh, arena_world["catalog"], Deployment.of(models=models))
    for model in ("oracle", "wrong"):
        compute_scores(stage, "a1", "mini_qa", model)
    resource = HolisticResource(
        warehouse_path=str(wh.path),
        catalog_dir=str(arena_world["catalog"].root),
        models_file=str(models),
        alerts_file=str(write(tmp_path / "alerts.yaml", ALERTS)),
    )
    defs = build_definitions(arena_world["catalog"], resource)
    return {"wh": wh, "resource": resource, "defs": defs, "instance": DagsterInstance.ephemeral()}


def test_a_critical_alert_fails_its_blocking_check_and_is_posted_once(graded, monkeypatch):
    defs, instance, wh = graded["defs"], graded["instance"], graded["wh"]
    instance.add_dynamic_partitions("version", ["a1"])
    sensor, resources = defs.get_sensor_def("alert_webhook"), {"holistic": graded["resource"]}
    # the sensor's first tick starts from now (an instance's old failures are not news)
    start = build_sensor_context(instance=instance, resources=resources)
    assert "started" in str(sensor(start).skip_message)
    run = defs.resolve_job_def("leaderboard_job").execute_in_process(
        partition_key="a1", instance=instance, asset_selection=[AssetKey(["alerts"])], raise_on_error=False
    )
    checks = {c.check_name: c for c in run.get_asset_check_evaluations()}
    assert not checks["no_critical_alert"].passed and checks["no_critical_alert"].severity == AssetCheckSeverity.ERROR
    assert "wrong vs oracle on mini_qa" in checks["no_critical_alert"].description
    # 5 instances all lost: a drop of 1.0, but a paired test on 5 pairs cannot reach p < 0.05 (p = 2/32)
    assert checks["no_warning_alert"].passed
    rows = wh.df("SELECT * FROM alerts WHERE version = 'a1'").set_index("rule")
    assert rows.loc["accuracy floor", ["level", "model", "baseline", "value"]].tolist() == [
        "critical",
        "wrong",
        "oracle",
        0.0,
    ]
    assert rows.loc["accuracy drop", "level"] == "ok" and rows.loc["accuracy drop", "diff"] == pytest.approx(-1.0)

    with WebhookReceiver() as receiver:
        monkeypatch.delenv("TEST_ALERT_HOOK", raising=False)
        unset = sensor(build_sensor_context(instance=instance, resources=resources, cursor=start.cursor))
        assert "none posted" in str(unset.skip_message) and not receiver.bodies
        monkeypatch.setenv("TEST_ALERT_HOOK", receiver.url())
        first = build_sensor_context(instance=instance, resources=resources, cursor=start.cursor)
        posted = sensor(first)
        assert "posted 1 of 1 alert(s)" in str(posted.skip_message)
        (body,) = receiver.bodies
        assert "no_critical_alert failed on alerts [a1]" in body["text"] and "wrong vs oracle" in body["text"]
        assert TOKEN not in str(body)
        again = sensor(build_sensor_context(instance=instance, resources=resources, cursor=first.cursor))
        assert "no new check results" in str(again.skip_message) and len(receiver.bodies) == 1


def test_an_answer_that_changes_when_asked_again_is_a_stability_alert(arena_world, graded, tmp_path):
    wh, catalog = graded["wh"], arena_world["catalog"]
    http = f"backend: openai, base_url: '{arena_world['server'].base_url}', api_key_env: null, max_attempts: 1"
    models = write(
        tmp_path / "flaky.yaml",
        f"models:\n  oracle: {{{http}, path: oracle}}\n  flaky: {{{http}, path: flaky, previous: oracle}}\n",
    )
    stage = StageContext(wh, catalog, Deployment.of(models=models))
    build_prompts(stage, "a1", "mini_qa", "flaky")
    run_completions(stage, "a1", "mini_qa", "flaky")  # each prompt's first answer: the correct one
    resource = HolisticResource(
        warehouse_path=str(wh.path),
        catalog_dir=str(catalog.root),
        models_file=str(models),
        alerts_file=str(write(tmp_path / "stability.yaml", "rules:\n  - {kind: stability, critical: {below: 0.9}}\n")),
    )
    defs, instance = build_definitions(catalog, resource), graded["instance"]
    instance.add_dynamic_partitions("version", ["a1"])
    instance.add_dynamic_partitions("model", ["flaky", "oracle"])
    for model in ("flaky", "oracle"):
        key = MultiPartitionKey({"model": model, "version": "a1"})
        assert defs.resolve_job_def("stability_job").execute_in_process(partition_key=key, instance=instance).success
    asked = wh.df("SELECT model, instance_id, repeat, agrees FROM stability WHERE version = 'a1' ORDER BY ALL")
    assert len(asked) == 2 * 2 * 5  # 2 models x 2 repeats x the 5 instances (fewer than the 20 sampled)
    # flaky: the 2nd request of a prompt is hedged, the 3rd correct again: half of its answers agree
    flaky = asked[asked["model"] == "flaky"]
    assert flaky.groupby("repeat")["agrees"].mean().tolist() == [0.0, 1.0]
    assert asked[asked["model"] == "oracle"]["agrees"].all()
    run = defs.resolve_job_def("leaderboard_job").execute_in_process(
        partition_key="a1", instance=instance, asset_selection=[AssetKey(["alerts"])], raise_on_error=False
    )
    (finding,) = wh.df("SELECT * FROM alerts WHERE version = 'a1'").itertuples()
    assert (finding.level, finding.model, finding.baseline, finding.value, finding.baseline_value) == (
        "critical",
        "flaky",
        "oracle",
        0.5,
        1.0,
    )
    assert not {c.check_name: c.passed for c in run.get_asset_check_evaluations()}["no_critical_alert"]
