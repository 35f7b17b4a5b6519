"""The summaries stage, across the models of one suite version: every leaderboard cell with n and a seeded
bootstrap 95% CI, HELM's mean win rate per family, paired comparisons of two models (the regression tests of
new model revisions), and the HTML report.

Per family, each scenario contributes its headline cells to the win rate (metrics.is_headline: its main
accuracy metric in accuracy, and its worst case in robustness and fairness; elsewhere the metrics declared
headline: ece_10_bin, toxic_fraction, runtime_s, every bias metric). How a cell's CI is computed is its
metric's declared `ci`. Families are never blended.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from holistic_dagster.errors import HolisticError
from holistic_dagster.metrics import FAMILIES, NO_CI, REFERENCE_FAMILIES, is_headline, lower_is_better, metric
from holistic_dagster.metrics.calibration import calibration_metrics_per_row
from holistic_dagster.metrics.scoring import CORRECTNESS
from holistic_dagster.metrics.statistics import (
    N_BOOT,
    SEED,
    bootstrap_ci,
    bootstrap_statistic_ci,
    mean_win_rate,
    paired_test,
)
from holistic_dagster.metrics.toxicity import toxicity_metrics
from holistic_dagster.stages.context import StageContext
from holistic_dagster.warehouse import Warehouse

# families whose per-instance values a paired test does not compare: a higher max_prob is not better, and
# timings are noise between runs
NOT_COMPARED = ("calibration", "efficiency")


def leaderboard(warehouse: Warehouse, version: str, family: str | None = None) -> pd.DataFrame:
    """Models x (scenario, metric) per family, for one suite version; never blended across families. Families
    that do not apply to a scenario appear as rows with no value and a note saying so."""
    sql = "SELECT * FROM leaderboard WHERE version = ?" + (" AND family = ?" if family else "")
    frame = warehouse.df(sql, [version] + ([family] if family else []))
    frame["family"] = pd.Categorical(frame["family"], categories=FAMILIES, ordered=True)
    return frame.sort_values(["family", "scenario", "metric", "perturbation", "model"]).reset_index(drop=True)


def main_metrics(warehouse: Warehouse, catalog, version: str) -> dict[str, str]:
    """{scenario: its main accuracy metric}: as the suite version pins them, or for a version made by importing
    HELM runs (holistic_dagster.helm), as the import chose them."""
    if version in catalog.suite_versions():
        return catalog.main_metrics(version)
    return dict(warehouse.df(_IMPORTED_SCENARIOS, [version])[["scenario", "main_metric"]].itertuples(index=False))


def regression_alpha(catalog, version: str) -> float:
    """The suite's significance level for paired tests; an imported version's is the suites' default."""
    if version in catalog.suite_versions():
        return catalog.suite(version).regression_alpha
    from holistic_dagster.config.catalog import SuiteSpec

    return SuiteSpec.model_fields["regression_alpha"].default


_IMPORTED_SCENARIOS = (
    "SELECT scenario, any_value(main_metric) AS main_metric, any_value(adapter_method) AS method, "
    "any_value(description) AS description FROM imported_runs WHERE version = ? GROUP BY scenario ORDER BY scenario"
)


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
    from holistic_dagster.config.models import load_models

    alpha = regression_alpha(stage.catalog, version)
    main = main_metrics(stage.warehouse, stage.catalog, version)
    scored = set(
        stage.warehouse.df("SELECT DISTINCT model FROM scenario_metrics WHERE version = ?", [version])["model"]
    )
    frames = [
        compare_models(stage.warehouse, version, spec.previous, name, alpha, main_metric=main)
        for name, spec in load_models(stage.models_file).items()
        if spec.previous and name in scored and spec.previous in scored
    ]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    stage.warehouse.replace({"version": version}, {"comparisons": frame})
    return frame


def grade_alerts(stage: StageContext, version: str, spec) -> list:
    """The graded alerts of resources/alerts.yaml (holistic_dagster.alerts) for the version's registered models,
    replacing the version's rows of `alerts`."""
    from dataclasses import asdict

    from holistic_dagster.alerts import evaluate_alerts
    from holistic_dagster.config.models import load_models

    alpha = regression_alpha(stage.catalog, version)
    main = main_metrics(stage.warehouse, stage.catalog, version)
    findings = evaluate_alerts(stage.warehouse, version, spec, load_models(stage.models_file), alpha, main)
    frame = pd.DataFrame([{"version": version, **asdict(f)} for f in findings])
    stage.warehouse.replace({"version": version}, {"alerts": frame})
    return findings


