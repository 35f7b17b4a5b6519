"""The verbs that read results: `leaderboard` (the headline tables the report and the Dagster UI show, or every
metric), `compare` (paired tests of two models), `trace` (one score back to its source), `report` (the HTML report),
`query` (read-only SQL) and `views` (a DuckDB file of views over a shared results store)."""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from holistic_dagster.cli.common import (
    DbOption,
    console,
    default_version,
    deployment,
    fail,
    shown,
    shown_on_terminal,
)
from holistic_dagster.errors import HolisticError


def print_leaderboard(deployment, version: str, full: bool, family: str | None = None) -> None:
    """Per family, the headline table the report's first screen and the Dagster UI show (report.tables), models
    as columns; with `full`, every metric of the leaderboard view. Under each table, why cells are missing."""
    from holistic_dagster.metrics import FAMILIES
    from holistic_dagster.report.tables import headline_tables
    from holistic_dagster.results.leaderboard import imported_models, leaderboard, main_metrics
    from holistic_dagster.results.statistics import summary_cells, summary_win_rates

    warehouse = deployment.warehouse()
    frame = leaderboard(warehouse, version, family)
    if frame.empty:
        fail(f"no results for suite version {version!r} in {warehouse.path}")
    imported = imported_models(warehouse, version)
    main = main_metrics(warehouse, deployment.catalog(), version)
    cells = summary_cells(warehouse, version)
    rates = summary_win_rates(warehouse, version, cells, main)
    suite = _suite(deployment, version)
    not_here = _not_here(deployment, suite, set(frame["scenario"]))
    if full:
        tables = {}
    else:
        applicability = warehouse.df("SELECT * FROM applicability WHERE version = ?", [version])
        order = suite.columns if suite else ()
        tables = {t.family: t for t in headline_tables(cells, rates, applicability, main, order)}
    for fam in [f for f in FAMILIES if f in set(frame["family"])]:
        part = frame[frame["family"] == fam]
        applies = part[part["metric"] != ""]
        if not full and fam not in tables and len(applies):
            continue  # none of this family's metrics heads it here (e.g. an imported run without ECE)
        if full:
            models = sorted(part["model"].unique())
            table = _table(fam, version, models, imported)
            won = rates[rates["family"] == fam].set_index("model")["mean_win_rate"]
            if len(won):
                table.add_row("mean win rate", "", *[f"{won[m]:.3f}" if m in won else "-" for m in models])
            for (scenario, metric, perturbation), rows in applies.groupby(["scenario", "metric", "perturbation"]):
                values = {r.model: r for r in rows.itertuples()}
                table.add_row(
                    scenario, escape(_label(metric, perturbation)), *[_full_cell(values.get(m)) for m in models]
                )
        else:
            headline = tables.get(fam)
            # as the report's first screen: the models by mean win rate (best first), then any without one
            ranked = [model for model, *_ in headline.rows] if headline else []
            models = ranked + sorted(set(part["model"]) - set(ranked))
            table = _table(fam, version, models, imported)
            nobody: dict[str, list[str]] = {}  # why no model has a value -> the scenario of each such row
            collapsed = set()
            if headline:
                rate = {model: r for model, r, *_ in headline.rows}
                by_model = {model: row for model, *_, row in headline.rows}
                table.add_row("mean win rate", "", *[_rate(rate.get(m)) for m in models])
                absent = _NotHere(suite if fam == "accuracy" else None, not_here, len(models))
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
        if full or table.row_count:
            console.print(table)
        else:  # nothing applies or has a value: one line, and why below it
            console.print(f"[italic]{fam} (suite {version})[/]: no values")
        shown = (
            None
            if full
            else (
                {(c.scenario, c.metric, c.perturbation) for c in tables[fam].columns} - collapsed
                if fam in tables
                else set()
            )
        )
        _print_notes(part, applies, shown, {} if full else nobody)
        if fam == "accuracy" and suite:
            for name, why in not_here.items():
                console.print(f"  [dim]{escape(name)}: {escape(why)}[/]")


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

    def __init__(self, suite, absent: dict[str, str], models: int):
        self.names = list(absent) if suite else []
        self.order = (list(suite.columns) or [*suite.scenarios, *suite.not_here]) if suite else []
        self.models = models

    def rows_before(self, table: Table, scenario: str | None) -> None:
        """Adds the entries the order puts before `scenario` (None: every one left)."""
        stop = self.order.index(scenario) if scenario in self.order else len(self.order)
        for name in [n for n in self.names if n not in self.order[stop:]]:
            table.add_row(escape(name), "", *["no data (offline)"] * self.models)
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
    """A report.tables.Cell as the terminal shows it: the value, its 95% CI, n."""
    if cell is None:
        return "-"
    if cell.value is None:  # the note says why (e.g. no group words in the generations)
        return "not computed" if cell.note.startswith("not computed") else "undefined"
    return f"{cell.text} {cell.ci} n={cell.n}".replace("  ", " ")


