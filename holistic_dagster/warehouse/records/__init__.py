"""Typed row records of every warehouse table (Table.records maps a frame to them). Generated from the declarations in
warehouse/tables/ by `python -m holistic_dagster.cli.reference`: do not edit."""

from __future__ import annotations

from typing import Any

from holistic_dagster.warehouse.records.arena import (
    ArenaJudgesRow,
    ArenaRatingsRow,
    ArenaWinRatesRow,
    BattlesRow,
    VotesRow,
)
from holistic_dagster.warehouse.records.core import (
    ApplicabilityRow,
    CompletionCacheRow,
    CompletionsRow,
    InstanceScoresRow,
    InstancesRow,
    PromptsRow,
    ProvenanceRow,
    ScenarioMetricsRow,
    SchemaInfoRow,
    SourceFilesRow,
)
from holistic_dagster.warehouse.records.efficient import (
    AnchorFitsRow,
    AnchorInstancesRow,
    EstimatesRow,
    PartialEvaluationsRow,
)
from holistic_dagster.warehouse.records.judging import (
    JudgeQualificationsRow,
    QualificationVerdictsRow,
    SafetyAgreementRow,
    SafetyRatingsRow,
)
from holistic_dagster.warehouse.records.operations import (
    ImportedRunsRow,
    StepInputsRow,
    UndeliveredAlertsRow,
)
from holistic_dagster.warehouse.records.shadow import (
    ShadowCompletionsRow,
    ShadowVerdictsRow,
    ShadowWinRatesRow,
    TrafficQuarantineRow,
    TrafficRow,
)
from holistic_dagster.warehouse.records.summaries import (
    AlertsRow,
    ComparisonsRow,
    LeaderboardStatsRow,
    StabilityRow,
    WinRatesRow,
)

ROW_TYPES: dict[str, type[Any]] = {
    "schema_info": SchemaInfoRow,
    "source_files": SourceFilesRow,
    "instances": InstancesRow,
    "applicability": ApplicabilityRow,
    "prompts": PromptsRow,
    "provenance": ProvenanceRow,
    "completions": CompletionsRow,
    "completion_cache": CompletionCacheRow,
    "instance_scores": InstanceScoresRow,
    "scenario_metrics": ScenarioMetricsRow,
    "anchor_fits": AnchorFitsRow,
    "anchor_instances": AnchorInstancesRow,
    "partial_evaluations": PartialEvaluationsRow,
    "estimates": EstimatesRow,
    "leaderboard_stats": LeaderboardStatsRow,
    "win_rates": WinRatesRow,
    "comparisons": ComparisonsRow,
    "stability": StabilityRow,
    "alerts": AlertsRow,
    "step_inputs": StepInputsRow,
    "undelivered_alerts": UndeliveredAlertsRow,
    "imported_runs": ImportedRunsRow,
    "battles": BattlesRow,
    "votes": VotesRow,
    "arena_ratings": ArenaRatingsRow,
    "arena_judges": ArenaJudgesRow,
    "arena_win_rates": ArenaWinRatesRow,
    "traffic": TrafficRow,
    "traffic_quarantine": TrafficQuarantineRow,
    "shadow_completions": ShadowCompletionsRow,
    "shadow_verdicts": ShadowVerdictsRow,
    "shadow_win_rates": ShadowWinRatesRow,
    "judge_qualifications": JudgeQualificationsRow,
    "qualification_verdicts": QualificationVerdictsRow,
    "safety_ratings": SafetyRatingsRow,
    "safety_agreement": SafetyAgreementRow,
}

__all__ = [
    "ROW_TYPES",
    "AlertsRow",
    "AnchorFitsRow",
    "AnchorInstancesRow",
    "ApplicabilityRow",
    "ArenaJudgesRow",
    "ArenaRatingsRow",
    "ArenaWinRatesRow",
    "BattlesRow",
    "ComparisonsRow",
    "CompletionCacheRow",
    "CompletionsRow",
    "EstimatesRow",
    "ImportedRunsRow",
    "InstanceScoresRow",
    "InstancesRow",
    "JudgeQualificationsRow",
    "LeaderboardStatsRow",
    "PartialEvaluationsRow",
    "PromptsRow",
    "ProvenanceRow",
    "QualificationVerdictsRow",
    "SafetyAgreementRow",
    "SafetyRatingsRow",
    "ScenarioMetricsRow",
    "SchemaInfoRow",
    "ShadowCompletionsRow",
    "ShadowVerdictsRow",
    "ShadowWinRatesRow",
    "SourceFilesRow",
    "StabilityRow",
    "StepInputsRow",
    "TrafficQuarantineRow",
    "TrafficRow",
    "UndeliveredAlertsRow",
    "VotesRow",
    "WinRatesRow",
]
