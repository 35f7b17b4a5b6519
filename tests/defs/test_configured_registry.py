"""The registry sensor and the stale schedule read the catalog and model registry the `holistic` resource
names, as the assets do, not the repository's defaults; a ladder model counts once its weights are installed."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone

from dagster import DagsterInstance, SensorResult, SkipReason, build_schedule_context, build_sensor_context

from holistic_dagster.definitions import build_definitions
from holistic_dagster.defs.resources import HolisticResource
from holistic_dagster.settings import REPO_ROOT

SUITE = "version: a1\nscenarios:\n  synthetic_reasoning: {max_eval_instances: 8, seed: 5}\n"


def test_the_sensor_sees_the_configured_registry_not_the_repos(tmp_path, monkeypatch):
    for var in ("HOLISTIC_CATALOG", "HOLISTIC_RESOURCES"):
        monkeypatch.delenv(var, raising=False)  # the environment points at the repo's files
    shutil.copytree(REPO_ROOT / "assets", tmp_path / "assets")
    for suite in (tmp_path / "assets" / "suites").glob("*.yaml"):
        suite.unlink()
    (tmp_path / "assets" / "suites" / "a1.yaml").write_text(SUITE)
    (tmp_path / "resources").mkdir()
    models = tmp_path / "resources" / "models.yaml"
    monkeypatch.setenv("HOLISTIC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOLISTIC_MODEL_CACHE", str(tmp_path / "home"))  # where the ladder file is installed below
    models.write_text(
        "models:\n"
        '  only-here: {backend: transformers, path: "demo:llama-tuned"}\n'
        '  rung: {backend: llamacpp, path: "ladder:gemma-3-270m"}\n'  # not installed yet
    )
    (tmp_path / "resources" / "automation.yaml").write_text(
        'rerun_stale_cron: "15 4 * * *"\nsensor_interval_seconds: 7\n'
    )
    holistic = HolisticResource(
        warehouse_path=str(tmp_path / "wh.duckdb"), catalog_dir=str(tmp_path / "assets"), models_file=str(models)
    )
    defs = build_definitions(resource=holistic)
    (tmp_path / "dagster_home").mkdir()
    instance = DagsterInstance.local_temp(str(tmp_path / "dagster_home"))  # (a schedule context needs a ref)
    sensor, resources = defs.get_sensor_def("model_registry"), {"holistic": holistic}

    def tick(cursor):
        context = build_sensor_context(instance=instance, cursor=cursor, definitions=defs, resources=resources)
        return sensor(context)

    first = tick(None)
    assert isinstance(first, SensorResult) and not first.run_requests
    cursor = json.loads(first.cursor)
    assert set(cursor["models"]) == {"only-here"} and cursor["versions"] == ["a1"]
    added = {k for r in first.dynamic_partitions_requests for k in r.partition_keys}
    assert added == {"only-here", "a1"}

    models.write_text(models.read_text() + '  newcomer: {backend: transformers, path: "demo:gpt2-untrained"}\n')
    (tmp_path / "home" / "ladder").mkdir(parents=True)
    (tmp_path / "home" / "ladder" / "gemma-3-270m.gguf").write_bytes(b"GGUF")  # installed: a new model now
    second = tick(first.cursor)
    (datasets,) = second.run_requests  # the temporary suite's datasets first; the newcomers wait for them
    assert datasets.job_name == "datasets" and datasets.partition_key == "a1"
    assert {p[0] for p in json.loads(second.cursor)["pending"]} == {"newcomer", "rung"}
    added = {k for r in second.dynamic_partitions_requests for k in r.partition_keys}
    assert {"newcomer", "rung"} <= added  # (the test instance does not apply the first tick's requests)

    schedule = defs.get_schedule_def("rerun_stale")
    assert schedule.cron_schedule == "15 4 * * *"  # automation.yaml beside the registry
    intervals = {s.name: s.minimum_interval_seconds for s in defs.sensors}
    assert intervals == {  # the sensors a user waits on, and the housekeeping ones at half the pace
        **dict.fromkeys(["model_registry", "automation_conditions", "alert_webhook", "arena_votes"], 7),
        **dict.fromkeys(["abandoned_runs", "complete_undecided", "traffic_logs"], 14),
    }
    # (with: a schedule context enters an instance of its own, and leaves it as Dagster's current state storage
    # for every later definitions load in the process unless it is exited)
    with build_schedule_context(
        instance=instance, scheduled_execution_time=datetime(2026, 1, 1, tzinfo=timezone.utc), resources=resources
    ) as context:
        assert isinstance(schedule(context), SkipReason)