def report_path(warehouse: Warehouse, version: str) -> Path:
    """The first page of a suite version's HTML report: reports/<version>/index.html beside the warehouse (its
    scenario and predictions pages are in the same folder)."""
    return warehouse.path.parent / "reports" / version / "index.html"


def write_report(stage: StageContext, version: str, predictions_per_scenario: int | None = None) -> dict[str, Any]:
    from holistic_dagster.report import PREDICTIONS_PER_SCENARIO, build_report

    if version in stage.catalog.suite_versions():
        specs = stage.catalog.resolved_scenarios(version)
        about = {name: {"description": s.description, "method": s.adapter.method} for name, s in specs.items()}
        main = {name: spec.main_metric for name, spec in specs.items()}
    else:  # imported from HELM: the runs' own descriptions
        rows = stage.warehouse.df(_IMPORTED_SCENARIOS, [version])
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
def original_scores(warehouse: Warehouse, version: str, models: list[str] | None = None) -> pd.DataFrame:
    """The per-instance scores of a version's original (unperturbed) instances: model, scenario,
    instance_id, family, metric, perturbation ('' or 'worst'), value."""
    sql = (
        "SELECT s.model, s.scenario, s.instance_id, s.family, s.metric, s.perturbation, s.value "
        "FROM instance_scores s JOIN instances i USING (version, scenario, instance_id) "
        "WHERE s.version = ? AND i.perturbation = '' AND i.split = 'test'"
    )
    if models is not None:
        sql += " AND s.model IN (SELECT unnest(?::VARCHAR[]))"
    return warehouse.df(sql, [version] + ([models] if models is not None else []))


def calibration_pairs(rows: pd.DataFrame, model: str, scenario: str) -> pd.DataFrame:
    """(p, c) per instance: the model's probability for its prediction and the instance's exact_match, as
    HELM pairs them (what the calibration metrics are computed from; none where the backend gave no
    log-probabilities, as then there are no max_prob rows)."""
    mine = rows[(rows["model"] == model) & (rows["scenario"] == scenario) & (rows["perturbation"] == "")]
    probs = mine[(mine["family"] == "calibration") & (mine["metric"] == "max_prob")].set_index("instance_id")
    correct = mine[(mine["family"] == "accuracy") & (mine["metric"] == CORRECTNESS)].set_index("instance_id")
    return probs["value"].rename("p").to_frame().join(correct["value"].rename("c"), how="inner")


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


def headline_columns(cells: pd.DataFrame, main_metric: dict[str, str]) -> pd.DataFrame:
    """The cells that enter each family's win rate (metrics.is_headline)."""
    if cells.empty:
        return cells
    main = lambda r: main_metric.get(r.scenario, "")  # noqa: E731
    return cells[cells.apply(lambda r: is_headline(r.family, r.metric, r.perturbation, main(r)), axis=1)]


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


def compare_models(
    warehouse: Warehouse,
    version: str,
    model_a: str,
    model_b: str,
    alpha: float = 0.05,
    seed: int = SEED,
    main_metric: dict[str, str] | None = None,
) -> pd.DataFrame:
    """B against A per scenario and family, on each per-instance headline metric they share: the paired
    difference, its bootstrap CI, a permutation-test p-value and a verdict at `alpha`. Calibration (a
    per-instance max_prob is not better when higher) and efficiency (timing noise) are not compared."""
    rows = original_scores(warehouse, version, [model_a, model_b])
    rows = rows[~rows["family"].isin(NOT_COMPARED)]
    out = []
    for (scenario, family, name, perturbation), part in rows.groupby(["scenario", "family", "metric", "perturbation"]):
        if main_metric is not None and family in REFERENCE_FAMILIES:
            if name != main_metric.get(scenario):
                continue
        wide = part.pivot_table(index="instance_id", columns="model", values="value", aggfunc="first").dropna()
        if model_a not in wide or model_b not in wide or wide.empty:
            continue
        result = paired_test(wide[model_a], wide[model_b], lower_better=lower_is_better(name), alpha=alpha, seed=seed)
        out.append(
            {
                "version": version,
                "model_a": model_a,
                "model_b": model_b,
                "scenario": scenario,
                "family": family,
                "metric": name,
                "perturbation": perturbation,
                **result.__dict__,
                "alpha": alpha,
                "seed": seed,
            }
        )
    return pd.DataFrame(out)