def _full_cell(row) -> str:
    """A leaderboard view row (every metric) as the terminal shows it."""
    if row is None:
        return "-"
    import pandas as pd  # here: the processes `holistic evaluate` spawns import this module, and need no pandas

    if pd.isna(row.value):  # the note says why (e.g. no group words in the generations)
        return "not computed" if str(row.note).startswith("not computed") else "undefined"
    return f"{row.value:.3f} n={row.count}"


def leaderboard(
    version: Annotated[Optional[str], typer.Option(help="suite version (default: the newest)")] = None,
    family: Annotated[Optional[str], typer.Option(help="only this metric family (accuracy, calibration, ...)")] = None,
    all_metrics: Annotated[bool, typer.Option("--all", help="every metric, not just each family's headline")] = False,
    db: DbOption = None,
) -> None:
    """Print the leaderboard of a suite version, one table per metric family."""
    try:
        chosen = deployment(db)
        version = version or default_version(chosen)
        print_leaderboard(chosen, version, full=all_metrics, family=family)
    except HolisticError as e:
        fail(str(e))
    from holistic_dagster.results.leaderboard import report_path

    if not all_metrics:
        console.print("\nEvery metric under every perturbation: [cyan]holistic leaderboard --all[/]")
    console.print(
        f"Per scenario and instance, with prompts and outputs: the report (holistic report --version {version}) "
        f"at {report_path(chosen.warehouse(), version)}"
    )


def compare(
    model_a: Annotated[str, typer.Argument(help="the baseline (e.g. the previous revision)")],
    model_b: Annotated[str, typer.Argument(help="the model compared with it")],
    version: Annotated[Optional[str], typer.Option(help="suite version (default: the newest)")] = None,
    alpha: Annotated[Optional[float], typer.Option(help="significance level (default: the suite's)")] = None,
    db: DbOption = None,
) -> None:
    """B against A on the same instances, per scenario and metric family: difference, 95% CI, p, verdict."""
    from holistic_dagster.results.leaderboard import main_metrics, regression_alpha
    from holistic_dagster.results.scores import compare_models

    chosen = deployment(db)
    try:
        version = version or default_version(chosen)
        catalog = chosen.catalog()
        warehouse = chosen.warehouse()
        level = alpha if alpha is not None else regression_alpha(catalog, version)
        main = main_metrics(warehouse, catalog, version)
        frame = compare_models(warehouse, version, model_a, model_b, level, main_metric=main)
    except HolisticError as e:
        fail(str(e))
    if frame.empty:
        fail(f"no instances scored for both {model_a!r} and {model_b!r} in suite version {version!r}")
    table = Table(title=f"{model_b} vs {model_a} (suite {version}, alpha {level:g}, paired)", title_justify="left")
    for column in ("family", "scenario", "metric", "n", model_a, model_b, "diff", "95% CI", "p", "verdict"):
        table.add_column(column, justify="right" if column in ("n", "p", "diff") else "left")
    colour = {"better": "green", "worse": "red"}
    for r in frame.sort_values(["family", "scenario"]).itertuples():
        label = f"{r.metric} [{r.perturbation}]" if r.perturbation else r.metric
        table.add_row(
            r.family,
            r.scenario,
            escape(label),
            str(r.n),
            f"{r.mean_a:.3f}",
            f"{r.mean_b:.3f}",
            f"{r.diff:+.3f}",
            f"[{r.ci_low:+.3f}, {r.ci_high:+.3f}]",
            f"{r.p_value:.4f}",
            f"[{colour.get(r.verdict, 'dim')}]{r.verdict.replace('significant', 'sig.')}[/]",
        )
    console.print(table)
    worse = frame[frame["verdict"] == "worse"]
    if len(worse):
        console.print(f"[red]{model_b} is significantly worse on {len(worse)} (scenario, family) pair(s).[/]")


