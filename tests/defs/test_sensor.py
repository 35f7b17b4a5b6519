from __future__ import annotations

from dagster import DagsterInstance, SensorResult, SkipReason, build_sensor_context

from holistic_dagster.defs.sensors import registry_partitions


def test_registry_sensor_adds_model_and_version_partitions_once():
    instance = DagsterInstance.ephemeral()
    result = registry_partitions(build_sensor_context(instance=instance))
    assert isinstance(result, SensorResult) and not result.run_requests
    added = {r.partitions_def_name: sorted(r.partition_keys) for r in result.dynamic_partitions_requests}
    assert added == {"model": ["demo-gpt2-untrained", "demo-llama-tuned"], "version": ["v1", "v2"]}
    for request in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    again = registry_partitions(build_sensor_context(instance=instance))
    assert isinstance(again, SkipReason)
