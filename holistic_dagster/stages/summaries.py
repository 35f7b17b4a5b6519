"""The summaries stage, across the models of one suite version: every leaderboard cell with n and a seeded
bootstrap 95% CI and HELM's mean win rate per family (computed by results.statistics, stored here), paired
comparisons of each new model revision with the one it replaces (the regression tests), the graded alerts, and
the HTML report.

Per family, each scenario contributes its headline cells to the win rate (metrics.is_headline: its main
accuracy metric in accuracy, and its worst case in robustness and fairness; elsewhere the metrics declared
headline: ece_10_bin, toxic_fraction, runtime_s, every bias metric). How a cell's CI is computed is its
metric's declared `ci`. Families are never blended.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from holistic_dagster.errors import HolisticError
from holistic_dagster.results.leaderboard import (
    main_metrics,
    regression_alpha,
    report_path,
)
from holistic_dagster.results.scores import compare_models
from holistic_dagster.results.statistics import cell_statistics, family_win_rates
from holistic_dagster.stages.context import StageContext
from holistic_dagster.warehouse.access import ImportedRuns, ScenarioMetrics
from holistic_dagster.warehouse.tables.summaries import ALERTS

if TYPE_CHECKING:  # grading loads with the alerts it grades
    from holistic_dagster.alerts.grading import Finding
    from holistic_dagster.config.alerts import AlertsSpec


def summarize(stage: StageContext, version: str) -> dict[str, Any]:
    """Every leaderboard cell with n and a bootstrap CI, and the mean win rate per family; replaces the
    version's rows of leaderboard_stats and win_rates. Returns them with each scenario's main metric."""
    main = main_metrics(stage.warehouse, stage.catalog, version)
    cells = cell_statistics(stage.warehouse, version)
    if cells.empty:
        raise HolisticError(f"no scores for suite version {version!r} in {stage.warehouse.path}: evaluate it first")
    rates = family_win_rates(cells, main)
    stage.warehouse.replace({"version": version}, {"leaderboard_stats": cells, "win_rates": rates})
    return {"cells": cells, "win_rates": rates, "main_metric": main}


def find_regressions(stage: StageContext, version: str) -> pd.DataFrame:
    """Every registered model with a `previous` revision, tested against it on the version's instances
    (both must have scores); replaces the version's rows of `comparisons`."""

    alpha = regression_alpha(stage.catalog, version)
    main = main_metrics(stage.warehouse, stage.catalog, version)
    scored = ScenarioMetrics(stage.warehouse).models(version)
    frames = [
        compare_models(stage.warehouse, version, spec.previous, name, alpha, main_metric=main)
        for name, spec in stage.deployment.models().items()
        if spec.previous and name in scored and spec.previous in scored
    ]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    stage.warehouse.replace({"version": version}, {"comparisons": frame})
    return frame


def grade_alerts(stage: StageContext, version: str, spec: AlertsSpec) -> list[Finding]:
    """The graded alerts of resources/alerts.yaml (holistic_dagster.alerts) for the version's registered models,
    replacing the version's rows of `alerts`."""
    from dataclasses import asdict

    from holistic_dagster.alerts.grading import evaluate_alerts

    alpha = regression_alpha(stage.catalog, version)
    main = main_metrics(stage.warehouse, stage.catalog, version)
    findings = evaluate_alerts(stage.warehouse, version, spec, stage.deployment.models(), alpha, main)
    frame = ALERTS.frame({"version": version, **asdict(f)} for f in findings)
    stage.warehouse.replace({"version": version}, {"alerts": frame})
    return findings


def write_report(stage: StageContext, version: str, predictions_per_scenario: int | None = None) -> dict[str, Any]:
    from holistic_dagster.report import PREDICTIONS_PER_SCENARIO, build_report

    order: tuple[str, ...] = ()
    mean_score, min_kappa = None, None
    if version in stage.catalog.suite_versions():
        suite = stage.catalog.suite(version)
        mean_score = (suite.mean_score.title, suite.mean_score.family) if suite.mean_score else None
        order, min_kappa = tuple(suite.columns), suite.safety.min_kappa
        specs = stage.catalog.resolved_scenarios(version)
        about = {name: {"description": s.description, "method": s.adapter.method} for name, s in specs.items()}
        main = {name: spec.main_metric for name, spec in specs.items()}
    else:  # imported from HELM: the runs' own descriptions
        rows = ImportedRuns(stage.warehouse).scenarios(version)
        about = {r.scenario: {"description": r.description, "method": r.method} for r in rows.itertuples()}
        main = dict(zip(rows["scenario"], rows["main_metric"]))
    return build_report(
        stage.warehouse,
        version,
        main,
        report_path(stage.warehouse, version).parent,
        about,
        predictions_per_scenario or PREDICTIONS_PER_SCENARIO,
        mean_score,
        order,
        min_kappa,
    )


# --- statistics over the warehouse ---------------------------------------------------------------------
