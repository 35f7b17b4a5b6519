"""Statistics over scores: HELM's mean win rate, seeded bootstrap confidence intervals, and paired tests
between two models on the same instances.

- Mean win rate (HELM, `compute_aggregate_row_win_rates`): in each column (a scenario's headline metric of one
  family), a model's win rate is the share of the other models it beats, a tie counting one half; its mean
  win rate is the mean over the columns where it and at least one other model have a value.
- Bootstrap CI: resample the instances with replacement `n_boot` times (numpy Generator seeded with `seed`),
  recompute the statistic, take the 2.5th and 97.5th percentiles; for a statistic that resampling biases
  (calibration's ECE), those percentiles shifted by the bootstrap's bias estimate (bias_shifted_interval).
- Paired test: on the instances both models were scored on, the difference of means with a paired bootstrap
  CI, and a two-sided paired permutation (sign-flip) test of "no difference"; the verdict is better / worse
  when p < alpha, else no significant change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from holistic_dagster.metrics import lower_is_better, metric

N_BOOT = 1000
SEED = 0


def win_rates(column: pd.Series, lower_better: bool) -> pd.Series:
    """One column (model -> value): each model's share of the other models it beats, ties counting 1/2."""
    values = column.dropna()
    if len(values) < 2:
        return pd.Series(dtype=float)
    x = values.abs() if metric(str(column.name)).absolute else values
    x = -x if lower_better else x
    out = {}
    for model, v in x.items():
        others = x.drop(model)
        out[model] = ((others < v).sum() + 0.5 * (others == v).sum()) / len(others)
    return pd.Series(out, dtype=float)


def mean_win_rate(table: pd.DataFrame, metric_of: Callable[[str], str]) -> pd.DataFrame:
    """table: models x columns (one per scenario) of values; metric_of(column) names the column's metric.
    Returns model, mean_win_rate, num_columns (the columns that counted for that model)."""
    per_column = []
    for column in table.columns:
        series = table[column].rename(metric_of(column))
        per_column.append(win_rates(series, lower_is_better(metric_of(column))).rename(column))
    if not per_column:
        return pd.DataFrame(columns=["model", "mean_win_rate", "num_columns"])
    rates = pd.concat(per_column, axis=1)
    return pd.DataFrame(
        {"model": rates.index, "mean_win_rate": rates.mean(axis=1).values, "num_columns": rates.notna().sum(axis=1)}
    ).reset_index(drop=True)


def bootstrap_statistic_ci(
    n: int, statistic: Callable[[np.ndarray], float], n_boot: int = N_BOOT, seed: int = SEED
) -> tuple[float, float]:
    """Percentile bootstrap 95% CI of a statistic computed from resampled row indices 0..n-1 (for statistics
    that are not means of one column, e.g. ECE from (probability, correct) pairs)."""
    if n == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    stats = np.array([statistic(rng.integers(0, n, size=n)) for _ in range(n_boot)], dtype=float)
    if np.isnan(stats).all():
        return float("nan"), float("nan")
    low, high = np.nanpercentile(stats, [2.5, 97.5])
    return float(low), float(high)


def bias_shifted_interval(
    resampled: np.ndarray, estimate: float, bounds: tuple[float, float] = (0.0, 1.0)
) -> tuple[float, float]:
    """The 95% interval of a statistic that resampling biases (ECE: duplicated instances crowd its bins, so the
    resampled values sit above the estimate, and on n <= 30 their 2.5-97.5 percentiles can exclude it): the
    percentiles shifted by the bootstrap's estimate of the bias (the mean resampled value minus the estimate),
    i.e. the resampled spread re-centred on the estimate, clipped to the metric's bounds. It holds the estimate
    whenever the mean resampled value lies between those percentiles."""
    values = np.asarray(resampled, dtype=float)
    values = values[np.isfinite(values)]
    if len(values) == 0 or not np.isfinite(estimate):
        return float("nan"), float("nan")
    low, high = np.percentile(values, [2.5, 97.5])
    bias = float(values.mean()) - estimate
    shifted = max(bounds[0], low - bias), min(bounds[1], high - bias)
    if shifted[0] > shifted[1]:  # a degenerate spread pushed past a bound: the percentiles as they are
        return float(low), float(high)
    return float(shifted[0]), float(shifted[1])


def bootstrap_ci(
    values: Sequence[float], statistic: Callable[[np.ndarray], float] = np.mean, n_boot: int = N_BOOT, seed: int = SEED
) -> tuple[float, float]:
    """Percentile bootstrap 95% CI of `statistic` over `values` (per-instance rows, resampled as rows)."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    stats = np.array([statistic(x[i]) for i in idx]) if statistic is not np.mean else x[idx].mean(axis=1)
    low, high = np.percentile(stats, [2.5, 97.5])
    return float(low), float(high)


@dataclass(frozen=True)
class PairedResult:
    n: int
    mean_a: float
    mean_b: float
    diff: float  # mean(b - a)
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str  # "better" | "worse" | "no significant change" (b relative to a)


def paired_test(
    a: Sequence[float],
    b: Sequence[float],
    *,
    lower_better: bool = False,
    alpha: float = 0.05,
    n_boot: int = N_BOOT,
    n_perm: int = 2000,
    seed: int = SEED,
) -> PairedResult:
    """B against A on the same instances (a[i] and b[i] belong together)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape or len(a) == 0:
        raise ValueError(f"paired test needs two equal-length, non-empty samples (got {len(a)} and {len(b)})")
    d = b - a
    rng = np.random.default_rng(seed)
    boot = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    low, high = np.percentile(boot, [2.5, 97.5])
    observed = abs(d.mean())
    if not d.any():
        p = 1.0
    else:
        signs = rng.choice([-1.0, 1.0], size=(n_perm, len(d)))
        permuted = np.abs((signs * d).mean(axis=1))
        p = float((np.sum(permuted >= observed - 1e-12) + 1) / (n_perm + 1))
    if p < alpha and d.mean() != 0:
        improved = d.mean() < 0 if lower_better else d.mean() > 0
        verdict = "better" if improved else "worse"
    else:
        verdict = "no significant change"
    return PairedResult(len(d), float(a.mean()), float(b.mean()), float(d.mean()), float(low), float(high), p, verdict)
