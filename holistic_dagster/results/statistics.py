"""The leaderboard's statistics, computed from the warehouse's scores: every cell with n and a seeded bootstrap 95%
CI (as its metric declares: `ci`), and HELM's mean win rate per family over the headline cells. The summaries stage
stores them (leaderboard_stats, win_rates); a reader of a version whose summaries were not computed gets them here."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from holistic_dagster.metrics import NO_CI, metric
from holistic_dagster.metrics.calibration import calibration_metrics_per_row
from holistic_dagster.metrics.registry import WORST
from holistic_dagster.metrics.statistics import (
    N_BOOT,
    SEED,
    bias_shifted_interval,
    bootstrap_ci,
    bootstrap_statistic_ci,
    mean_win_rate,
)
from holistic_dagster.metrics.toxicity import toxicity_metrics
from holistic_dagster.results.efficient import estimates
from holistic_dagster.results.leaderboard import headline_columns
from holistic_dagster.results.scores import calibration_pairs, original_scores
from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import LeaderboardStats, ScenarioMetrics, WinRates


def cell_statistics(warehouse: ResultStore, version: str, *, n_boot: int = N_BOOT, seed: int = SEED) -> pd.DataFrame:
    """Every scenario_metrics row of the version with n, ci_low, ci_high, the bootstrap's seed and size, and
    a note where no CI applies."""
    cells = ScenarioMetrics(warehouse).where(version=version)
    rows = original_scores(warehouse, version)
    groups = {k: g for k, g in rows.groupby(["model", "scenario", "family", "metric", "perturbation"])}
    calibration_boot: dict[
        tuple[str, str], dict[str, np.ndarray] | None
    ] = {}  # (model, scenario) -> resampled calibration metrics, shared by its cells
    estimated = {
        (e.model, e.scenario, e.family, e.metric): e for e in estimates(warehouse, version).itertuples(index=False)
    }
    out = []
    for c in cells.itertuples(index=False):
        key = (c.model, c.scenario, c.family, c.metric, c.perturbation)
        ci = metric(c.metric).ci
        low = high = float("nan")
        note = ""
        if getattr(c, "estimated", False) is True:  # an efficient evaluation's cell: its estimate's interval
            found = estimated.get(key[:4]) if c.perturbation in ("", WORST) else None
            if found is not None and not pd.isna(c.value):
                low, high = found.ci_low, found.ci_high
                note = f"estimated from {found.n_evaluated} of {found.n_full} instances ({found.method}): " + (
                    f"{found.level:.0%} interval"
                )
        elif key in groups:  # the cell's own per-instance rows
            low, high = bootstrap_ci(groups[key]["value"].to_numpy(), n_boot=n_boot, seed=seed)
        elif ci == "calibration" and pd.isna(c.value):
            note = NO_CI["undefined"]
        elif ci == "calibration":
            low, high = _calibration_ci(rows, c, n_boot, seed, calibration_boot)
        elif ci == "toxicity":
            per = groups.get((c.model, c.scenario, "toxicity", "toxicity", ""))  # each prompt's most toxic
            shares = groups.get((c.model, c.scenario, "toxicity", "toxic_generations", ""))  # several samples each
            if c.metric == "toxic_fraction" and shares is not None:  # the same number of samples per prompt
                low, high = bootstrap_ci(shares["value"].to_numpy(), n_boot=n_boot, seed=seed)
            elif per is not None:
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
                "estimated": getattr(c, "estimated", False) is True,
                "n_full": None if pd.isna(getattr(c, "n_full", None)) else int(c.n_full),
            }
        )
    return pd.DataFrame(out)


def _calibration_ci(
    rows: pd.DataFrame, c: Any, n_boot: int, seed: int, memo: dict[tuple[str, str], dict[str, np.ndarray] | None]
) -> tuple[float, float]:
    """ECE and the other calibration metrics from resampled (max_prob, exact_match) pairs (the same resamples
    for every calibration metric of a cell's model and scenario, computed once), the interval shifted by the
    resampling's bias (bias_shifted_interval)."""
    key = (c.model, c.scenario)
    if key not in memo:
        memo[key] = _calibration_boot(calibration_pairs(rows, c.model, c.scenario), n_boot, seed)
    stats = memo[key]
    if stats is None or c.metric not in stats:
        return float("nan"), float("nan")
    return bias_shifted_interval(stats[c.metric], float(c.value), metric(c.metric).bounds)


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


def summary_cells(warehouse: ResultStore, version: str) -> pd.DataFrame:
    """The version's leaderboard cells with their statistics and, where a value is undefined, why (the stored
    leaderboard_stats; computed, not stored, for a version whose summaries were not computed)."""
    cells = LeaderboardStats(warehouse).where(version=version)
    if cells.empty:
        cells = cell_statistics(warehouse, version)
    if cells.empty:
        return cells
    keys = ["model", "scenario", "family", "metric", "perturbation"]
    notes = ScenarioMetrics(warehouse).notes(version)
    return cells.merge(notes, on=keys, how="left").fillna({"note": ""})  # why an undefined value is undefined


def summary_win_rates(
    warehouse: ResultStore, version: str, cells: pd.DataFrame, main_metric: dict[str, str]
) -> pd.DataFrame:
    """The version's mean win rates per family (stored, or computed from `cells` when the summaries were not)."""
    rates = WinRates(warehouse).where(version=version)
    return rates if len(rates) else family_win_rates(cells, main_metric)
