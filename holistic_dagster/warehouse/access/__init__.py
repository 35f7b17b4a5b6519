"""The tables' accessors: one class per table owns its SQL (reads here; each stage's partition is written through
the store's replace, whose frames the declarations build), so a column's name is written in its declaration, its
accessor and its migration, and nowhere else that reads the table. core.py: the evaluation's own tables; groups.py:
the arena's, the judges', shadow evaluation's and efficient evaluation's."""

from __future__ import annotations

from holistic_dagster.warehouse.access.core import (
    Answers,
    Applicability,
    CompletionCache,
    Completions,
    Instances,
    InstanceScores,
    Prompts,
    ScenarioMetrics,
    no_prompts,
)
from holistic_dagster.warehouse.access.groups import (
    AnchorFits,
    ArenaRatings,
    Battles,
    JudgeQualifications,
    LeaderboardStats,
    ShadowCompletions,
    ShadowVerdicts,
    Traffic,
    Votes,
)

__all__ = [
    "AnchorFits",
    "ArenaRatings",
    "Battles",
    "JudgeQualifications",
    "LeaderboardStats",
    "ShadowCompletions",
    "ShadowVerdicts",
    "Traffic",
    "Votes",
    "Answers",
    "Applicability",
    "CompletionCache",
    "Completions",
    "InstanceScores",
    "Instances",
    "Prompts",
    "ScenarioMetrics",
    "no_prompts",
]
