"""The Dagster layer: partitions, resources, asset factories, checks and sensors. Thin: it names things
and calls the stages (holistic_dagster.stages), the checks (quality) and the automation decisions
(automation); it computes nothing itself."""
