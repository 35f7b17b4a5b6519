"""The report's own table: the full table of a scenario, every metric of every family under every perturbation,
models as columns (the headline tables are results.headline's, which the terminal and the Dagster UI show too)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from holistic_dagster.metrics import FAMILIES, WORST
from holistic_dagster.results.headline import Cell, cell_of


@dataclass
class ScenarioTable:
    models: list[str]
    rows: list[tuple[str, str, str, list[Cell | None]]]  # family, metric, perturbation, a cell per model


def scenario_table(cells: pd.DataFrame, scenario: str, models: list[str]) -> ScenarioTable:
    """Every cell of one scenario: by family (FAMILIES order), then metric; unperturbed first, the worst case
    next, then each perturbation."""
    part = cells[cells["scenario"] == scenario]
    order = {f: i for i, f in enumerate(FAMILIES)}
    keys = part[["family", "metric", "perturbation"]].drop_duplicates()
    keys = sorted(
        keys.itertuples(index=False),
        key=lambda k: (order[k.family], k.metric, (k.perturbation != "", k.perturbation != WORST, k.perturbation)),
    )
    by_key = {(r.model, r.family, r.metric, r.perturbation): cell_of(r) for r in part.itertuples(index=False)}
    rows = [(k.family, k.metric, k.perturbation, [by_key.get((m, *k)) for m in models]) for k in keys]
    return ScenarioTable(models, rows)
