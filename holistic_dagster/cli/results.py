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
    VersionOption,
    console,
    default_version,
    deployment,
    fail,
    shown,
    shown_on_terminal,
)
from holistic_dagster.cli.leaderboard_table import print_leaderboard
from holistic_dagster.errors import HolisticError


def leaderboard(
    version: VersionOption = None,
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
        f"Per scenario and instance, with prompts and outputs: the report (holistic report --suite {version}) "
        f"at {report_path(chosen.warehouse(), version)}"
    )


def compare(
    model_a: Annotated[
        str, typer.Argument(metavar="BASELINE", help="the baseline (e.g. the previous revision), as `holistic gate`'s")
    ],
    model_b: Annotated[str, typer.Argument(metavar="CANDIDATE", help="the model compared with it")],
    version: VersionOption = None,
    alpha: Annotated[Optional[float], typer.Option(help="significance level (default: the suite's)")] = None,
    db: DbOption = None,
) -> None:
    """B against A on the same instances, per scenario and metric family: difference, 95% CI, p, verdict."""
    from holistic_dagster.results.efficient import partial_evaluations
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
        partial = partial_evaluations(warehouse, version)
    except HolisticError as e:
        fail(str(e))
    partial = partial[partial["model"].isin([model_a, model_b])]
    estimated = "".join(
        f"; {p.scenario}: {p.model} was evaluated efficiently ({p.n_evaluated} of {p.n_full} instances), never "
        "compared as a measurement"
        for p in partial.itertuples(index=False)
    )
    if frame.empty:
        _say_which_is_missing(chosen, version, (model_a, model_b))
        fail(f"no instances scored for both {model_a!r} and {model_b!r} in suite version {version!r}{estimated}")
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
    for p in partial.itertuples(index=False):
        console.print(
            f"  [dim]{escape(p.scenario)}: {escape(p.model)} was evaluated efficiently ({p.n_evaluated} of "
            f"{p.n_full} instances): not compared (`holistic evaluate --model {escape(p.model)}` completes it)[/]"
        )
    worse = frame[frame["verdict"] == "worse"]
    if len(worse):
        console.print(f"[red]{model_b} is significantly worse on {len(worse)} (scenario, family) pair(s).[/]")


def _say_which_is_missing(chosen, version: str, models: tuple[str, ...]) -> None:
    """Fails naming a model that is not evaluated on the version, and whether it is registered at all."""
    from holistic_dagster.warehouse.access import InstanceScores

    scored = InstanceScores(chosen.warehouse()).models(version)
    registry = chosen.models()
    for model in models:
        if model in scored:
            continue
        if model in registry:
            fail(
                f"{model!r} is not evaluated on suite {version!r}: holistic evaluate --model {model} --suite {version}"
            )
        fail(
            f"{model!r} is not a registered model ({chosen.models_path}) and has no results on suite {version!r} "
            f"(evaluated there: {', '.join(sorted(scored)) or 'none'})"
        )


def trace(
    model: Annotated[str, typer.Argument(help="registered model")],
    scenario: Annotated[str, typer.Argument(help="scenario")],
    instance: Annotated[str, typer.Argument(help="instance id (see the scores view)")],
    metric: Annotated[str, typer.Argument(help="metric, e.g. exact_match")],
    version: VersionOption = None,
    family: Annotated[Optional[str], typer.Option(help="family, where the metric is in several")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the chain as JSON")] = False,
    db: DbOption = None,
) -> None:
    """Trace a score: completion with log-probabilities, prompt, instance, source file and checksum, run."""
    import json

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
    _print_chain(chain, model, scenario, instance, version)


def _print_chain(chain: dict, model: str, scenario: str, instance: str, version: str) -> None:
    """A traced score's chain as panels: the score, the completion and its tokens, the prompt, the instances, the
    source file, and what produced it."""
    from rich.panel import Panel

    _print_answer(chain, model, scenario, instance, version)
    pr, src, pv = chain["prompt"], chain["source_file"], chain["provenance"]
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


def _print_answer(chain: dict, model: str, scenario: str, instance: str, version: str) -> None:
    """The score and the completion it read, with its tokens."""
    from rich.panel import Panel

    from holistic_dagster.config.redaction import redact  # rows stored before errors were redacted

    sc, co = chain["score"], chain["completion"]
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


def report(
    version: VersionOption = None,
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
