"""The leaderboard in the terminal: per family, the headline table the report's first screen and the Dagster UI show
(results.headline), models as columns, or every metric of the leaderboard view; under each table, why cells are
missing, and a suite's entries without results (HELM's leaderboards' "no data (offline)")."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from holistic_dagster.cli.common import console, fail
from holistic_dagster.errors import HolisticError


def print_leaderboard(deployment, version: str, full: bool, family: str | None = None) -> None:
    """Per family, the headline table the report's first screen and the Dagster UI show (results.headline), models
    as columns; with `full`, every metric of the leaderboard view. Under each table, why cells are missing."""
    from holistic_dagster.metrics import FAMILIES
    from holistic_dagster.results.headline import suite_headline
    from holistic_dagster.results.leaderboard import borrowed_pools, imported_models, leaderboard

    if family is not None and family not in FAMILIES:
        fail(f"unknown metric family {family!r}: the families are {', '.join(FAMILIES)}")
    warehouse = deployment.warehouse()
    frame = leaderboard(warehouse, version, family)
    if frame.empty:
        versions = deployment.catalog().suite_versions()
        if version not in versions:  # (an imported HELM run's version has no suite file, but has results)
            fail(f"unknown suite {version!r}: no suite file and no results (the suites: {', '.join(versions)})")
        what = f"family {family!r} of suite {version!r}" if family else f"suite {version!r}"
        fail(f"no results for {what} in {warehouse.path}: evaluate a model first (holistic evaluate --suite {version})")
    imported = imported_models(warehouse, version)
    head = suite_headline(warehouse, deployment.catalog(), version)
    rates = head.rates
    suite = _suite(deployment, version)
    not_here = _not_here(deployment, suite, set(frame["scenario"]))
    tables = {} if full else {t.family: t for t in head.tables}
    for fam in [f for f in FAMILIES if f in set(frame["family"])]:
        part = frame[frame["family"] == fam]
        applies = part[part["metric"] != ""]
        if not full and fam not in tables and len(applies):
            continue  # none of this family's metrics heads it here (e.g. an imported run without ECE)
        nobody: dict[str, list[str]] = {}  # why no model has a value -> the scenario of each such row
        collapsed: set = set()
        if full:
            table = _full_table(fam, version, part, applies, rates, imported)
        else:
            absent = _NotHere(suite if fam == "accuracy" else None, not_here)
            table = _headline_table(fam, version, part, tables.get(fam), imported, absent, nobody, collapsed)
        if full or table.row_count:
            console.print(table)
        else:  # nothing applies or has a value: one line, and why below it
            console.print(f"[italic]{fam} (suite {version})[/]: no values")
        heads = {(c.scenario, c.metric, c.perturbation) for c in tables[fam].columns} if fam in tables else set()
        _print_notes(part, applies, None if full else heads - collapsed, nobody)
        if fam == "accuracy" and suite:
            for name, why in not_here.items():
                console.print(f"  [dim]{escape(name)}: {escape(why)}[/]")
        if fam == "accuracy":
            for name, why in borrowed_pools(warehouse, version).items():
                console.print(f"  [dim]{escape(name)}: {escape(why)}[/]")


def _full_table(fam: str, version: str, part, applies, rates, imported: set[str]) -> Table:
    """Every metric of a family's leaderboard view, models as columns."""
    models = sorted(part["model"].unique())
    table = _table(fam, version, models, imported)
    won = rates[rates["family"] == fam].set_index("model")["mean_win_rate"]
    if len(won):
        table.add_row("mean win rate", "", *[f"{won[m]:.3f}" if m in won else "-" for m in models])
    for (scenario, metric, perturbation), rows in applies.groupby(["scenario", "metric", "perturbation"]):
        values = {r.model: r for r in rows.itertuples()}
        table.add_row(scenario, escape(_label(metric, perturbation)), *[_full_cell(values.get(m)) for m in models])
    return table


def _headline_table(fam: str, version: str, part, headline, imported, absent, nobody: dict, collapsed: set) -> Table:
    """A family's headline table as the report's first screen: the models by mean win rate (best first), then any
    without one; a column no model has a value for is left out, its reason in `nobody`, its key in `collapsed`."""
    ranked = [model for model, *_ in headline.rows] if headline else []
    models = ranked + sorted(set(part["model"]) - set(ranked))
    table = _table(fam, version, models, imported)
    if not headline:
        return table
    rate = {model: r for model, r, *_ in headline.rows}
    by_model = {model: row for model, *_, row in headline.rows}
    table.add_row("mean win rate", "", *[_rate(rate.get(m)) for m in models])
    for j, column in enumerate(headline.columns):
        absent.rows_before(table, column.scenario)
        label = _label(column.metric, column.perturbation)
        cells_ = [by_model[m][j] if m in by_model else None for m in models]
        if all(c is None or c.value is None for c in cells_):
            why = next((c.note for c in cells_ if c is not None and c.note), "no value")
            nobody.setdefault(why, []).append(column.scenario)
            collapsed.add((column.scenario, column.metric, column.perturbation))
            continue
        table.add_row(column.scenario, escape(label), *[_headline_cell(c) for c in cells_])
    absent.rows_before(table, None)
    return table