def trace(
    model: Annotated[str, typer.Argument(help="registered model")],
    scenario: Annotated[str, typer.Argument(help="scenario")],
    instance: Annotated[str, typer.Argument(help="instance id (see the scores view)")],
    metric: Annotated[str, typer.Argument(help="metric, e.g. exact_match")],
    version: Annotated[Optional[str], typer.Option(help="suite version (default: the newest)")] = None,
    family: Annotated[Optional[str], typer.Option(help="family, where the metric is in several")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the chain as JSON")] = False,
    db: DbOption = None,
) -> None:
    """Trace a score: completion with log-probabilities, prompt, instance, source file and checksum, run."""
    import json

    from rich.panel import Panel

    from holistic_dagster.config.redaction import redact  # rows stored before errors were redacted
    from holistic_dagster.results.trace import trace_score

    chosen = deployment(db)
    try:
        version = version or default_version(chosen)
        chain = trace_score(chosen.warehouse(), model, version, scenario, instance, metric, family or "")
    except HolisticError as e:
        fail(str(e))
    if as_json:
        print(json.dumps(chain, indent=2, default=str))
        return
    sc, co, pr, src, pv = (
        chain["score"],
        chain["completion"],
        chain["prompt"],
        chain["source_file"],
        chain["provenance"],
    )
    label = f"{sc['family']} / {sc['metric']}" + (f" [{sc['perturbation']}]" if sc["perturbation"] else "")
    console.print(
        Panel(
            f"{escape(label)} = [bold]{sc['value']:.4f}[/]  for {model} on {scenario} {instance} (suite {version})\n"
            f"prediction: {escape(repr(sc['prediction']))}" + (f"\nscored by {sc['scorer']}" if sc["scorer"] else ""),
            title="score",
        )
    )
    tokens = Table("token", "logprob", "top alternatives", title=None, box=None)
    for t in co["tokens"]:
        alternatives = ", ".join(f"{escape(repr(k))} {v:.2f}" for k, v in list(t["top"].items())[:5])
        tokens.add_row(escape(repr(t["token"])), f"{t['logprob']:.3f}", alternatives)
    console.print(
        Panel(
            f"text: {escape(repr(co['text']))}\nsum logprob {co['logprob']:.3f}, finish {co['finish_reason'] or '-'}, "
            f"{co['latency_s']:.3f} s, request {co['request_id']}"
            + (f"\n[red]error: {shown(redact(co['error']))}[/]" if co["error"] else ""),
            title="completion",
        )
    )
    if co["tokens"]:
        console.print(tokens)
    method = f"{pr['adapter_method']} ({pr['template']}), {pr['num_train_instances']} in-context examples"
    continuation = f"\n[dim]scored continuation:[/] {escape(repr(pr['continuation']))}" if pr["kind"] == "score" else ""
    console.print(Panel(shown(pr["prompt"]) + continuation, title=f"prompt: {method}"))
    for key, title in (
        ("evaluated_instance", "evaluated (perturbed) instance"),
        ("instance", "instance"),
        ("original_instance", "original instance"),
    ):
        inst = chain[key]
        if not inst:
            continue
        refs = "\n".join(f"  {'*' if r['correct'] else ' '} {shown(r['output'])}" for r in inst["references"])
        head = f"{inst['instance_id']} ({inst['split']}{', ' + inst['subset'] if inst['subset'] else ''})"
        if inst["perturbation"]:
            head += f", perturbation {inst['perturbation']} of {inst['original_instance_id']}"
        console.print(
            Panel(f"{shown(inst['input'])}\n[dim]references (* correct):[/]\n{refs}", title=f"{title}: {shown(head)}")
        )
    console.print(
        Panel(
            f"{shown(src['uri'])}, record {shown(chain['instance']['record'])}\nsha256 {src['sha256']}\n"
            f"revision {shown(src['revision'])}",
            title="source file",
        )
    )
    imported = chain["imported_run"]
    origin = (
        f"imported from HELM run {shown(imported['run_name'])}\n  {shown(imported['folder'])}\n"
        + "\n".join(f"  {f['name']} sha256 {f['sha256']}" for f in imported["files"])
        if imported
        else f"Dagster run {pv['dagster_run_id']}"
    )
    console.print(
        Panel(
            f"backend {pv['backend']}, model revision {pv['model_revision']}, batch {pv['batch_size']}\n"
            f"decoding {pv['decoding']}\nhardware {pv['hardware']}\n{origin}",
            title="produced by",
        )
    )


def report(
    version: Annotated[Optional[str], typer.Option(help="suite version (default: the newest)")] = None,
    db: DbOption = None,
    predictions: Annotated[
        Optional[int], typer.Option(min=1, help="instances per scenario on the predictions pages (default 20)")
    ] = None,
) -> None:
    """Write the HTML report of a suite version (statistics and regressions are refreshed first): a folder
    whose index.html is the leaderboard per family, with a page per scenario and its predictions."""
    from holistic_dagster.stages import StageContext
    from holistic_dagster.stages.summaries import find_regressions, summarize, write_report

    chosen = deployment(db)
    try:
        version = version or default_version(chosen)
        stage = StageContext(chosen.warehouse(), chosen.catalog(), chosen)
        summarize(stage, version)
        find_regressions(stage, version)
        written = write_report(stage, version, predictions)
    except HolisticError as e:
        fail(str(e))
    console.print(
        f"Report for suite {version}: [cyan]{written['path']}[/] ({written['num_files']} pages, "
        f"{written['num_bytes'] / 2**20:.1f} MiB; open it in a browser, no server needed)"
    )


def query(
    sql: Annotated[str, typer.Argument(help="SQL to run (read-only)")],
    db: DbOption = None,
    as_csv: Annotated[bool, typer.Option("--csv", help="print CSV instead of a table")] = False,
) -> None:
    """Run SQL on a read-only connection to the warehouse (tables, and views scores, leaderboard, lineage)."""

    try:
        columns, rows = deployment(db).warehouse().query(sql)
    except HolisticError as e:
        fail(str(e))
    except Exception as e:  # a SQL error from DuckDB: show it plainly
        fail(f"{type(e).__name__}: {e}")
    if not columns:
        return
    if as_csv:  # the data as it is, unless it goes to a terminal, which would obey its control characters
        show = shown_on_terminal if sys.stdout.isatty() else (lambda v: v)
        writer = csv.writer(sys.stdout)
        writer.writerow([show(c) for c in columns])
        writer.writerows([[show(v) if isinstance(v, str) else v for v in row] for row in rows])
        return
    table = Table(*[shown(c) for c in columns])
    for row in rows:
        table.add_row(*["" if v is None else shown(str(v)) for v in row])
    console.print(table)
    console.print(f"{len(rows)} row(s)")


def views(
    out: Annotated[Path, typer.Argument(help="the DuckDB file to write (views only)")],
    db: DbOption = None,
) -> None:
    """Write a small DuckDB file of views over a shared results store's files (tables, and views scores,
    leaderboard, lineage), for any DuckDB client: `duckdb -readonly OUT`. It reads the files as they are now
    and later: no refresh needed."""
    from holistic_dagster.warehouse.shared import SharedStore

    try:
        store = deployment(db).warehouse()
    except HolisticError as e:
        fail(str(e))
    if not isinstance(store, SharedStore):
        fail(f"{store.path} is a DuckDB file already: open it with any DuckDB client (`duckdb -readonly {store.path}`)")
    try:
        path = store.write_views_file(out)
    except (HolisticError, OSError) as e:
        fail(str(e))
    console.print(f"views over [cyan]{store.path}[/] written to [cyan]{path}[/]: `duckdb -readonly {path}`")
