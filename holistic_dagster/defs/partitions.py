from dagster import DynamicPartitionsDefinition, MultiPartitionsDefinition

# a registered model (resources/models.yaml) and an evaluation-suite release (assets/suites/<version>.yaml)
model_partitions = DynamicPartitionsDefinition(name="model")
version_partitions = DynamicPartitionsDefinition(name="version")
model_version_partitions = MultiPartitionsDefinition({"model": model_partitions, "version": version_partitions})
# a production traffic log file (shadow evaluation): its name without .jsonl
traffic_partitions = DynamicPartitionsDefinition(name="traffic_log")
