"""Row records of the tables in warehouse/tables/operations.py. Generated from the declarations in warehouse/tables/ by
`python -m holistic_dagster.cli.reference`: do not edit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, kw_only=True)
class StepInputsRow:
    """A row of `step_inputs`: The inputs of each step's last successful run (holistic_dagster/automation/freshness.py):
    an evaluation skips a step whose inputs are unchanged. files: JSON [[path, size, mtime_ns], ...] of the files it
    read."""

    step: str
    partition: str
    fingerprint: str
    files: str
    run_id: str
    recorded_at: datetime


@dataclass(frozen=True, kw_only=True)
class UndeliveredAlertsRow:
    """A row of `undelivered_alerts`: Alerts the alert_webhook sensor gave up posting (the receiver refused them, or
    failed every retry): kept here so that someone can still read them, every one (two give-ups of one check with
    different texts are two rows); error: why (never the webhook URL)."""

    recorded_at: datetime
    level: str
    title: str
    text: str
    error: str


@dataclass(frozen=True, kw_only=True)
class ImportedRunsRow:
    """A row of `imported_runs`: Runs imported from HELM (`holistic import-helm`): the run folder each imported
    (version, scenario, model) partition came from, with every file's checksum (lineage, as source_files is for
    datasets), its run spec as written (an export writes it back) and the metric its scenario is ranked by (a version of
    its own has no suite)."""

    version: str
    scenario: str
    model: str
    run_name: str
    subset: str
    folder: str
    files: str
    adapter_method: str
    description: str
    run_spec: str
    main_metric: str
    provenance_id: str
    imported_at: datetime
