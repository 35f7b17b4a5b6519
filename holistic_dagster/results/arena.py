"""The arena's results as its readers want them: a version's Bradley-Terry ratings per judge (the Dagster UI's
table), the whole arena of a version (the report's section and `holistic arena`), and how many votes each version
has (what the votes sensor watches)."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pandas as pd

from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import ArenaJudges, ArenaRatings, ArenaWinRates, Battles, Votes


def bradley_terry_table(store: ResultStore, version: str) -> pd.DataFrame:
    """Per judge, its models by Bradley-Terry rating (best first), rounded for display."""
    return ArenaRatings(store).for_display(version)


def votes_seen(store: ResultStore) -> dict[str, str] | None:
    """{version: "<number of votes>@<the latest vote's time>"}; None for a warehouse from before the votes table."""
    try:
        seen = Votes(store).seen()
    except duckdb.CatalogException:
        return None
    return {r.version: f"{r.n}@{r.last}" for r in seen.itertuples()}


@dataclass(frozen=True)
class ArenaRecord:
    """A version's arena as stored: every rating by every method, each judge's qualification, each judge's battles
    (how many, without a verdict, inconsistent), the people's votes (how many, by how many voters), the win rates."""

    ratings: pd.DataFrame
    judges: pd.DataFrame
    battle_counts: pd.DataFrame
    votes: pd.DataFrame
    wins: pd.DataFrame


JUDGE_COLUMNS = ["judge", "qualified", "agreement", "position_consistency", "reason"]


def arena_record(store: ResultStore, version: str) -> ArenaRecord | None:
    """The version's arena; None when it has neither ratings nor judges, or the warehouse predates the arena."""
    try:
        ratings = ArenaRatings(store).where(version=version)
        try:
            judges = ArenaJudges(store).where(version=version)
        except duckdb.CatalogException:  # from before judges were qualified: they were not measured
            judges = pd.DataFrame(columns=JUDGE_COLUMNS)
        if ratings.empty and judges.empty:
            return None
        battle_counts = Battles(store).counts(version)
        votes = Votes(store).count(version)
        wins = ArenaWinRates(store).where(version=version)
    except duckdb.CatalogException:  # a warehouse from before the arena
        return None
    return ArenaRecord(ratings, judges, battle_counts, votes, wins)


def vote_of(store: ResultStore, version: str, voter: str, battle_id: str) -> pd.DataFrame:
    """A voter's vote on a battle (model_a, model_b, shown_first, winner): no row before it is cast."""
    return Votes(store).of(version, voter, battle_id)
