from __future__ import annotations

from dagster import DefaultSensorStatus, SensorEvaluationContext, SensorResult, SkipReason, sensor

from holistic_dagster.catalog import Catalog, load_models
from holistic_dagster.defs.partitions import model_partitions, version_partitions


@sensor(default_status=DefaultSensorStatus.RUNNING, minimum_interval_seconds=30)
def registry_partitions(context: SensorEvaluationContext):
    """Keeps the `model` and `version` partitions in step with resources/models.yaml and assets/suites/.
    It adds partitions only; it requests no runs."""
    models = sorted(load_models())
    versions = Catalog().suite_versions()
    known_models = set(context.instance.get_dynamic_partitions(model_partitions.name))
    known_versions = set(context.instance.get_dynamic_partitions(version_partitions.name))
    requests = []
    if new := [m for m in models if m not in known_models]:
        requests.append(model_partitions.build_add_request(new))
    if new := [v for v in versions if v not in known_versions]:
        requests.append(version_partitions.build_add_request(new))
    if not requests:
        return SkipReason("model registry and suites unchanged")
    return SensorResult(dynamic_partitions_requests=requests)