def _print_notes(part, applies, shown: set | None, nobody: dict[str, list[str]]) -> None:
    """Under a family's table: the rows no model has a value for (`nobody`: why -> their scenarios), why rows do not
    apply, what a priced model cost, which scorer scored, and why cells are undefined (`shown`: the headline cells
    on screen; None: every cell)."""
    for why, rows_ in nobody.items():  # one line per reason: each scenario with its number of such rows
        where = ", ".join(f"{s} ({rows_.count(s)})" for s in dict.fromkeys(rows_))
        why = escape(why.removeprefix("undefined: "))
        console.print(f"  [dim]undefined for every model on {len(rows_)} row(s) ({why}): {escape(where)}[/]")
    for note, rows in part[part["metric"] == ""].groupby("note"):  # one line per reason, under the table
        console.print(f"  [dim]{escape(note)}: {', '.join(sorted(rows['scenario'].unique()))}[/]")
    costs = applies[(applies["metric"] == "total_cost_usd") & (applies["perturbation"] == "")]
    for model, rows_ in costs.groupby("model"):  # a priced model: what the whole suite version cost
        console.print(
            f"  {escape(model)}: ${rows_['value'].sum():.4f} at its registry price over {len(rows_)} scenario(s), "
            f"{int(rows_['count'].sum())} requests (total_cost_usd; cost_usd per instance)"
        )
    for scorer in sorted(set(applies["scorer"]) - {""}):
        console.print(f"  [dim]scored by {escape(scorer)}[/]")
    undefined = applies[applies["value"].isna()]
    if shown is not None and len(undefined):  # of the cells shown: the headline ones
        keys = zip(undefined["scenario"], undefined["metric"], undefined["perturbation"])
        undefined = undefined.loc[[k in shown for k in keys]]
    for note, rows in undefined.groupby("note"):
        console.print(f"  [dim]{escape(note)} ({len(rows)} of the cells above)[/]")


def _suite(deployment, version: str):
    """The version's suite file (None: results of a version this catalog has no file for, such as imported runs)."""
    try:
        return deployment.catalog().suite(version)
    except HolisticError:
        return None


def _not_here(deployment, suite, evaluated: set[str]) -> dict[str, str]:
    """{entry: why} for a suite's entries without results: its not_here ones, and the optional scenarios whose data
    is not here (`holistic evaluate` skipped them)."""
    skipped = deployment.runnable(suite.version)[1] if suite else {}
    gone = {name: f"no data (offline): {why}" for name, why in skipped.items() if name not in evaluated}
    return {**suite.not_here, **gone} if suite else {}


class _NotHere:
    """A suite's entries without results (_not_here) as rows of its accuracy table at their place in the suite's
    column order: "no data (offline)" for every model, never a zero."""

    def __init__(self, suite, absent: dict[str, str]):
        self.names = list(absent) if suite else []
        self.order = (list(suite.columns) or [*suite.scenarios, *suite.not_here]) if suite else []

    def rows_before(self, table: Table, scenario: str | None) -> None:
        """Adds the entries the order puts before `scenario` (None: every one left)."""
        stop = self.order.index(scenario) if scenario in self.order else len(self.order)
        for name in [n for n in self.names if n not in self.order[stop:]]:
            table.add_row(escape(name), "", *["no data (offline)"] * (len(table.columns) - 2))  # a cell per model
            self.names.remove(name)


def _table(family: str, version: str, models: list[str], imported: set[str]) -> Table:
    table = Table(title=f"{family} (suite {version})", title_justify="left")
    table.add_column("scenario", style="bold")
    table.add_column("metric", no_wrap=True)
    for model in models:
        table.add_column(escape(model) + (" (HELM run)" if model in imported else ""), justify="right")
    return table


def _label(metric: str, perturbation: str) -> str:
    return f"{metric} [{perturbation}]" if perturbation else metric


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _headline_cell(cell) -> str:
    """A results.headline.Cell as the terminal shows it: the value, its 95% CI, n."""
    if cell is None:
        return "-"
    if cell.value is None:  # the note says why (e.g. no group words in the generations)
        return "not computed" if cell.note.startswith("not computed") else "undefined"
    if cell.estimated:  # ≈value ±half, answered/full: never read as a measurement
        return f"{cell.text} {cell.ci}"
    return f"{cell.text} {cell.ci} n={cell.n}".replace("  ", " ")


def _full_cell(row) -> str:
    """A leaderboard view row (every metric) as the terminal shows it."""
    if row is None:
        return "-"
    import pandas as pd  # here: the processes `holistic evaluate` spawns import this module, and need no pandas

    if pd.isna(row.value):  # the note says why (e.g. no group words in the generations)
        return "not computed" if str(row.note).startswith("not computed") else "undefined"
    if getattr(row, "estimated", False) is True:
        return f"≈{row.value:.3f} {row.count}/{int(row.n_full)}"
    return f"{row.value:.3f} n={row.count}"
