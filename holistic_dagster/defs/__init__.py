"""The Dagster layer: partitions, resources, asset factories, checks and sensors. Thin: it names things
and calls holistic_dagster.pipeline; it computes nothing itself."""
