"""The leaderboard as the warehouse holds it: cells per family, scenario, metric and model (never blended across
families), the headline cells that enter each family's win rate, each scenario's main metric and the suite's
significance level (for imported HELM versions, as the import recorded them), and where a version's report is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from holistic_dagster.config.catalog import Catalog, SuiteSpec
from holistic_dagster.metrics import FAMILIES, is_headline
from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import Comparisons, ImportedRuns, Instances, LeaderboardStats


def leaderboard(warehouse: ResultStore, version: str, family: str | None = None) -> pd.DataFrame:
    """Models x (scenario, metric) per family, for one suite version; never blended across families. Families
    that do not apply to a scenario appear as rows with no value and a note saying so."""
    sql = "SELECT * FROM leaderboard WHERE version = ?" + (" AND family = ?" if family else "")
    frame = warehouse.df(sql, [version] + ([family] if family else []))
    frame["family"] = pd.Categorical(frame["family"], categories=FAMILIES, ordered=True)
    return frame.sort_values(["family", "scenario", "metric", "perturbation", "model"]).reset_index(drop=True)


def main_metrics(warehouse: ResultStore, catalog: Catalog, version: str) -> dict[str, str]:
    """{scenario: its main accuracy metric}: as the suite version pins them, or for a version made by importing
    HELM runs (holistic_dagster.helm), as the import chose them."""
    if version in catalog.suite_versions():
        return catalog.main_metrics(version)
    imported: dict[str, str] = dict(
        ImportedRuns(warehouse).scenarios(version)[["scenario", "main_metric"]].itertuples(index=False)
    )
    return imported


def regression_alpha(catalog: Catalog, version: str) -> float:
    """The suite's significance level for paired tests; an imported version's is the suites' default."""
    if version in catalog.suite_versions():
        return float(catalog.suite(version).regression_alpha)
    return float(SuiteSpec.model_fields["regression_alpha"].default)


def headline_columns(cells: pd.DataFrame, main_metric: dict[str, str]) -> pd.DataFrame:
    """The cells that enter each family's win rate (metrics.is_headline)."""
    if cells.empty:
        return cells

    def headline(r: Any) -> bool:
        return is_headline(r.family, r.metric, r.perturbation, main_metric.get(r.scenario, ""))

    return cells[cells.apply(headline, axis=1)]


def report_path(warehouse: ResultStore, version: str) -> Path:
    """The first page of a suite version's HTML report: reports/<version>/index.html beside the warehouse (its
    scenario and predictions pages are in the same folder)."""
    return warehouse.path.parent / "reports" / version / "index.html"


def imported_models(warehouse: ResultStore, version: str) -> set[str]:
    """The models of the version whose results were imported from HELM runs (holistic_dagster.helm)."""
    try:
        return ImportedRuns(warehouse).models(version)
    except duckdb.CatalogException:  # a warehouse from before imports
        return set()


def has_statistics(warehouse: ResultStore, version: str) -> bool:
    """The version's summaries were computed (leaderboard_stats holds its cells)."""
    return LeaderboardStats(warehouse).computed(version)


def comparisons(warehouse: ResultStore, version: str) -> pd.DataFrame:
    """The version's paired comparisons of each model with its baseline (the regressions' table)."""
    return Comparisons(warehouse).where(version=version)


def evaluated_counts(warehouse: ResultStore, version: str) -> pd.Series:
    """{scenario: its evaluated original test instances} for the version."""
    return Instances(warehouse).draw_sizes(version)


BORROWED = (
    "in-context examples held out of the evaluated file ({file}), as no train split is here: HELM draws them from "
    "train, so its prompts differ (download the train split to ask HELM's)"
)


def borrowed_pools(warehouse: ResultStore, version: str) -> dict[str, str]:
    """{scenario: note} for each scenario of the version whose prompts showed in-context examples held out of the
    file it evaluates because no train split was here (`train_holdout`, marked on the pool's instances; not a
    split the upstream layout itself makes, as TruthfulQA's first fifth or NaturalQuestions' even lines, which HELM
    makes too): a deviation from a leaderboard that draws them from train, shown with the results (terminal
    leaderboard, report) rather than only in the suite file."""
    frame = Instances(warehouse).borrowed_pools(version)
    # each file's name once: RAFT's subsets each lend from a train.csv of their own
    files = frame.groupby("scenario")["source_uri"].apply(
        lambda uris: ", ".join(dict.fromkeys(Path(u).name for u in uris))
    )
    return {scenario: BORROWED.format(file=names) for scenario, names in files.items()}
