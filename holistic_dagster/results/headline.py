"""The headline of a suite version, the one record the terminal, the Dagster UI and the report render: per family,
models as rows (best mean win rate first), one column per scenario headline (metrics.is_headline: the column the
scenario adds to the family's win rate) in the suite's column order, each cell its value with its 95% CI; the legend
says what each headline metric is and which direction is better."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from holistic_dagster.config.catalog import Catalog
from holistic_dagster.metrics import FAMILIES, metric
from holistic_dagster.results.leaderboard import headline_columns, main_metrics
from holistic_dagster.results.statistics import summary_cells, summary_win_rates
from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import Applicability


@dataclass
class Headline:
    """A version's headline tables and what they were made of (cells with their statistics, win rates, which families
    apply where, each scenario's main metric)."""

    version: str
    cells: pd.DataFrame
    rates: pd.DataFrame
    applicability: pd.DataFrame
    main_metric: dict[str, str]
    tables: list[HeadlineTable]


def headline(store: ResultStore, version: str, main_metric: dict[str, str], order: tuple[str, ...] = ()) -> Headline:
    """The version's headline as its stored summaries give it (computed from its scores where they were not);
    `order`: the scenarios' column order (a HELM leaderboard's)."""
    cells = summary_cells(store, version)
    rates = summary_win_rates(store, version, cells, main_metric)
    applicability = Applicability(store).where(version=version)
    tables = headline_tables(cells, rates, applicability, main_metric, order) if len(cells) else []
    return Headline(version, cells, rates, applicability, main_metric, tables)


def suite_headline(store: ResultStore, catalog: Catalog, version: str) -> Headline:
    """headline() with the suite's main metrics and column order (an imported HELM version's: as imported)."""
    order = catalog.suite(version).columns if version in catalog.suite_versions() else ()
    return headline(store, version, main_metrics(store, catalog, version), tuple(order))


def direction(name: str) -> str:
    spec = metric(name)
    if spec.absolute:
        return "closer to 0 is better"
    return "lower is better" if spec.lower_is_better else "higher is better"


def number(value: float | None) -> str:
    """A value as the report prints it: 3 decimals on bounded metrics' scale, fewer digits on large values."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "undefined"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3f}"


@dataclass(frozen=True)
class Cell:
    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    note: str = ""  # why there is no CI, or why the value is undefined
    best: bool = False  # the column's best value (ties: every one of them)
    estimated: bool = False  # estimated from n of n_full instances (an efficient evaluation), never a measurement
    n_full: int | None = None

    @property
    def text(self) -> str:
        return ("≈" if self.estimated and self.value is not None else "") + number(self.value)

    @property
    def ci(self) -> str:
        if self.ci_low is None or self.ci_high is None or self.value is None:
            return ""
        if self.estimated:  # e.g. ≈0.41 ±0.03, 100/567
            half = (self.ci_high - self.ci_low) / 2
            return f"±{number(half)}, {self.n}/{self.n_full}"
        return f"[{number(self.ci_low)}, {number(self.ci_high)}]"


@dataclass(frozen=True)
class Column:
    scenario: str
    metric: str
    perturbation: str


@dataclass
class HeadlineTable:
    family: str
    columns: list[Column]
    rows: list[tuple[str, float | None, int, list[Cell | None]]]  # model, mean win rate, its columns, cells
    legend: list[tuple[str, str, str]]  # metric, what it is, which direction is better
    not_applicable: list[tuple[str, str]] = field(default_factory=list)  # scenario, why


def _float(v: Any) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def cell_of(r: Any) -> Cell:
    """A leaderboard_stats row as a cell; where the value is undefined, the note says why (scenario_metrics' note,
    when the cells carry it)."""
    value = _float(r.value)
    why = getattr(r, "note", "") if value is None else ""
    estimated = getattr(r, "estimated", False) is True
    n_full = int(r.n_full) if estimated and not pd.isna(getattr(r, "n_full", None)) else None
    return Cell(
        value, _float(r.ci_low), _float(r.ci_high), int(r.n), why or r.ci_note, estimated=estimated, n_full=n_full
    )


def _best(values: list[float | None], name: str) -> list[bool]:
    spec = metric(name)
    keyed = [None if v is None else (abs(v) if spec.absolute else v) for v in values]
    present = [v for v in keyed if v is not None]
    if len(present) < 2:
        return [False] * len(values)
    if min(present) == max(present):  # all tied: nothing stands out
        return [False] * len(values)
    target = min(present) if (spec.lower_is_better or spec.absolute) else max(present)
    return [v is not None and v == target for v in keyed]


def headline_tables(
    cells: pd.DataFrame,
    rates: pd.DataFrame,
    applicability: pd.DataFrame,
    main_metric: dict[str, str],
    order: tuple[str, ...] = (),
) -> list[HeadlineTable]:
    """One table per family that has values, in FAMILIES order. `applicability`: the version's rows of the
    table of that name (the families that do not apply to a scenario, and why). `order`: the scenarios' column
    order (a HELM leaderboard's); by name otherwise, and after those it lists."""
    place = {name: k for k, name in enumerate(order)}
    models = sorted(cells["model"].unique())
    heads = headline_columns(cells, main_metric)
    out = []
    for family in FAMILIES:
        part = heads[heads["family"] == family]
        if part.empty:
            continue
        keys = part[["scenario", "metric", "perturbation"]].drop_duplicates().sort_values(["scenario", "metric"])
        columns = sorted(
            (Column(*k) for k in keys.itertuples(index=False)), key=lambda c: place.get(c.scenario, len(place))
        )
        by_key = {(r.model, r.scenario, r.metric, r.perturbation): cell_of(r) for r in part.itertuples(index=False)}
        grid = {m: [by_key.get((m, c.scenario, c.metric, c.perturbation)) for c in columns] for m in models}
        for j, column in enumerate(columns):  # mark each column's best value
            best = _best([cell.value if (cell := grid[m][j]) else None for m in models], column.metric)
            for m, is_best in zip(models, best):
                if is_best and (cell := grid[m][j]) is not None:
                    grid[m][j] = replace(cell, best=True)
        win = rates[rates["family"] == family].set_index("model")
        rows = [
            (m, _float(win["mean_win_rate"].get(m)), int(win["num_columns"].get(m, 0) or 0), grid[m]) for m in models
        ]
        rows.sort(key=lambda r: (-(r[1] if r[1] is not None else -1), r[0]))
        legend = [(name, metric(name).description, direction(name)) for name in sorted({c.metric for c in columns})]
        na = applicability[(applicability["family"] == family) & ~applicability["applies"].astype(bool)]
        out.append(HeadlineTable(family, columns, rows, legend, [(r.scenario, r.detail) for r in na.itertuples()]))
    return out
