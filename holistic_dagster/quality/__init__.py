"""Data-quality checks for every stage, expressed as Great Expectations 1.x expectations (gx.py), one module per
product: evaluation.py (dataset, prompts, completions, scores), efficient.py (a scenario's anchors),
summaries.py (leaderboard, regressions, alerts),
arena.py (battles, ratings), shadow.py (traffic, verdicts). Each check is declared once (base.declare); the stage ->
checks table Dagster's asset checks are built from, STAGE_CHECKS, is derived from the declarations.

Each check reads what the stage actually stored in the warehouse, so a check also catches a corrupted table. The
Dagster layer turns each CheckOutcome into an asset check result; blocking checks stop downstream stages from
running on bad data.
"""

from __future__ import annotations

from holistic_dagster.quality import arena, efficient, evaluation, shadow, summaries
from holistic_dagster.quality.base import RUNNERS, STAGE_CHECKS, Check, CheckOutcome

# the checks a caller runs directly on what it has at hand (a frame, findings), and those the tests run on a table
check_dataset = evaluation.check_dataset
check_prompts = evaluation.check_prompts
check_completions = evaluation.check_completions
check_scores = evaluation.check_scores
check_leaderboard = summaries.check_leaderboard
check_regressions = summaries.check_regressions
check_alerts = summaries.check_alerts
check_battles = arena.check_battles
check_ratings = arena.check_ratings
check_anchors = efficient.check_anchors
check_traffic = shadow.check_traffic
check_shadow_verdicts = shadow.check_shadow_verdicts


def check_stage(
    name: str, stage, version: str, scenario: str | None = None, model: str | None = None
) -> list[CheckOutcome]:
    """The checks of one stage on what it stored, with the parameters the catalog gives them (the suite's
    max_failure_rate, the scenario's rows per instance, the suite's scenarios)."""
    if name not in RUNNERS:
        raise ValueError(f"no checks for stage {name!r} here (regressions are checked on the comparisons frame)")
    return RUNNERS[name](stage, version, scenario, model)


__all__ = ["STAGE_CHECKS", "Check", "CheckOutcome", "check_stage"]
