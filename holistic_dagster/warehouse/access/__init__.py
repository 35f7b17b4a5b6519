"""The tables' accessors: one class per table owns its SQL (reads here; each stage's partition is written through
the store's replace, whose frames the declarations build), so a column's name is written in its declaration, its
accessor and its migration, and nowhere else that reads the table. base.py: what an accessor is; core.py: the
evaluation's own tables; scores.py: the scores'; groups.py: the arena's, the judges', shadow evaluation's, the
leaderboard's and efficient evaluation's."""

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
from holistic_dagster.warehouse.access.scores import InstanceScores, ScenarioMetrics

__all__ = [
    "Accessor",
    "SourceFiles",
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
