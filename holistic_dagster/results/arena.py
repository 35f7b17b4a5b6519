"""The arena's results as its readers want them: a version's Bradley-Terry ratings per judge (the Dagster UI's
table), the whole arena of a version (the report's section and `holistic arena`), and how many votes each version
has (what the votes sensor watches)."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pandas as pd

from holistic_dagster.warehouse import ResultStore


def bradley_terry_table(store: ResultStore, version: str) -> pd.DataFrame:
    """Per judge, its models by Bradley-Terry rating (best first), rounded for display."""
    return store.df(
        "SELECT judge, model, round(rating, 1) AS rating, round(ci_low, 1) AS ci_low, round(ci_high, 1) AS ci_high,"
        " num_battles, round(mean_answer_tokens, 1) AS mean_answer_tokens FROM arena_ratings "
        "WHERE version = ? AND method = 'bradley_terry' ORDER BY judge, rating DESC",
        [version],
    )


def votes_seen(store: ResultStore) -> dict[str, str] | None:
    """{version: "<number of votes>@<the latest vote's time>"}; None for a warehouse from before the votes table."""
    try:
        seen = store.df("SELECT version, count(*) AS n, max(voted_at)::VARCHAR AS last FROM votes GROUP BY 1")
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
        ratings = store.df("SELECT * FROM arena_ratings WHERE version = ?", [version])
        try:
            judges = store.df("SELECT * FROM arena_judges WHERE version = ?", [version])
        except duckdb.CatalogException:  # from before judges were qualified: they were not measured
            judges = pd.DataFrame(columns=JUDGE_COLUMNS)
        if ratings.empty and judges.empty:
            return None
        battle_counts = store.df(
            "SELECT judge, count(*) AS n, count(*) FILTER (WHERE winner = '') AS no_verdict, "
            "count(*) FILTER (WHERE winner <> '' AND NOT consistent) AS inconsistent "
            "FROM battles WHERE version = ? GROUP BY judge",
            [version],
        )
        votes = store.df(
            "SELECT count(*) AS n, count(DISTINCT voter) AS voters FROM votes WHERE version = ?", [version]
        )
        wins = store.df("SELECT * FROM arena_win_rates WHERE version = ?", [version])
    except duckdb.CatalogException:  # a warehouse from before the arena
        return None
    return ArenaRecord(ratings, judges, battle_counts, votes, wins)


def vote_of(store: ResultStore, version: str, voter: str, battle_id: str) -> pd.DataFrame:
    """A voter's vote on a battle (model_a, model_b, shown_first, winner): no row before it is cast."""
    return store.df(
        "SELECT model_a, model_b, shown_first, winner FROM votes WHERE version = ? AND voter = ? AND battle_id = ?",
        [version, voter, battle_id],
    )
