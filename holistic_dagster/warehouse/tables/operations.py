"""What the pipeline keeps about its own work: step inputs, undelivered alerts, imported HELM runs."""

from __future__ import annotations

from holistic_dagster.warehouse.tables.base import Column, Table, glossed

STEP_INPUTS = Table(
    "step_inputs",
    "The inputs of each step's last successful run (holistic_dagster/automation/freshness.py): an evaluation skips "
    "a step whose inputs are unchanged. files: JSON [[path, size, mtime_ns], ...] of the files it read.",
    key=("step", "partition"),
    columns=(
        *glossed("VARCHAR", "step", "partition", "fingerprint"),
        Column("files", "JSON"),
        Column("run_id", "VARCHAR"),
        Column("recorded_at", "TIMESTAMP"),
    ),
)

UNDELIVERED_ALERTS = Table(
    "undelivered_alerts",
    "Alerts the alert_webhook sensor gave up posting (the receiver refused them, or failed every retry): kept here "
    "so that someone can still read them, every one (two give-ups of one check with different texts are two rows); "
    "error: why (never the webhook URL).",
    key=("recorded_at", "level", "title", "text"),
    columns=(
        Column("recorded_at", "TIMESTAMP"),
        *glossed("VARCHAR", "level", "title", "text", "error"),
    ),
)

IMPORTED_RUNS = Table(
    "imported_runs",
    "Runs imported from HELM (`holistic import-helm`): the run folder each imported (version, scenario, model) "
    "partition came from, with every file's checksum (lineage, as source_files is for datasets), its run spec as "
    "written (an export writes it back) and the metric its scenario is ranked by (a version of its own has no "
    "suite).",
    key=("version", "scenario", "model", "run_name"),
    columns=(
        *glossed("VARCHAR", "version", "scenario", "model", "run_name"),
        Column("subset", "VARCHAR", "[{name, sha256, num_bytes}]"),
        Column("folder", "VARCHAR", "[{name, sha256, num_bytes}]"),
        Column("files", "JSON", "[{name, sha256, num_bytes}]"),
        *glossed("VARCHAR", "adapter_method", "description"),
        Column("run_spec", "JSON"),
        *glossed("VARCHAR", "main_metric", "provenance_id"),
        Column("imported_at", "TIMESTAMP"),
    ),
)
