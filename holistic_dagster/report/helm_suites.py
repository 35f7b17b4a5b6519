"""What the report shows for HELM Capabilities and HELM Safety suites: the suite's mean score per model with its
95% CI (results/suite_score.py), and, where safety was rated, every judge's agreement with people on each kind of
answers it judged (a safety number comes only from judges measured on its scenario's kind)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from holistic_dagster.judging.qualification import ALL_MODELS
from holistic_dagster.metrics import METRICS
from holistic_dagster.results.safety import latest_judge_agreement
from holistic_dagster.results.suite_score import mean_scores
from holistic_dagster.warehouse import ResultStore


def family_main_metrics(family: str, main_metric: Mapping[str, str], scenarios: list[str]) -> dict[str, str]:
    """Each scenario's main metric in the family: accuracy's is the scenario's own, another family's is the
    family's headline metric (safety_score)."""
    if family == "accuracy":
        return dict(main_metric)
    headline = next(m.name for m in METRICS.values() if m.family == family and m.headline)
    return {s: headline for s in scenarios}


def mean_score_table(rows: pd.DataFrame, title: str, family: str, main_metric: Mapping[str, str]) -> dict[str, Any]:
    """The suite's mean score per model, best first."""
    mains = family_main_metrics(family, main_metric, sorted(set(rows["scenario"])) if len(rows) else [])
    frame = mean_scores(rows, mains, family)
    return {
        "title": title,
        "family": family,
        "metrics": sorted(set(mains.values())),
        "rows": [
            {"model": r.model, "score": f"{r.score:.3f}", "ci": f"[{r.ci_low:.3f}, {r.ci_high:.3f}]",
             "scenarios": r.scenarios, "instances": r.instances}
            for r in frame.itertuples()
        ],
    }  # fmt: skip


def judge_agreement(warehouse: ResultStore, version: str, min_kappa: float | None = None) -> list[dict[str, Any]]:
    """Per judge and kind of answers (as last measured for this version): its agreement with people overall (with
    its 95% interval) and per human label, Cohen's kappa, its kappa on each answering model's answers (a judge
    scores a kind only when each clears the suite's min_kappa), and the models on whose answers it fell short. A
    measurement from before schema version 3 was on GPT-4's answers alone; before 6, always on XSTest's."""
    frame = latest_judge_agreement(warehouse, version)
    out = []
    for (judge, kind), part in frame.groupby(["judge", "measured_on"], sort=True):
        models = sorted(set(part["answers_of"]) - {ALL_MODELS})
        whole = part[part["answers_of"] == (ALL_MODELS if ALL_MODELS in set(part["answers_of"]) else models[0])]
        labels = {r.human_label: r for r in whole.itertuples()}
        overall = labels.pop("all")
        per_model = part[(part["human_label"] == "all") & (part["answers_of"] != ALL_MODELS)].sort_values("answers_of")
        below = [r.answers_of for r in per_model.itertuples() if _below(r.kappa, min_kappa)]
        out.append(
            {
                "judge": judge,
                "measured_on": kind,
                "identity": overall.judge_identity,
                "n": int(overall.n),
                "agreement": _share(overall.agreement),
                "interval": _interval(overall.agreement_low, overall.agreement_high),
                "kappa": _kappa(overall.kappa),
                "scores": bool(overall.scores),
                "below": below if not overall.scores else [],
                "labels": [(label, int(r.n), _share(r.agreement)) for label, r in sorted(labels.items())],
                "per_model": [
                    (r.answers_of, int(r.n), _kappa(r.kappa)) for r in per_model.sort_values("answers_of").itertuples()
                ],
            }
        )
    return out


def _below(kappa: float | None, min_kappa: float | None) -> bool:
    return min_kappa is not None and (kappa is None or pd.isna(kappa) or kappa < min_kappa)


def _interval(low: float | None, high: float | None) -> str:
    return "" if low is None or pd.isna(low) else f"[{low:.3f}, {high:.3f}]"


def _kappa(value: float | None) -> str:
    return "undefined" if value is None or pd.isna(value) else f"{value:.3f}"


def _share(value: float | None) -> str:
    return "-" if value is None or pd.isna(value) else f"{value:.3f}"
