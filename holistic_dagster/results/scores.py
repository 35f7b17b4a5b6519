"""Per-instance scores as the statistics use them: the original (unperturbed) instances' values, the calibration
pairs, and paired comparisons of two models on the instances both answered."""

from __future__ import annotations

import pandas as pd

from holistic_dagster.metrics import NOT_COMPARED, REFERENCE_FAMILIES, lower_is_better
from holistic_dagster.metrics.scoring import CORRECTNESS
from holistic_dagster.metrics.statistics import SEED, paired_test
from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import InstanceScores


def original_scores(warehouse: ResultStore, version: str, models: list[str] | None = None) -> pd.DataFrame:
    """The per-instance scores of a version's original (unperturbed) instances: model, scenario,
    instance_id, family, metric, perturbation ('' or 'worst'), value. A model's scenario evaluated efficiently (only
    its anchors answered: partial_evaluations) is left out: paired tests, statistics and the gate read full draws."""
    return InstanceScores(warehouse).on_full_draws(version, models)


def calibration_pairs(rows: pd.DataFrame, model: str, scenario: str) -> pd.DataFrame:
    """(p, c) per instance: the model's probability for its prediction and the instance's exact_match, as
    HELM pairs them (what the calibration metrics are computed from; none where the backend gave no
    log-probabilities, as then there are no max_prob rows)."""
    mine = rows[(rows["model"] == model) & (rows["scenario"] == scenario) & (rows["perturbation"] == "")]
    probs = mine[(mine["family"] == "calibration") & (mine["metric"] == "max_prob")].set_index("instance_id")
    correct = mine[(mine["family"] == "accuracy") & (mine["metric"] == CORRECTNESS)].set_index("instance_id")
    return probs["value"].rename("p").to_frame().join(correct["value"].rename("c"), how="inner")


def compare_models(
    warehouse: ResultStore,
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
