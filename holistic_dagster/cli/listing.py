"""`holistic list models|suites|scenarios|metrics`: what there is to evaluate with, each with its description (as
lm-eval's `--tasks list` and `inspect list`); scenarios say whether their data is here."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer
from rich.table import Table

from holistic_dagster.cli.common import DataDirOption, console, deployment, fail, shown


class What(str, Enum):
    models = "models"
    suites = "suites"
    scenarios = "scenarios"
    metrics = "metrics"


def list_things(
    what: Annotated[What, typer.Argument(help="what to list: models, suites, scenarios or metrics")],
    data_dir: DataDirOption = None,
) -> None:
    """List the registered models, the suite versions, the scenarios (and whether their data is here) or the
    metrics, each with its description."""
    from holistic_dagster.errors import HolisticError

    chosen = deployment(data_dir=data_dir)
    try:
        table = {What.models: _models, What.suites: _suites, What.scenarios: _scenarios, What.metrics: _metrics}[what](
            chosen
        )
    except HolisticError as e:
        fail(str(e))
    console.print(table)


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _models(chosen) -> Table:
    table = _table(f"models ({chosen.models_path})", "model", "backend", "path", "description")
    for name, spec in chosen.models().items():
        table.add_row(name, spec.backend, shown(spec.path), shown(spec.description))
    return table


def _suites(chosen) -> Table:
    catalog = chosen.catalog()
    table = _table(f"suite versions ({catalog.root / 'suites'})", "suite", "scenarios", "description")
    for version in catalog.suite_versions():
        suite = catalog.suite(version)
        table.add_row(version, str(len(suite.scenarios)), shown(suite.description))
    return table


def _scenarios(chosen) -> Table:
    from holistic_dagster.scenarios.spec import helm_layout

    catalog = chosen.catalog()
    where = ", ".join(str(d) for d in chosen.data_dirs) or "none: set --data-dir or HOLISTIC_DATA_DIR"
    table = _table(f"scenarios (data folders: {where})", "scenario", "data", "description")
    for name in catalog.scenario_names():
        spec = catalog.scenario(name)
        data = _data_here(spec, chosen.data_dirs)
        if layout := helm_layout(spec):  # the suites with conventions helm read upstream's files instead
            upstream = _data_here(spec.model_copy(update=layout), chosen.data_dirs)
            data += f"; HELM's suites read upstream's layout: {upstream}"
        table.add_row(name, shown(data), shown(spec.description))
    return table


def _data_here(spec, data_dirs) -> str:
    from holistic_dagster.scenarios.sources import missing_data

    if spec.source is None:
        return "generated"
    missing = missing_data(spec, data_dirs, download=False)
    # the first clause of why (the whole says where it looked and how to fetch it: `holistic evaluate` does)
    return "here" if missing is None else missing.split(";")[0]


def _metrics(chosen) -> Table:
    from holistic_dagster.metrics.registry import METRICS

    table = _table("metrics", "metric", "family", "better", "description")
    for metric in sorted(METRICS.values(), key=lambda m: (m.family, m.name)):
        better = "|x| lower" if metric.absolute else ("lower" if metric.lower_is_better else "higher")
        table.add_row(metric.name, metric.family, better, shown(metric.description))
    return table
