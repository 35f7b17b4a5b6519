"""The `holistic` command: run the demo, show the leaderboard, query the warehouse, open the UI."""

from __future__ import annotations

import atexit
import contextlib
import csv
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from holistic_dagster import settings
from holistic_dagster.errors import HolisticError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Holistic evaluation of language models on Dagster (HELM-style metric families).",
    pretty_exceptions_enable=False,  # main() prints one line; the traceback only with --debug
)
console = Console()
if not console.is_terminal:  # piped or logged: room for the long metric names rather than 80 columns
    console = Console(width=160)
err = Console(stderr=True, soft_wrap=True)  # an error is one line, however long

DbOption = Annotated[
    Optional[Path],
    typer.Option(
        "--db",
        help="DuckDB warehouse file, or the folder of a shared results store (default: $HOLISTIC_WAREHOUSE or "
        "data/warehouse.duckdb)",
    ),
]


def _warehouse_path(db: Path | None) -> Path:
    return db.expanduser().resolve() if db else settings.warehouse_path()


def _dagster_home() -> Path:
    """DAGSTER_HOME (default data/dagster) with the repository's instance configuration linked into it
    (dagster.yaml, or dagster.postgres.yaml when DAGSTER_PG_HOST is set)."""
    home = settings.prepare_dagster_home(
        Path(os.environ.get("DAGSTER_HOME") or settings.home_dir() / "dagster").resolve()
    )
    os.environ["DAGSTER_HOME"] = str(home)
    return home


_debug = False


@app.callback()
def _options(
    debug: Annotated[
        bool, typer.Option("--debug", envvar="HOLISTIC_DEBUG", help="show the traceback of an unexpected error")
    ] = False,
) -> None:
    global _debug
    _debug = debug


def main() -> None:
    """The console entry point: an unexpected error is one line naming it (its traceback with --debug)."""
    try:
        app()
    except SystemExit as e:
        _exit(e.code)
    except HolisticError as e:  # the user's to act on, and it says how: the message alone
        if _debug:
            raise
        err.print(f"[bold red]error:[/] {escape(str(e).strip())}")
        _exit(1)
    except Exception as e:
        if _debug:
            raise
        err.print(f"[bold red]error:[/] {escape(type(e).__name__)}: {escape(str(e).strip())}")
        err.print("[dim](run with --debug, e.g. `holistic --debug demo`, to see where it happened)[/]")
        _exit(1)
    _exit(0)


def _exit(code) -> None:
    """Ends the process as sys.exit(code) would, exit handlers included (atexit: the background processes,
    logging, multiprocessing's finalizers), but without the interpreter's teardown of every loaded module:
    with torch, Dagster and Great Expectations loaded that took 2-3 s after the command had finished. Every
    file the command wrote is closed by then (the warehouse and Dagster's storage commit and close as they go)."""
    if code is not None and not isinstance(code, int):  # as SystemExit does with a message
        print(code, file=sys.stderr)
        code = 1
    if sys.getprofile() is not None or sys.gettrace() is not None:  # a profiler or debugger reports at teardown
        sys.exit(code)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


def _shown(text: str) -> str:
    """Stored text (dataset text, model output, ids) as the terminal shows it: its control characters as pictures
    (an escape sequence in the data must not drive the terminal) and no rich markup taken from it."""
    from holistic_dagster.config.redaction import visible

    return escape(visible(str(text)))


def _shown_on_terminal(text: str) -> str:
    from holistic_dagster.config.redaction import visible

    return visible(text)


