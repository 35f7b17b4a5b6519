"""The summaries stage, across the models of one suite version: every leaderboard cell with n and a seeded
bootstrap 95% CI, HELM's mean win rate per family, paired comparisons of two models (the regression tests of
new model revisions), and the HTML report.

Per family, each scenario contributes its headline cells to the win rate (metrics.is_headline: its main
accuracy metric in accuracy, and its worst case in robustness and fairness; elsewhere the metrics declared
headline: ece_10_bin, toxic_fraction, runtime_s, every bias metric). How a cell's CI is computed is its
metric's declared `ci`. Families are never blended.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from holistic_dagster.errors import HolisticError
from holistic_dagster.metrics import (
    NO_CI,
    metric,
)
from holistic_dagster.metrics.calibration import calibration_metrics_per_row
from holistic_dagster.metrics.statistics import (
    N_BOOT,
    SEED,
    bootstrap_ci,
    bootstrap_statistic_ci,
    mean_win_rate,
)
from holistic_dagster.metrics.toxicity import toxicity_metrics
from holistic_dagster.results.leaderboard import (
    IMPORTED_SCENARIOS,
    headline_columns,
    main_metrics,
    regression_alpha,
    report_path,
)
from holistic_dagster.results.scores import calibration_pairs, compare_models, original_scores
from holistic_dagster.stages.context import StageContext
from holistic_dagster.warehouse import Warehouse


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
    scored = set(
        stage.warehouse.df("SELECT DISTINCT model FROM scenario_metrics WHERE version = ?", [version])["model"]
    )
    frames = [
        compare_models(stage.warehouse, version, spec.previous, name, alpha, main_metric=main)
        for name, spec in stage.deployment.models().items()
        if spec.previous and name in scored and spec.previous in scored
    ]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    stage.warehouse.replace({"version": version}, {"comparisons": frame})
    return frame


def grade_alerts(stage: StageContext, version: str, spec) -> list:
    """The graded alerts of resources/alerts.yaml (holistic_dagster.alerts) for the version's registered models,
    replacing the version's rows of `alerts`."""
    from dataclasses import asdict

    from holistic_dagster.alerts.grading import evaluate_alerts

    alpha = regression_alpha(stage.catalog, version)
    main = main_metrics(stage.warehouse, stage.catalog, version)
    findings = evaluate_alerts(stage.warehouse, version, spec, stage.deployment.models(), alpha, main)
    frame = pd.DataFrame([{"version": version, **asdict(f)} for f in findings])
    stage.warehouse.replace({"version": version}, {"alerts": frame})
    return findings


def write_report(stage: StageContext, version: str, predictions_per_scenario: int | None = None) -> dict[str, Any]:
    from holistic_dagster.report import PREDICTIONS_PER_SCENARIO, build_report

    if version in stage.catalog.suite_versions():
        specs = stage.catalog.resolved_scenarios(version)
        about = {name: {"description": s.description, "method": s.adapter.method} for name, s in specs.items()}
        main = {name: spec.main_metric for name, spec in specs.items()}
    else:  # imported from HELM: the runs' own descriptions
        rows = stage.warehouse.df(IMPORTED_SCENARIOS, [version])
        about = {r.scenario: {"description": r.description, "method": r.method} for r in rows.itertuples()}
        main = dict(zip(rows["scenario"], rows["main_metric"]))
    return build_report(
        stage.warehouse,
        version,
        main,
        report_path(stage.warehouse, version).parent,
        about,
        predictions_per_scenario or PREDICTIONS_PER_SCENARIO,
    )


