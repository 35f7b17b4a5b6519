"""`holistic demo` and `holistic evaluate`: a suite version evaluated as Dagster runs (datasets, each model, the
summaries), steps whose inputs are unchanged skipped, then the leaderboard and where the detail is."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from holistic_dagster import settings
from holistic_dagster.cli.common import (
    DataDirOption,
    DbOption,
    ForceOption,
    VersionOption,
    console,
    default_version,
    deployment,
    fail,
    invocation,
)
from holistic_dagster.cli.leaderboard_table import print_leaderboard
from holistic_dagster.errors import HolisticError

# the demo's models: a real language model and, as a floor beside it, a random-weight model of the same task shape
DEMO_MODELS = ("smollm2-135m-instruct", "demo-gpt2-untrained")


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


def evaluate(
    models: Annotated[list[str], typer.Option("--model", help="registered model (repeatable)")],
    version: VersionOption = None,
    db: DbOption = None,
    data_dir: DataDirOption = None,
    force: ForceOption = False,
    max_cost: Annotated[
        Optional[float],
        typer.Option(
            min=0.0,
            help="refuse, before any request, a priced model whose evaluation would cost more (USD; over the "
            "suite's max_cost)",
        ),
    ] = None,
    max_eval_instances: Annotated[
        Optional[int],
        typer.Option(
            min=1,
            help="at most this many instances per scenario and subset, drawn as HELM draws that many (helm-run's "
            "-m): a HELM leaderboard suite at a scale a CPU finishes; the cap is part of the run's inputs",
        ),
    ] = None,
    efficient: Annotated[
        bool,
        typer.Option(
            help="answer only --anchors instances per scenario and estimate the full draw's main accuracy metric, "
            "its interval validated on the models already evaluated in full, and every other mean over instances as "
            "the anchors' stratified sample (marked ≈ everywhere); a later run "
            "without it completes the rest, the cache paying for the anchors",
        ),
    ] = False,
    anchors: Annotated[int, typer.Option(min=2, help="with --efficient: anchor instances per scenario")] = 100,
) -> None:
    """Evaluate registered models on a suite version (datasets, then each model, then the leaderboard, the
    regressions and the report) as Dagster runs, and print the leaderboard. A step whose inputs are unchanged
    since its last successful run is skipped (--force runs it)."""
    chosen = anchors if efficient else None
    _evaluate(
        models, version, db, data_dir, tour=False, force=force, max_cost=max_cost, efficient=chosen,
        max_eval_instances=max_eval_instances,
    )  # fmt: skip


def _evaluate(
    names: list[str],
    version: str | None,
    db: Path | None,
    data_dir: Path | None,
    tour: bool,
    force: bool,
    max_cost: float | None = None,
    efficient: int | None = None,
    max_eval_instances: int | None = None,
) -> None:
    chosen = deployment(db, data_dir, max_eval_instances)
    started = time.perf_counter()
    try:
        version = version or default_version(chosen)
        registry = chosen.models()
        chosen.catalog().suite(version)  # a bad suite file fails here, before anything runs
    except HolisticError as e:
        fail(str(e))
    for name in names:
        if name not in registry:
            fail(f"unknown model {name!r}: not in the model registry (known: {', '.join(registry)})")
    label = "demo" if tour else "evaluate"
    if not force and (unchanged := _all_unchanged(chosen, version, names, registry, efficient)):
        # nothing to run: no Dagster, no model (a warm re-run costs a warehouse read), unless a killed run waits
        # to be marked failed
        console.print(
            f"[bold]holistic {label}[/]: suite [cyan]{version}[/], nothing changed (--force runs every step again)"
        )
        _mark_killed_runs(chosen)
        for line in unchanged:
            console.print(f"[bold]>[/] {line}")
        _finish(chosen, version, started, tour, explicit=bool(data_dir))
        return
    from holistic_dagster.clients.registry import start_model_processes
    from holistic_dagster.quality import gx
    from holistic_dagster.report import plots

    # what takes seconds to load (Great Expectations, each local model) loads in processes of its own, on the
    # other core, while this one loads Dagster and builds the datasets; matplotlib loads with what CPU is left
    gx.start_background()
    start_model_processes([registry[name] for name in names])
    plots.start_background()
    from holistic_dagster.defs import local

    console.print(f"[bold]holistic {label}[/]: suite [cyan]{version}[/]")
    for name in names:
        console.print(
            f"  [bold]{name}[/] ({registry[name].backend}): {escape(registry[name].description or registry[name].path)}"
        )
    if tour:
        console.print(
            f"  Sample sizes are small so the demo runs in minutes on a laptop CPU: see assets/suites/{version}.yaml. "
            "Every cell below carries its 95% bootstrap CI and its n."
        )
    try:
        announce = lambda line: console.print(f"[bold]>[/] {line}")  # noqa: E731
        local.evaluate(chosen, version, names, announce, not force, max_cost, efficient)
    except HolisticError as e:
        fail(str(e))
    _finish(chosen, version, started, tour, explicit=bool(data_dir))


def _mark_killed_runs(chosen) -> None:
    """Marks failed the in-process runs whose process was killed (their marks say so without loading Dagster)."""
    from holistic_dagster.defs import ledger

    if not ledger.killed(chosen.dagster_home):
        return
    from holistic_dagster.defs import local

    if failed := local.mark_killed_runs(chosen):
        console.print(f"[bold]>[/] marked {len(failed)} run(s) failed whose process was killed: {', '.join(failed)}")


def _all_unchanged(chosen, version: str, names: list[str], registry: dict, efficient: int | None = None) -> list[str]:
    """One line per step when every step of the evaluation can be skipped (automation.freshness), else []."""
    from holistic_dagster.automation import freshness

    warehouse = chosen.warehouse()
    lines = []
    for label, inputs in freshness.suite_steps(chosen, version, names, registry, efficient):
        step = freshness.mark_skippable(warehouse, inputs())
        if not step.skip_reason:
            return []
        lines.append(f"{label}: skipped, {step.skip_reason}")
    return lines


def _finish(chosen, version: str, started: float, tour: bool, explicit: bool) -> None:
    """The leaderboard and where everything is; data folders given (explicit: --data-dir, else HOLISTIC_DATA_DIR)
    are remembered for the commands after this one, in any shell."""

    print_leaderboard(chosen, version, full=False)
    if (explicit or os.environ.get("HOLISTIC_DATA_DIR")) and settings.remember_data_dirs(list(chosen.data_dirs)):
        shown_dirs = ", ".join(str(d) for d in chosen.data_dirs)
        console.print(f"\nData folders remembered in [cyan]{settings.settings_file()}[/]: {escape(shown_dirs)}")
    from holistic_dagster.results.leaderboard import report_path

    console.print(f"\n{'Demo' if tour else 'Evaluation'} finished in {time.perf_counter() - started:.0f} s.")
    console.print(f"Report (HTML, opens offline): [cyan]{report_path(chosen.warehouse(), version)}[/]")
    console.print(f"Results (DuckDB): [cyan]{chosen.warehouse_path}[/]")
    me = invocation()
    console.print(f"  {me} query \"SELECT scenario, model, metric, value FROM leaderboard WHERE family = 'accuracy'\"")
    console.print(
        f"Dagster runs and asset checks: DAGSTER_HOME={chosen.dagster_home}; open the UI with [cyan]{me} ui[/]"
    )
