"""A suite's own mean score per model (HELM Capabilities' "mean score", HELM Safety's mean safety score): the
unweighted mean over the suite's scenarios of each scenario's main score in one family (HELM's leaderboards average
the scenario columns, skipping blanks). Its 95% CI is a bootstrap that resamples each scenario's instances on its
own (the scenarios are independent samples) and averages the resampled scenario means."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from holistic_dagster.metrics.statistics import N_BOOT, SEED


def mean_scores(
    rows: pd.DataFrame, main_metric: Mapping[str, str], family: str, samples: int = N_BOOT, seed: int = SEED
) -> pd.DataFrame:
    """Per model: score, ci_low, ci_high and the scenarios behind it (rows: results.scores.original_scores;
    main_metric: each scenario's main metric in `family`)."""
    mine = rows[(rows["family"] == family) & (rows["perturbation"] == "")]
    mine = mine[[main_metric.get(s) == m for s, m in zip(mine["scenario"], mine["metric"])]] if len(mine) else mine
    out = []
    for model, part in mine.groupby("model"):
        columns = [g["value"].to_numpy(float) for _, g in part.groupby("scenario")]
        rng = np.random.default_rng(seed)
        boot = np.mean([[v[rng.integers(0, len(v), len(v))].mean() for v in columns] for _ in range(samples)], axis=1)
        low, high = np.percentile(boot, [2.5, 97.5])
        score = float(np.mean([v.mean() for v in columns]))
        instances = int(sum(map(len, columns)))
        out.append({"model": model, "score": score, "ci_low": float(low), "ci_high": float(high),
                    "scenarios": len(columns), "instances": instances})  # fmt: skip
    frame = pd.DataFrame(out, columns=["model", "score", "ci_low", "ci_high", "scenarios", "instances"])
    return frame.sort_values("score", ascending=False, kind="stable").reset_index(drop=True)
