"""Dagster runs in this process, for the CLI (which imports no Dagster itself): the instance at the deployment's
DAGSTER_HOME, with the chosen instance configuration linked in; a suite version's evaluation and the arena as runs the
UI then shows; killed in-process runs marked failed; partitions imported from HELM recorded."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dagster import DagsterInstance, Definitions

from holistic_dagster import settings
from holistic_dagster.config.deployment import Deployment
from holistic_dagster.defs import imports, ledger, runner
from holistic_dagster.defs.definitions import build_definitions
from holistic_dagster.defs.resources import HolisticResource


def instance(deployment: Deployment) -> DagsterInstance:
    return DagsterInstance.from_config(str(settings.prepare_dagster_home(deployment.dagster_home)))


def evaluate(
    deployment: Deployment,
    version: str,
    models: Sequence[str],
    announce: Callable[[str], None],
    skip_unchanged: bool,
    max_cost: float | None = None,
    efficient: int | None = None,
) -> list[runner.SuiteRun]:
    """Datasets, each model, then the summaries of a suite version, as Dagster runs (runner.evaluate_suite)."""
    catalog = deployment.catalog()
    defs = _suite_definitions(deployment, version)
    with instance(deployment) as dagster:
        return runner.evaluate_suite(
            defs, dagster, version, models, announce, catalog, skip_unchanged, max_cost, efficient
        )


def arena(deployment: Deployment, version: str) -> None:
    """The arena job of a suite version (battles judged, then the ratings) as a Dagster run."""
    defs = _suite_definitions(deployment, version)
    with instance(deployment) as dagster:
        runner.run_arena(defs, dagster, version)


def _suite_definitions(deployment: Deployment, version: str) -> Definitions:
    """The definitions of the suite version's scenarios: all that a command on that suite runs."""
    catalog = deployment.catalog()
    only = set(catalog.suite(version).scenarios)
    return build_definitions(catalog, HolisticResource.of(deployment, show_progress=True), only)


def mark_killed_runs(deployment: Deployment) -> list[str]:
    """Marks failed the in-process runs whose process was killed; their marks say so before Dagster is opened."""
    if not ledger.killed(deployment.dagster_home):
        return []
    with instance(deployment) as dagster:
        return runner.fail_abandoned_runs(dagster)


def record_imported(deployment: Deployment, version: str, parts) -> list[str]:
    """The partitions imported from HELM in the Dagster instance `holistic ui` opens; returns the scenarios that have
    no asset here (not in the catalog)."""
    with instance(deployment) as dagster:
        return imports.record_imported(dagster, version, parts, set(deployment.catalog().scenario_names()))


def gate_in_batches(deployment: Deployment, version: str, candidate: str, baseline: str, rule, alpha: float,
                    main_metric: dict[str, str], look: int, announce: Callable[[str], None]):  # fmt: skip
    """The sequential gate evaluating the candidate a batch at a time, as Dagster runs (runner.gate_in_batches)."""
    defs = _suite_definitions(deployment, version)
    with instance(deployment) as dagster:
        return runner.gate_in_batches(defs, dagster, version, candidate, baseline, rule, alpha, main_metric, look,
                                      announce)  # fmt: skip
