"""The tables' accessors: one class per table owns its SQL (reads here; each stage's partition is written through
the store's replace, whose frames the declarations build), so a column's name is written in its declaration, its
accessor and its migration, and nowhere else that reads the table. base.py: what an accessor is; core.py: the
evaluation's own tables; scores.py: the scores'; groups.py: the arena's, the judges' and shadow evaluation's;
summaries.py: the summaries', the imports', the provenance's and efficient evaluation's."""

from __future__ import annotations

from holistic_dagster.warehouse.access.base import Accessor
from holistic_dagster.warehouse.access.core import (
    Answers,
    Applicability,
    CompletionCache,
    Completions,
    Instances,
    Prompts,
    SourceFiles,
    no_prompts,
)
from holistic_dagster.warehouse.access.groups import (
    ArenaJudges,
    ArenaRatings,
    ArenaWinRates,
    Battles,
    JudgeQualifications,
    SafetyAgreement,
    ShadowCompletions,
    ShadowVerdicts,
    Traffic,
    Votes,
)
from holistic_dagster.warehouse.access.scores import InstanceScores, ScenarioMetrics
from holistic_dagster.warehouse.access.summaries import (
    AnchorFits,
    AnchorInstances,
    Comparisons,
    Estimates,
    ImportedRuns,
    LeaderboardStats,
    PartialEvaluations,
    Provenance,
    Stability,
    WinRates,
)

__all__ = [
    "Accessor",
    "AnchorFits",
    "AnchorInstances",
    "Answers",
    "Applicability",
    "ArenaJudges",
    "ArenaRatings",
    "ArenaWinRates",
    "Battles",
    "Comparisons",
    "CompletionCache",
    "Completions",
    "Estimates",
    "ImportedRuns",
    "InstanceScores",
    "Instances",
    "JudgeQualifications",
    "LeaderboardStats",
    "PartialEvaluations",
    "Prompts",
    "Provenance",
    "SafetyAgreement",
    "ScenarioMetrics",
    "ShadowCompletions",
    "ShadowVerdicts",
    "SourceFiles",
    "Stability",
    "Traffic",
    "Votes",
    "WinRates",
    "no_prompts",
]
