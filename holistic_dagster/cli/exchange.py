"""The verbs of results exchange with HELM (holistic_dagster.helm): `holistic import-helm` and `holistic export`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from holistic_dagster.cli.common import DbOption, VersionOption, console, default_version, deployment, fail
from holistic_dagster.errors import HolisticError


def import_helm(
    paths: Annotated[
        list[Path], typer.Argument(help="HELM run folders, or benchmark_output/runs/<suite> folders holding them")
    ],
    version: Annotated[
        Optional[str],
        typer.Option(
            "--suite",
            "--version",
            help="suite version to import into: one of the catalog's (HELM's instances must be its own, to be "
            "compared with our models instance by instance), or a new name (default: helm-<HELM suite>); "
            "--version is its former name",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Import HELM runs (run_spec.json, scenario_state.json, per_instance_stats.json, stats.json) as model
    partitions: instances, prompts, completions, per-instance scores and metrics, with lineage to the files."""
    from holistic_dagster.helm.importing import import_runs

    chosen = deployment(db)
    path = chosen.warehouse_path
    try:
        parts = import_runs(chosen.warehouse(), chosen.catalog(), paths, version)
    except HolisticError as e:
        fail(str(e))
    version = parts[0].frames["imported_runs"]["version"].iat[0]
    table = Table(title=f"imported into suite version {version} ({path})", title_justify="left")
    for column in ("scenario", "model", "HELM runs", "instances", "scores", "metrics"):
        table.add_column(column, justify="right" if column not in ("scenario", "model") else "left")
    skipped: dict[str, int] = {}
    for p in parts:
        f = p.frames
        table.add_row(
            p.scenario, escape(p.model), str(len(p.runs)), str(f["instance_scores"]["instance_id"].nunique()),
            str(len(f["instance_scores"])), str(len(f["scenario_metrics"])),
        )  # fmt: skip
        for what, n in p.skipped.items():
            skipped[what] = skipped.get(what, 0) + n
    console.print(table)
    for what, n in skipped.items():
        console.print(f"  [dim]not imported: {n} {what}[/]")
    _record_in_dagster(chosen, version, parts)
    models = sorted({p.model for p in parts})
    console.print(f"Next: holistic leaderboard --suite {version}")
    if len(models) > 1:
        console.print(f"      holistic compare {models[0]} {models[1]} --suite {version}")
    console.print(f"      holistic report --suite {version}")


def _record_in_dagster(chosen, version: str, parts) -> None:
    """The imported partitions in the Dagster instance `holistic ui` opens (DAGSTER_HOME)."""
    from holistic_dagster.defs import local

    missing = local.record_imported(chosen, version, parts)
    console.print("  [dim]in the Dagster UI (holistic ui): the completions and scores assets, marked as imported[/]")
    if missing:
        console.print(
            f"  [dim]not in the Dagster UI (no asset: not a scenario of the catalog): {', '.join(missing)}[/]"
        )


def export(
    out: Annotated[Path, typer.Option(help="folder to write into: its runs/<suite>/ is HELM's layout")],
    format: Annotated[str, typer.Option("--format", help="the layout to write (helm)")] = "helm",
    version: VersionOption = None,
    suite: Annotated[
        Optional[str], typer.Option("--helm-suite", help="HELM suite name (default: the suite version's)")
    ] = None,
    models: Annotated[
        Optional[list[str]], typer.Option("--model", help="only this model (repeatable; default: every model)")
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="replace the runs an earlier export wrote there (nothing else)")
    ] = False,
    db: DbOption = None,
) -> None:
    """Write a suite version's results as HELM run folders, which HELM's helm-summarize and helm-server read.
    A non-empty runs/<suite>/ is refused unless --replace, which replaces only what an earlier export wrote."""
    from holistic_dagster.helm.exporting import MANIFEST, export_runs

    if format != "helm":
        fail(f"unknown export format {format!r} (known: helm)")
    chosen = deployment(db)
    try:
        version = version or default_version(chosen)
        folder = export_runs(chosen.warehouse(), version, out, suite, models, replace)
    except HolisticError as e:
        fail(str(e))
    runs = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["runs"]
    console.print(f"{len(runs)} HELM runs of suite version {version} written to [cyan]{folder}[/]")
    console.print(f"  HELM reads them: helm-summarize --suite {folder.name} -o {folder.parent.parent}")
