"""Cross-model summaries of one suite version, read from the warehouse: every leaderboard cell with n and a
seeded bootstrap 95% CI, HELM's mean win rate per family, and paired comparisons of two models.

Per family, each scenario contributes one headline column to the win rate: its first accuracy metric
(accuracy; robustness and fairness use its worst case), ece_10_bin (calibration), toxic_fraction
(toxicity), runtime_s (efficiency), and for bias every bias metric of the scenario. Families are never
blended.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from holistic_dagster.metrics.calibration import calibration_metrics
from holistic_dagster.metrics.scoring import CORRECTNESS
from holistic_dagster.metrics.statistics import (
    N_BOOT,
    SEED,
    bootstrap_ci,
    bootstrap_statistic_ci,
    lower_is_better,
    mean_win_rate,
    paired_test,
)
from holistic_dagster.metrics.toxicity import toxicity_metrics
from holistic_dagster.warehouse import Warehouse

HEADLINE = {"calibration": "ece_10_bin", "toxicity": "toxic_fraction", "efficiency": "runtime_s"}
NO_CI = {
    "bias": "no bootstrap: the bias metrics are computed over all generations at once",
    "per_perturbation": "no bootstrap: a per-perturbation mean (the worst case carries the CI)",
    "rate": "no bootstrap: a rate over the whole run",
    "undefined": "no bootstrap: the value itself is undefined (its note says why)",
}


def original_scores(warehouse: Warehouse, version: str, models: list[str] | None = None) -> pd.DataFrame:
    """The per-instance scores of a version's original (unperturbed) instances: model, scenario,
    instance_id, family, metric, perturbation ('' or 'worst'), value."""
    sql = (
        "SELECT s.model, s.scenario, s.instance_id, s.family, s.metric, s.perturbation, s.value "
        "FROM instance_scores s JOIN instances i USING (version, scenario, instance_id) "
        "WHERE s.version = ? AND i.perturbation = ''"
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
        low = high = float("nan")
        note = ""
        if key in groups:
            low, high = bootstrap_ci(groups[key]["value"].to_numpy(), n_boot=n_boot, seed=seed)
        elif c.family == "calibration" and pd.isna(c.value):
            note = NO_CI["undefined"]
        elif c.family == "calibration":
            low, high = _calibration_ci(rows, c, n_boot, seed, calibration_boot)
        elif c.family == "toxicity":
            per = groups.get((c.model, c.scenario, "toxicity", "toxicity", ""))
            if per is not None:
                x = per["value"].to_numpy()
                low, high = bootstrap_statistic_ci(
                    len(x), lambda i: toxicity_metrics([[v] for v in x[i]])[c.metric], n_boot, seed
                )
        elif c.family == "bias":
            note = NO_CI["bias"]
        elif c.perturbation:
            note = NO_CI["per_perturbation"]
        else:
            note = NO_CI["rate"]
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


def _calibration_boot(pairs: pd.DataFrame, n_boot: int, seed: int) -> dict[str, np.ndarray] | None:
    p, k = pairs["p"].to_numpy(), pairs["c"].to_numpy()
    if len(p) == 0:
        return None
    rng = np.random.default_rng(seed)
    samples = [calibration_metrics(p[i], k[i]) for i in (rng.integers(0, len(p), size=len(p)) for _ in range(n_boot))]
    return {m: np.array([x[m] for x in samples]) for m in samples[0]}


def headline_columns(cells: pd.DataFrame, main_metric: dict[str, str]) -> pd.DataFrame:
    """The cells that enter each family's win rate: one headline column per scenario (every bias metric)."""

    def is_headline(r) -> bool:
        if r.family == "bias":
            return True
        if r.family in ("accuracy", "robustness", "fairness"):
            return r.metric == main_metric.get(r.scenario) and r.perturbation in ("", "worst")
        return r.metric == HEADLINE.get(r.family)

    return cells[cells.apply(is_headline, axis=1)]


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
    rows = rows[~rows["family"].isin(["efficiency", "calibration"])]
    out = []
    for (scenario, family, metric, perturbation), part in rows.groupby(
        ["scenario", "family", "metric", "perturbation"]
    ):
        if main_metric is not None and family in ("accuracy", "robustness", "fairness"):
            if metric != main_metric.get(scenario):
                continue
        wide = part.pivot_table(index="instance_id", columns="model", values="value", aggfunc="first").dropna()
        if model_a not in wide or model_b not in wide or wide.empty:
            continue
        result = paired_test(wide[model_a], wide[model_b], lower_better=lower_is_better(metric), alpha=alpha, seed=seed)
        out.append(
            {
                "version": version,
                "model_a": model_a,
                "model_b": model_b,
                "scenario": scenario,
                "family": family,
                "metric": metric,
                "perturbation": perturbation,
                **result.__dict__,
                "alpha": alpha,
                "seed": seed,
            }
        )
    return pd.DataFrame(out)
