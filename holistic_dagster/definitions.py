"""The one entry point Dagster loads (workspace.yaml): every product's assets, jobs, sensors, schedules and
resources, assembled in holistic_dagster/defs/. The CLI and the tests call build_definitions with their own catalog
and resource."""

from holistic_dagster.defs.definitions import build_definitions, defs

__all__ = ["build_definitions", "defs"]
