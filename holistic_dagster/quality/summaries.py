"""The checks of the cross-model summaries of a suite version: the leaderboard, the regression tests of new
revisions and the graded alerts."""

from __future__ import annotations

import pandas as pd

from holistic_dagster.quality.base import CheckOutcome, declare, runs_checks
from holistic_dagster.quality.gx import expect
from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import ScenarioMetrics

LEADERBOARD_COMPLETE = declare(
    "leaderboard",
    "leaderboard_complete",
    "Every model on the leaderboard has values for every scenario of the suite version.",
)
NO_CRITICAL_ALERT = declare(
    "alerts",
    "no_critical_alert",
    "No model crosses a critical threshold of resources/alerts.yaml against its baseline (blocking).",
    blocking=True,
)
NO_WARNING_ALERT = declare(
    "alerts",
    "no_warning_alert",
    "No model crosses a warning threshold of resources/alerts.yaml against its baseline.",
)
NO_SIGNIFICANT_REGRESSION = declare(
    "regressions",
    "no_significant_regression",
    "No model is significantly worse than the revision it replaces (registry `previous`), on any "
    "scenario and metric family (paired permutation test at the suite's regression_alpha).",
    error=True,
)


@runs_checks("leaderboard")
def leaderboard_checks(stage, version: str, scenario: str | None = None, model: str | None = None):
    return check_leaderboard(stage.warehouse, version, stage.deployment.runnable(version)[0])


def check_leaderboard(warehouse: ResultStore, version: str, scenarios: list[str]) -> list[CheckOutcome]:
    frame = ScenarioMetrics(warehouse).values_per_cell(version)
    models = sorted(frame["model"].unique())
    grid = pd.DataFrame([(m, s) for m in models for s in scenarios], columns=["model", "scenario"])
    grid = grid.merge(frame, on=["model", "scenario"], how="left").fillna({"num_values": 0})
    grid["cell"] = grid["model"] + " / " + grid["scenario"]
    return [
        LEADERBOARD_COMPLETE.outcome(
            grid,
            [
                expect.ExpectTableRowCountToBeBetween(min_value=1),
                expect.ExpectColumnValuesToBeBetween(column="num_values", min_value=1),
            ],
        )
    ]


def check_alerts(findings: list) -> list[CheckOutcome]:
    """One check per level: fails, naming each finding, when any finding has that level (alerts.Finding)."""
    outcomes = []
    for spec, level in ((NO_CRITICAL_ALERT, "critical"), (NO_WARNING_ALERT, "warning")):
        hits = [f.message for f in findings if f.level == level]
        details = {"graded": len(findings), level: hits[:50]}
        if not hits:
            outcomes.append(CheckOutcome(spec.name, True, spec.description, details))
        else:
            summary = "; ".join(hits[:3]) + (f" ... ({len(hits)} in all)" if len(hits) > 3 else "")
            outcomes.append(CheckOutcome(spec.name, False, f"{len(hits)} {level}: {summary}", details))
    return outcomes


def check_regressions(comparisons: pd.DataFrame) -> list[CheckOutcome]:
    """Fails when any comparison's verdict is "worse", naming the models, scenario, family and metric."""
    spec = NO_SIGNIFICANT_REGRESSION
    if comparisons.empty:
        return [CheckOutcome(spec.name, True, spec.description + " No model has a `previous` revision yet.")]
    worse = comparisons[comparisons["verdict"] == "worse"]
    details = {
        "comparisons": len(comparisons),
        "worse": [
            f"{r.model_b} vs {r.model_a}: {r.scenario} / {r.family} / {r.metric}"
            f"{' [' + r.perturbation + ']' if r.perturbation else ''}: {r.mean_b:.3f} vs {r.mean_a:.3f} "
            f"(diff {r.diff:+.3f}, 95% CI [{r.ci_low:+.3f}, {r.ci_high:+.3f}], p = {r.p_value:.4f})"
            for r in worse.itertuples()
        ],
    }
    if worse.empty:
        return [CheckOutcome(spec.name, True, spec.description, details)]
    summary = "; ".join(details["worse"][:5]) + (" ..." if len(worse) > 5 else "")
    return [CheckOutcome(spec.name, False, f"Significantly worse: {summary}", details)]