def _fail(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(1)


# the demo's models: a real language model and, as a floor beside it, a random-weight model of the same task shape
DEMO_MODELS = ("smollm2-135m-instruct", "demo-gpt2-untrained")

VersionOption = Annotated[
    Optional[str], typer.Option(help="suite version (a file in assets/suites/; default: the newest)")
]
DataDirOption = Annotated[
    Optional[Path], typer.Option(help="folder with upstream data files (default: $HOLISTIC_DATA_DIR)")
]
ForceOption = Annotated[
    bool, typer.Option("--force", help="run every step, also those whose inputs are unchanged since their last run")
]


@app.command()
def demo(
    db: DbOption = None,
    version: VersionOption = None,
    models: Annotated[
        Optional[list[str]],
        typer.Option("--model", help=f"registered model (repeatable; default: {', '.join(DEMO_MODELS)})"),
    ] = None,
    data_dir: DataDirOption = None,
    force: ForceOption = False,
) -> None:
    """The tour: evaluate a real model (SmolLM2-135M-Instruct) and a random-weight floor on the newest suite,
    print the leaderboard per family, and say where the report, the DuckDB file and the UI are."""
    _evaluate(list(models or DEMO_MODELS), version, db, data_dir, tour=True, force=force)


@app.command()
def evaluate(
    models: Annotated[list[str], typer.Option("--model", help="registered model (repeatable)")],
    version: VersionOption = None,
    db: DbOption = None,
    data_dir: DataDirOption = None,
    force: ForceOption = False,
) -> None:
    """Evaluate registered models on a suite version (datasets, then each model, then the leaderboard, the
    regressions and the report) as Dagster runs, and print the leaderboard. A step whose inputs are unchanged
    since its last successful run is skipped (--force runs it)."""
    _evaluate(models, version, db, data_dir, tour=False, force=force)


def _evaluate(
    names: list[str], version: str | None, db: Path | None, data_dir: Path | None, tour: bool, force: bool
) -> None:
    from holistic_dagster.config.deployment import Deployment

    deployment = Deployment.of(warehouse=db, data_dirs=[data_dir] if data_dir else None)
    path = deployment.warehouse_path
    home = _dagster_home()
    started = time.perf_counter()
    version = version or _default_version()
    try:
        registry = deployment.models()
        catalog = deployment.catalog()
        catalog.suite(version)
    except HolisticError as e:
        _fail(str(e))
    for name in names:
        if name not in registry:
            _fail(f"unknown model {name!r}: not in the model registry (known: {', '.join(registry)})")
    label = "demo" if tour else "evaluate"
    if not force and (unchanged := _all_unchanged(deployment, catalog, version, names, registry)):
        # nothing to run: no Dagster, no model (a warm re-run costs a warehouse read), unless a killed run waits
        # to be marked failed
        console.print(
            f"[bold]holistic {label}[/]: suite [cyan]{version}[/], nothing changed (--force runs every step again)"
        )
        _mark_killed_runs(home)
        for line in unchanged:
            console.print(f"[bold]>[/] {line}")
        _finish(path, version, home, started, tour)
        return
    from holistic_dagster.clients.registry import start_model_processes
    from holistic_dagster.quality import gx as validation
    from holistic_dagster.report import plots

    # what takes seconds to load (Great Expectations, each local model) loads in processes of its own, on the
    # other core, while this one loads Dagster and builds the datasets; matplotlib loads with what CPU is left
    validation.start_background()
    start_model_processes([registry[name] for name in names])
    plots.start_background()
    from dagster import DagsterInstance

    from holistic_dagster.definitions import build_definitions
    from holistic_dagster.defs.resources import HolisticResource
    from holistic_dagster.defs.runner import evaluate_suite

    defs = build_definitions(catalog, HolisticResource.of(deployment, show_progress=True))
    console.print(f"[bold]holistic {label}[/]: suite [cyan]{version}[/]")
    for name in names:
        console.print(
            f"  [bold]{name}[/] ({registry[name].backend}): {escape(registry[name].description or registry[name].path)}"
        )
    if tour:
        console.print(
            f"  Sample sizes are small so the demo runs in minutes on a laptop CPU: see assets/suites/{version}.yaml. "
            "Every cell below carries its n; `holistic leaderboard` and the report add 95% bootstrap CIs."
        )
    try:
        evaluate_suite(
            defs,
            DagsterInstance.get(),
            version,
            names,
            lambda line: console.print(f"[bold]>[/] {line}"),
            catalog=catalog,
            skip_unchanged=not force,
        )
    except HolisticError as e:
        _fail(str(e))
    _finish(path, version, home, started, tour)


def _mark_killed_runs(home: Path) -> None:
    """Marks failed the in-process runs whose process was killed (their marks say so without loading Dagster)."""
    from holistic_dagster.defs import ledger

    if not ledger.killed(home):
        return
    from dagster import DagsterInstance

    from holistic_dagster.defs.runner import fail_abandoned_runs

    with DagsterInstance.get() as instance:
        if failed := fail_abandoned_runs(instance):
            runs = ", ".join(failed)
            console.print(f"[bold]>[/] marked {len(failed)} run(s) failed whose process was killed: {runs}")


def _all_unchanged(deployment, catalog, version: str, names: list[str], registry: dict) -> list[str]:
    """One line per step when every step of the evaluation can be skipped (automation.freshness), else []."""
    from holistic_dagster.automation import freshness

    warehouse = deployment.warehouse()
    lines = []
    for label, inputs in freshness.suite_steps(deployment, version, names, registry):
        step = freshness.mark_skippable(warehouse, catalog, inputs())
        if not step.skip_reason:
            return []
        lines.append(f"{label}: skipped, {step.skip_reason}")
    return lines


def _finish(path: Path, version: str, home: Path, started: float, tour: bool) -> None:
    _print_leaderboard(path, version, full=False)
    from holistic_dagster.results.leaderboard import report_path
    from holistic_dagster.warehouse import open_warehouse

    console.print(f"\n{'Demo' if tour else 'Evaluation'} finished in {time.perf_counter() - started:.0f} s.")
    console.print(f"Report (HTML, opens offline): [cyan]{report_path(open_warehouse(path), version)}[/]")
    console.print(f"Results (DuckDB): [cyan]{path}[/]")
    console.print(
        "  holistic query \"SELECT scenario, model, metric, value FROM leaderboard WHERE family = 'accuracy'\""
    )
    console.print(f"Dagster runs and asset checks: DAGSTER_HOME={home}; open the UI with [cyan]holistic ui[/]")


def _print_leaderboard(path: Path, version: str, full: bool, family: str | None = None) -> None:
    from holistic_dagster.config.catalog import Catalog
    from holistic_dagster.helm.importing import BACKEND as HELM_BACKEND
    from holistic_dagster.metrics import is_headline
    from holistic_dagster.results.leaderboard import leaderboard, main_metrics
    from holistic_dagster.warehouse import open_warehouse

    warehouse = open_warehouse(path)
    frame = leaderboard(warehouse, version, family)
    if frame.empty:
        _fail(f"no results for suite version {version!r} in {path}")
    # each cell's 95% bootstrap CI and each family's mean win rate, where the summaries have been computed
    stats = warehouse.df(
        "SELECT family, scenario, metric, perturbation, model, n AS count, ci_low, ci_high "
        "FROM leaderboard_stats WHERE version = ?",
        [version],
    )
    # a CI computed over another n (the cell was re-scored since the summaries ran) is not shown
    frame = frame.merge(stats, how="left", on=["family", "scenario", "metric", "perturbation", "model", "count"])
    rates = warehouse.df("SELECT family, model, mean_win_rate FROM win_rates WHERE version = ?", [version])
    catalog = Catalog()
    # the short view: the cells that enter each family's win rate (metrics.is_headline)
    if version in catalog.suite_versions():
        main_metric = {s: _main_metric(catalog, s, version) for s in frame["scenario"].unique()}  # one read each
    else:  # a version imported from HELM
        main_metric = main_metrics(warehouse, catalog, version)
    imported = set(frame.loc[frame["backend"] == HELM_BACKEND, "model"])
    for fam, part in frame.groupby("family", sort=True, observed=True):
        applies = part[part["metric"] != ""]
        if not full and len(applies):
            keep = applies.apply(
                lambda r: is_headline(fam, r.metric, r.perturbation, main_metric.get(r.scenario, "")), axis=1
            )
            applies = applies[keep]
        if applies.empty and (part["metric"] != "").any():
            continue  # none of this family's metrics heads it here (e.g. an imported run without ECE)
        table = Table(title=f"{fam} (suite {version})", title_justify="left")
        table.add_column("scenario", style="bold")
        table.add_column("metric", no_wrap=True)
        models = sorted(part["model"].unique())
        for model in models:
            table.add_column(escape(model) + (" (HELM run)" if model in imported else ""), justify="right")
        won = rates[rates["family"] == fam].set_index("model")["mean_win_rate"]
        if len(won):
            table.add_row("mean win rate", "", *[f"{won[m]:.3f}" if m in won else "-" for m in models])
        for (scenario, metric, perturbation), rows in applies.groupby(["scenario", "metric", "perturbation"]):
            values = {r.model: r for r in rows.itertuples()}
            label = f"{metric} [{perturbation}]" if perturbation else metric
            table.add_row(scenario, escape(label), *[_cell(values.get(m)) for m in models])
        console.print(table)
        for note, rows in part[part["metric"] == ""].groupby("note"):  # one line per reason, under the table
            console.print(f"  [dim]{escape(note)}: {', '.join(sorted(rows['scenario'].unique()))}[/]")
        for scorer in sorted(set(applies["scorer"]) - {""}):
            console.print(f"  [dim]scored by {escape(scorer)}[/]")
        undefined = applies[applies["value"].isna()]
        for note, rows in undefined.groupby("note"):
            console.print(f"  [dim]{escape(note)} ({len(rows)} of the cells above)[/]")


def _cell(row) -> str:
    if row is None:
        return "-"
    import pandas as pd  # here: the processes `holistic evaluate` spawns import this module, and need no pandas

    if pd.isna(row.value):  # the note says why (e.g. no group words in the generations)
        return "not computed" if str(row.note).startswith("not computed") else "undefined"
    ci = "" if pd.isna(row.ci_low) else f" [{row.ci_low:.2f}, {row.ci_high:.2f}]"
    return f"{row.value:.3f}{ci} n={row.count}"


def _default_version() -> str:
    from holistic_dagster.config.catalog import Catalog

    return Catalog().newest_version()


def _main_metric(catalog, scenario: str, version: str) -> str:
    """The scenario's main accuracy metric as the suite version pins it (a language_modeling pin's is
    bits_per_byte); "" for one without (e.g. BOLD) or no longer in the catalog."""
    try:
        return catalog.resolved_scenario(version, scenario)[0].main_metric
    except HolisticError:
        pass
    try:  # no longer in the suite version: the scenario's own
        return catalog.scenario(scenario).main_metric
    except HolisticError:
        return ""


@app.command("leaderboard")
def leaderboard_command(
    version: Annotated[Optional[str], typer.Option(help="suite version (default: the newest)")] = None,
    family: Annotated[Optional[str], typer.Option(help="only this metric family (accuracy, calibration, ...)")] = None,
    all_metrics: Annotated[bool, typer.Option("--all", help="every metric, not just each family's headline")] = False,
    db: DbOption = None,
) -> None:
    """Print the leaderboard of a suite version, one table per metric family."""
    try:
        _print_leaderboard(_warehouse_path(db), version or _default_version(), full=all_metrics, family=family)
    except HolisticError as e:
        _fail(str(e))


@app.command()
def compare(
    model_a: Annotated[str, typer.Argument(help="the baseline (e.g. the previous revision)")],
    model_b: Annotated[str, typer.Argument(help="the model compared with it")],
    version: Annotated[Optional[str], typer.Option(help="suite version (default: the newest)")] = None,
    alpha: Annotated[Optional[float], typer.Option(help="significance level (default: the suite's)")] = None,
    db: DbOption = None,
) -> None:
    """B against A on the same instances, per scenario and metric family: difference, 95% CI, p, verdict."""
    from holistic_dagster.config.catalog import Catalog
    from holistic_dagster.results.leaderboard import main_metrics, regression_alpha
    from holistic_dagster.results.scores import compare_models
    from holistic_dagster.warehouse import open_warehouse

    version = version or _default_version()
    try:
        catalog = Catalog()
        warehouse = open_warehouse(_warehouse_path(db))
        level = alpha if alpha is not None else regression_alpha(catalog, version)
        main = main_metrics(warehouse, catalog, version)
        frame = compare_models(warehouse, version, model_a, model_b, level, main_metric=main)
    except HolisticError as e:
        _fail(str(e))
    if frame.empty:
        _fail(f"no instances scored for both {model_a!r} and {model_b!r} in suite version {version!r}")
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


@app.command()
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
    from holistic_dagster.warehouse import open_warehouse

    version = version or _default_version()
    try:
        chain = trace_score(
            open_warehouse(_warehouse_path(db)), model, version, scenario, instance, metric, family or ""
        )
    except HolisticError as e:
        _fail(str(e))
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
            + (f"\n[red]error: {_shown(redact(co['error']))}[/]" if co["error"] else ""),
            title="completion",
        )
    )
    if co["tokens"]:
        console.print(tokens)
    method = f"{pr['adapter_method']} ({pr['template']}), {pr['num_train_instances']} in-context examples"
    continuation = f"\n[dim]scored continuation:[/] {escape(repr(pr['continuation']))}" if pr["kind"] == "score" else ""
    console.print(Panel(_shown(pr["prompt"]) + continuation, title=f"prompt: {method}"))
    for key, title in (
        ("evaluated_instance", "evaluated (perturbed) instance"),
        ("instance", "instance"),
        ("original_instance", "original instance"),
    ):
        inst = chain[key]
        if not inst:
            continue
        refs = "\n".join(f"  {'*' if r['correct'] else ' '} {_shown(r['output'])}" for r in inst["references"])
        head = f"{inst['instance_id']} ({inst['split']}{', ' + inst['subset'] if inst['subset'] else ''})"
        if inst["perturbation"]:
            head += f", perturbation {inst['perturbation']} of {inst['original_instance_id']}"
        console.print(
            Panel(f"{_shown(inst['input'])}\n[dim]references (* correct):[/]\n{refs}", title=f"{title}: {_shown(head)}")
        )
    console.print(
        Panel(
            f"{_shown(src['uri'])}, record {_shown(chain['instance']['record'])}\nsha256 {src['sha256']}\n"
            f"revision {_shown(src['revision'])}",
            title="source file",
        )
    )
    imported = chain["imported_run"]
    origin = (
        f"imported from HELM run {_shown(imported['run_name'])}\n  {_shown(imported['folder'])}\n"
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


@app.command()
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
    from holistic_dagster.warehouse import open_warehouse

    version = version or _default_version()
    try:
        stage = StageContext(open_warehouse(_warehouse_path(db)))
        summarize(stage, version)
        find_regressions(stage, version)
        written = write_report(stage, version, predictions)
    except HolisticError as e:
        _fail(str(e))
    console.print(
        f"Report for suite {version}: [cyan]{written['path']}[/] ({written['num_files']} pages, "
        f"{written['num_bytes'] / 2**20:.1f} MiB; open it in a browser, no server needed)"
    )


@app.command()
def query(
    sql: Annotated[str, typer.Argument(help="SQL to run (read-only)")],
    db: DbOption = None,
    as_csv: Annotated[bool, typer.Option("--csv", help="print CSV instead of a table")] = False,
) -> None:
    """Run SQL on a read-only connection to the warehouse (tables, and views scores, leaderboard, lineage)."""
    from holistic_dagster.warehouse import open_warehouse

    try:
        columns, rows = open_warehouse(_warehouse_path(db)).query(sql)
    except HolisticError as e:
        _fail(str(e))
    except Exception as e:  # a SQL error from DuckDB: show it plainly
        _fail(f"{type(e).__name__}: {e}")
    if not columns:
        return
    if as_csv:  # the data as it is, unless it goes to a terminal, which would obey its control characters
        shown = _shown_on_terminal if sys.stdout.isatty() else (lambda v: v)
        writer = csv.writer(sys.stdout)
        writer.writerow([shown(c) for c in columns])
        writer.writerows([[shown(v) if isinstance(v, str) else v for v in row] for row in rows])
        return
    table = Table(*[_shown(c) for c in columns])
    for row in rows:
        table.add_row(*["" if v is None else _shown(str(v)) for v in row])
    console.print(table)
    console.print(f"{len(rows)} row(s)")


@app.command()
def views(
    out: Annotated[Path, typer.Argument(help="the DuckDB file to write (views only)")],
    db: DbOption = None,
) -> None:
    """Write a small DuckDB file of views over a shared results store's files (tables, and views scores,
    leaderboard, lineage), for any DuckDB client: `duckdb -readonly OUT`. It reads the files as they are now
    and later: no refresh needed."""
    from holistic_dagster.warehouse import open_warehouse
    from holistic_dagster.warehouse.shared import SharedStore

    try:
        store = open_warehouse(_warehouse_path(db))
    except HolisticError as e:
        _fail(str(e))
    if not isinstance(store, SharedStore):
        _fail(
            f"{store.path} is a DuckDB file already: open it with any DuckDB client (`duckdb -readonly {store.path}`)"
        )
    try:
        path = store.write_views_file(out)
    except (HolisticError, OSError) as e:
        _fail(str(e))
    console.print(f"views over [cyan]{store.path}[/] written to [cyan]{path}[/]: `duckdb -readonly {path}`")


from holistic_dagster.cli.exchange import export, import_helm  # noqa: E402  (the verbs of results exchange)

app.command("import-helm")(import_helm)
app.command("export")(export)


@app.command("arena")
def arena_command(
    version: Annotated[Optional[str], typer.Option(help="suite version (default: the newest)")] = None,
    show: Annotated[bool, typer.Option("--show", help="print the stored ratings; judge nothing")] = False,
    db: DbOption = None,
) -> None:
    """Arena ratings: battles between the models' stored answers on the suite's arena scenarios, judged by its
    judge models in both orders (a Dagster run), then per judge the Bradley-Terry ratings (Elo scale, 95%
    bootstrap CI over prompts), with answer-length style control, online Elo, and the win-rate matrix."""
    path = _warehouse_path(db)
    version = version or _default_version()
    if not show:
        from dagster import DagsterInstance

        from holistic_dagster.config.catalog import Catalog
        from holistic_dagster.definitions import build_definitions
        from holistic_dagster.defs.resources import HolisticResource
        from holistic_dagster.defs.runner import run_arena

        _dagster_home()
        try:
            catalog = Catalog()
            if catalog.suite(version).arena is None:
                _fail(f"suite {version!r} has no `arena:` section (assets/suites/{version}.yaml): nothing to judge")
            defs = build_definitions(catalog, HolisticResource(warehouse_path=str(path), show_progress=True))
            console.print(f"[bold]holistic arena[/]: suite [cyan]{version}[/]")
            run_arena(defs, DagsterInstance.get(), version)
        except HolisticError as e:
            _fail(str(e))
    why = (
        f"no arena ratings for suite {version!r} yet: its arena has no judge models and nobody has voted on battles "
        f"with its baseline (`holistic vote --version {version}`), or fewer than two models answered its arena "
        "scenarios"
    )
    try:
        _print_arena(path, version, "" if show else why)
    except HolisticError as e:
        _fail(str(e))


@app.command()
def vote(
    version: Annotated[Optional[str], typer.Option(help="suite version (default: the newest)")] = None,
    invite: Annotated[
        Optional[list[str]], typer.Option(help="print the invitation link of this voter (repeatable), one per person")
    ] = None,
    port: Annotated[int, typer.Option(help="port on 127.0.0.1")] = 8765,
    allowed_host: Annotated[
        Optional[list[str]],
        typer.Option(help="another host name the page answers to, e.g. behind a reverse proxy (repeatable)"),
    ] = None,
    db: DbOption = None,
) -> None:
    """Serve the arena's human vote page: a question and two anonymous answers from the suite's battle
    schedule, each vote recorded with the voter its invitation link names (table `votes`), the models revealed
    to that voter after each vote. The arena_votes sensor (under `holistic ui`) then fits the ratings again;
    `holistic arena` does it at once."""
    import uvicorn

    from holistic_dagster.config.catalog import Catalog
    from holistic_dagster.stages.context import StageContext
    from holistic_dagster.vote import LOCAL_HOSTS, invitations, vote_app
    from holistic_dagster.warehouse import open_warehouse

    version = version or _default_version()
    try:
        catalog = Catalog()
        if catalog.suite(version).arena is None:
            _fail(f"suite {version!r} has no `arena:` section (assets/suites/{version}.yaml): nothing to vote on")
        key = invitations.vote_key()
        links = {name: invitations.invitation(key, version, name) for name in invite or []}
    except (HolisticError, ValueError) as e:
        _fail(str(e))
    app = vote_app(StageContext(open_warehouse(_warehouse_path(db)), catalog), version, key,
                   (*LOCAL_HOSTS, *(allowed_host or [])))  # fmt: skip
    console.print(f"[bold]holistic vote[/]: suite [cyan]{version}[/] at [cyan]http://127.0.0.1:{port}/[/]")
    for name, token in links.items():
        console.print(f"  invitation for {name}: [cyan]http://127.0.0.1:{port}/?t={token}[/]")
    if not links:
        console.print("  each voter needs their own link: `holistic vote --invite <name>` prints it")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _print_arena(path: Path, version: str, why_none: str = "") -> None:
    """The arena section of the report (report.arena.arena_tables), in the terminal."""
    from holistic_dagster.report.arena import arena_tables
    from holistic_dagster.warehouse import open_warehouse

    judges = arena_tables(open_warehouse(path), version)
    if not judges:
        _fail(why_none or f"no arena ratings for suite version {version!r} in {path}: run `holistic arena`")
    for arena in judges:
        table = Table(title=f"arena ratings, {arena.label} (suite {version})", title_justify="left")
        columns = (
            "model",
            "Bradley-Terry [95% CI]",
            "style-controlled",
            "online Elo",
            "battles",
            "wins",
            "mean answer tokens",
        )
        for column in columns:
            table.add_column(column, justify="left" if column == "model" else "right")
        for r in arena.rows:
            star = lambda rating: "*" if rating.unbounded else ""  # noqa: E731
            table.add_row(
                escape(r.model),
                f"{r.bradley_terry.text}{star(r.bradley_terry)} {r.bradley_terry.ci}",
                f"{r.style.text}{star(r.style)}",
                r.online.text,
                str(r.num_battles),
                r.wins,
                r.mean_answer_tokens,
            )
        console.print(table)
        console.print(
            f"  [dim]Bradley-Terry by maximum likelihood (ties half), Elo scale, {arena.baseline} = 1000; CI: "
            "bootstrap over prompts. Online Elo depends on the order of battles; Bradley-Terry does not.[/]"
        )
        if arena.human:
            since = (
                f"; {arena.num_cast} cast so far (`holistic arena` fits them again)"
                if arena.num_cast != arena.num_battles
                else ""
            )
            console.print(f"  [dim]fitted on {arena.num_battles} vote(s) by {arena.num_voters} voter(s){since}[/]")
        else:
            console.print(
                f"  [dim]{arena.num_battles} battles: {arena.no_verdict} without a verdict (not votes); position "
                f"inconsistency {arena.inconsistency} (a verdict that flips with the order counts as a tie)[/]"
            )
        if arena.any_unbounded:
            console.print(
                "  [dim]* unbounded: never lost (or never won) against the baseline's group here; its rating only says "
                "above (below) all, and style control is unreliable while one is unbounded[/]"
            )
        grid = Table(title="win rate of row against column (ties half)", title_justify="left")
        grid.add_column("")
        for model, _ in arena.matrix:
            grid.add_column(escape(model), justify="right")
        for model, cells in arena.matrix:
            grid.add_row(escape(model), *[c.text for c in cells])
        console.print(grid)


@app.command()
def ui(port: Annotated[int, typer.Option(help="webserver port")] = 3000) -> None:
    """Start the Dagster UI and daemon (dagster dev) on this repository's workspace; Ctrl-C (or SIGTERM)
    stops it and everything it started."""
    home = _dagster_home()
    dagster = Path(sys.executable).with_name("dagster")
    args = [str(dagster), "dev", "-w", str(settings.REPO_ROOT / "workspace.yaml"), "-p", str(port)]
    console.print(f"DAGSTER_HOME={home}\n{' '.join(args)}")
    raise typer.Exit(_supervise(args))


@app.command()
def worker(
    queues: Annotated[
        str, typer.Option(help="comma-separated queues to consume (default: resources/celery.yaml's cpu and requests)")
    ] = "",
    name: Annotated[str, typer.Option(help="worker name; the host name is appended (name@host)")] = "holistic",
    concurrency: Annotated[int, typer.Option(help="steps this worker runs at once (one process each)")] = 1,
) -> None:
    """Start a Celery worker for scale-out (HOLISTIC_EXECUTOR=celery): it runs the steps that runs send to its
    queues, on the broker named in resources/celery.yaml, with this checkout's code. See docs/scaling.md."""
    from holistic_dagster.config.deployment import Deployment

    try:
        config = Deployment().celery()
        config.broker()  # a clear error now, not Celery's retry loop against localhost
    except HolisticError as e:
        _fail(str(e))
    queues = queues or f"{config.cpu_queue},{config.requests_queue}"
    args = [sys.executable, "-m", "celery", "-A", "holistic_dagster.defs.celery_app", "worker", "-Q", queues]
    args += ["-n", f"{name}@%h", "-c", str(concurrency), "--loglevel", "INFO", "--without-gossip", "--without-mingle"]
    console.print(f"[bold]holistic worker[/] {name}: queues {queues} on {config.shown_broker()}")
    sys.stdout.flush()
    os.execv(sys.executable, args)  # Celery's own signal handling (TERM: finish the running step, then stop)


def _supervise(args: list[str], grace_s: float = 30) -> int:
    """Runs `args` in a session of its own until it exits or we are told to stop (SIGINT, SIGTERM, SIGHUP).
    `dagster dev` shuts its webserver, daemon and code servers down on Ctrl-C, but a SIGTERM sent to it alone
    left them running as orphans: so every stop signal reaches it as Ctrl-C; if it is still running `grace_s`
    later, it and everything it started are terminated, then killed; and whatever it started that outlives it
    is terminated, then killed, too."""
    import signal
    import subprocess

    import psutil

    proc: subprocess.Popen | None = None
    started: dict[int, psutil.Process] = {}  # every descendant seen, kept past its parent's exit
    stop_asked: list[float] = []

    def note_descendants() -> None:
        with contextlib.suppress(psutil.NoSuchProcess):
            started.update({p.pid: p for p in psutil.Process(proc.pid).children(recursive=True)})

    def stop(signum, _frame) -> None:
        stop_asked.append(time.monotonic())
        if proc is not None:
            note_descendants()
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)

    # handlers first: a child inherits an ignored SIGINT (a background job's), but not a handled one
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    proc = subprocess.Popen(args, start_new_session=True)
    if stop_asked:  # stopped while starting it
        stop(signal.SIGTERM, None)
    while True:  # notes the process tree as it grows (code servers start late), until dagster dev exits
        note_descendants()
        try:
            code = proc.wait(timeout=1)
            break
        except subprocess.TimeoutExpired:
            if stop_asked and time.monotonic() - stop_asked[0] > grace_s:  # Ctrl-C was not enough
                _end([psutil.Process(proc.pid), *started.values()], grace_s=10)
    _end(list(started.values()), grace_s)
    return code


def _end(processes: list, grace_s: float) -> None:
    """Waits up to grace_s for the processes to exit, then terminates them, then kills what is left."""
    import psutil

    alive = [p for p in processes if p.is_running()]  # is_running also checks the start time: no reused pid
    _, alive = psutil.wait_procs(alive, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.terminate()
    _, alive = psutil.wait_procs(alive, timeout=10)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()


if __name__ == "__main__":
    main()
