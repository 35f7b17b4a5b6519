"""The arena's results as its readers want them: a version's Bradley-Terry ratings per judge (the Dagster UI's
table), and how many votes each version has (what the votes sensor watches)."""

from __future__ import annotations

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