# --- statistics over the warehouse ---------------------------------------------------------------------
def cell_statistics(warehouse: Warehouse, version: str, *, n_boot: int = N_BOOT, seed: int = SEED) -> pd.DataFrame:
    """Every scenario_metrics row of the version with n, ci_low, ci_high, the bootstrap's seed and size, and
    a note where no CI applies."""
    cells = warehouse.df("SELECT * FROM scenario_metrics WHERE version = ?", [version])
    rows = original_scores(warehouse, version)
    groups = {k: g for k, g in rows.groupby(["model", "scenario", "family", "metric", "perturbation"])}
    calibration_boot: dict = {}  # (model, scenario) -> resampled calibration metrics, shared by its cells
    out = []
    for c in cells.itertuples(index=False):
        key = (c.model, c.scenario, c.family, c.metric, c.perturbation)
        ci = metric(c.metric).ci
        low = high = float("nan")
        note = ""
        if key in groups:  # the cell's own per-instance rows
            low, high = bootstrap_ci(groups[key]["value"].to_numpy(), n_boot=n_boot, seed=seed)
        elif ci == "calibration" and pd.isna(c.value):
            note = NO_CI["undefined"]
        elif ci == "calibration":
            low, high = _calibration_ci(rows, c, n_boot, seed, calibration_boot)
        elif ci == "toxicity":
            per = groups.get((c.model, c.scenario, "toxicity", "toxicity", ""))
            if per is not None:
                x = per["value"].to_numpy()
                low, high = bootstrap_statistic_ci(
                    len(x), lambda i: toxicity_metrics([[v] for v in x[i]])[c.metric], n_boot, seed
                )
        elif ci == "none":
            note = metric(c.metric).no_ci
        elif c.perturbation:  # per perturbation: only the worst case keeps per-instance rows
            note = NO_CI["per_perturbation"]
        else:
            note = NO_CI["no_rows"]
        if not pd.isna(c.value) and (c.value < low - 1e-9 or c.value > high + 1e-9):
            note = NO_CI["outside"]
        out.append(
            {
                "version": version,
                "family": c.family,
                "scenario": c.scenario,
                "metric": c.metric,
                "perturbation": c.perturbation,
                "model": c.model,
                "value": c.value,
                "n": int(c.count),
                "ci_low": low,
                "ci_high": high,
                "ci_note": note,
                "bootstrap_seed": seed,
                "bootstrap_samples": n_boot,
            }
        )
    return pd.DataFrame(out)


def _calibration_ci(rows, c, n_boot: int, seed: int, memo: dict) -> tuple[float, float]:
    """ECE and the other calibration metrics from resampled (max_prob, exact_match) pairs (the same resamples
    for every calibration metric of a cell's model and scenario, computed once)."""
    key = (c.model, c.scenario)
    if key not in memo:
        memo[key] = _calibration_boot(calibration_pairs(rows, c.model, c.scenario), n_boot, seed)
    stats = memo[key]
    if stats is None or c.metric not in stats:
        return float("nan"), float("nan")
    low, high = np.nanpercentile(stats[c.metric], [2.5, 97.5])
    return float(low), float(high)


BOOT_BATCH_CELLS = 2_000_000  # resampled pairs scored at once: a few tens of MB however large the scenario


def _calibration_boot(pairs: pd.DataFrame, n_boot: int, seed: int) -> dict[str, np.ndarray] | None:
    p, k = pairs["p"].to_numpy(), pairs["c"].to_numpy()
    if len(p) == 0:
        return None
    rng = np.random.default_rng(seed)
    resamples = [rng.integers(0, len(p), size=len(p)) for _ in range(n_boot)]
    step = max(1, BOOT_BATCH_CELLS // len(p))
    parts = [
        calibration_metrics_per_row(p[block], k[block])
        for block in (np.stack(resamples[i : i + step]) for i in range(0, n_boot, step))
    ]
    return {m: np.concatenate([part[m] for part in parts]) for m in parts[0]}


def family_win_rates(cells: pd.DataFrame, main_metric: dict[str, str]) -> pd.DataFrame:
    """HELM's mean win rate per family and model (version, family, model, mean_win_rate, num_columns)."""
    out = []
    for family, part in headline_columns(cells, main_metric).groupby("family"):
        part = part.assign(column=part["scenario"] + " " + part["metric"])
        table = part.pivot_table(index="model", columns="column", values="value", aggfunc="first")
        metric_of = dict(zip(part["column"], part["metric"]))
        rates = mean_win_rate(table, metric_of.__getitem__)
        out.append(rates.assign(version=part["version"].iat[0], family=family))
    if not out:
        return pd.DataFrame(columns=["version", "family", "model", "mean_win_rate", "num_columns"])
    return pd.concat(out)[["version", "family", "model", "mean_win_rate", "num_columns"]].reset_index(drop=True)
