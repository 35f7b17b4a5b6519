"""`holistic efficient ...`: evaluation sized to the decision (efficient/). `validate` measures, on a models x items
matrix (a file in the shared HELM Classic format, or a scenario's results in the warehouse), how well k anchors
estimate held-out models and how many instances the sequential gate needs; `plan` says how many paired instances
a regression verdict at a tolerance needs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from holistic_dagster.cli.common import DbOption, VersionOption, console, default_version, deployment, fail
from holistic_dagster.errors import HolisticError

app = typer.Typer(
    rich_markup_mode=None,  # click's plain help: flags shown as flags, text wrapped between words
    no_args_is_help=True,
    help="Evaluation sized to the decision: validate anchor estimates and the sequential gate, plan sample sizes.",
)

MatrixOption = Annotated[
    Optional[Path],
    typer.Option(help="a models x items JSON matrix (the format of ../shared/data/helm_classic_responses)"),
]
ScenarioOption = Annotated[
    Optional[str], typer.Option(help="instead of --matrix: a scenario's results in the warehouse (its main metric)")
]


def _matrix(matrix: Path | None, scenario: str | None, version: str | None, db: Path | None):
    from holistic_dagster.efficient.validation import read_matrix

    if (matrix is None) == (scenario is None):
        fail("give either --matrix FILE or --scenario NAME (a scenario's results in the warehouse)")
    if matrix is not None:
        return read_matrix(matrix)
    from holistic_dagster.results.leaderboard import main_metrics
    from holistic_dagster.results.matrix import scenario_matrix

    chosen = deployment(db)
    version = version or default_version(chosen)
    metric = main_metrics(chosen.warehouse(), chosen.catalog(), version).get(scenario)
    if metric is None:
        fail(f"suite version {version!r} has no scenario {scenario!r}")
    return scenario_matrix(chosen.warehouse(), version, scenario, metric)


@app.command()
def validate(
    matrix: MatrixOption = None,
    scenario: ScenarioOption = None,
    version: VersionOption = None,
    test_models: Annotated[
        Optional[str],
        typer.Option(help="comma-separated models held out together (default: every model in turn)"),
    ] = None,
    anchors: Annotated[int, typer.Option(min=1, help="anchor instances a held-out model answers")] = 100,
    seeds: Annotated[int, typer.Option(min=1, help="anchor draws (and random samples) per held-out model")] = 20,
    level: Annotated[float, typer.Option(min=0.5, max=0.99, help="the stated intervals' level")] = 0.9,
    alpha: Annotated[float, typer.Option(min=0.001, max=0.5, help="the gate's significance level")] = 0.05,
    tolerance: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="the gate's tolerated drop (0.02 = 2 points)")
    ] = 0.0,
    look: Annotated[int, typer.Option(min=1, help="the sequential gate looks every this many instances")] = 25,
    gate: Annotated[
        bool, typer.Option("--gate/--no-gate", help="also validate the sequential gate on every pair of models")
    ] = True,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="write every figure as JSON")] = None,
    db: DbOption = None,
) -> None:
    """Fit on some models, estimate the others from anchors, and compare with their full-draw scores and with
    uniform random samples of as many instances; run the sequential gate on every pair of models against the
    full-draw verdict. Prints a table; --json writes mae, mae_random, kendall_tau, kendall_tau_random,
    interval_coverage, verdict_agreement, false_alarm_rate, mean_fraction_used and more."""
    from holistic_dagster.efficient.validation import validate_estimates, validate_gate

    try:
        data = _matrix(matrix, scenario, version, db)
        held_out = [m.strip() for m in test_models.split(",") if m.strip()] if test_models else None
        result = validate_estimates(data, held_out, anchors, seeds, level).as_json()
        if gate:
            result.update(validate_gate(data, alpha, tolerance, look))
    except (HolisticError, ValueError) as e:
        fail(str(e))
    if json_out is not None:
        json_out.write_text(json.dumps(result, indent=2, allow_nan=False, default=_finite) + "\n", encoding="utf-8")
    console.print(validation_table(result, data.source))


def _finite(value):
    return None if isinstance(value, float) and math.isnan(value) else value


def validation_table(result: dict, source: str) -> Table:
    k, n = result["anchors"], result["n_full"]
    table = Table(title=f"{source}: {k} of {n} instances, {len(result['folds'])} fold(s) x {result['seeds']} seeds")
    table.add_column("figure")
    table.add_column(f"anchors ({result['method']})", justify="right")
    table.add_column(f"random {k}", justify="right")
    table.add_row("mean absolute error (points)", f"{result['mae'] * 100:.2f}", f"{result['mae_random'] * 100:.2f}")
    table.add_row("  ratio to random", f"{result['mae_ratio']:.2f}x", "1.00x")
    table.add_row("Kendall tau with the full draw", _num(result["kendall_tau"]), _num(result["kendall_tau_random"]))
    table.add_row(
        f"pairs {int(result.get('separated_pairs', 0))} apart ≥5 points ordered",
        _share(result["pairs_ordered"]),
        _share(result["pairs_ordered_random"]),
    )
    table.add_row(
        f"{result['level']:.0%} intervals covering the full draw",
        _share(result["interval_coverage"]),
        "",
    )
    if result.get("verdict_agreement") is not None:
        table.add_row(
            f"sequential gate, {result['pairs']} pairs: full-draw verdict reproduced",
            _share(result["verdict_agreement"]),
            "",
        )
        table.add_row("  false alarms (among pairs the full draw passes)", _share(result["false_alarm_rate"]), "")
        table.add_row("  mean share of instances used", _share(result["mean_fraction_used"]), "")
    return table


def _num(value) -> str:
    return "n/a" if value is None or value != value else f"{value:.3f}"


def _share(value) -> str:
    return "n/a" if value is None or value != value else f"{value:.1%}"


@app.command()
def plan(
    tolerance: Annotated[
        float, typer.Option(min=0.0001, max=1.0, help="the drop to detect, as a share (0.005 = half a point)")
    ],
    matrix: MatrixOption = None,
    scenario: ScenarioOption = None,
    version: VersionOption = None,
    power: Annotated[float, typer.Option(min=0.5, max=0.999, help="the chance of finding such a drop")] = 0.8,
    alpha: Annotated[float, typer.Option(min=0.001, max=0.5, help="the gate's significance level (two-sided)")] = 0.05,
    db: DbOption = None,
) -> None:
    """How many paired instances a regression verdict at a tolerance needs (exact McNemar's sample size, Connor
    1987), from the discordance seen between the models already evaluated (the median over their pairs; for scores
    such as F1, their mean squared difference in its place)."""
    import numpy as np

    from holistic_dagster.efficient.sequential import instances_needed

    try:
        data = _matrix(matrix, scenario, version, db)
    except (HolisticError, ValueError) as e:
        fail(str(e))
    rows = data.correct
    rates = [  # the pairs' discordance (0/1): their mean squared difference, which is what it is for scores too
        float(np.nanmean((rows[i] - rows[j]) ** 2))
        for i in range(len(rows))
        for j in range(i + 1, len(rows))
        if np.any(~np.isnan(rows[i]) & ~np.isnan(rows[j]))
    ]
    if not rates:
        fail(f"{data.source}: at least two models with shared instances are needed to see their discordance")
    discordance = float(np.median(rates))
    needed = instances_needed(tolerance, discordance, alpha / 2, power)
    n = len(data.items)
    binary = bool(np.isin(rows[~np.isnan(rows)], (0.0, 1.0)).all())
    differ = f"differ on {discordance:.1%} of instances" if binary else f"differ by {discordance**0.5:.3f} (rms)"
    console.print(
        f"{data.source}: models {differ} (median of {len(rates)} pairs); a drop of "
        f"{tolerance * 100:.2g} points needs {needed:,} paired instances for {power:.0%} power at alpha {alpha} "
        f"(the full draw has {n:,}{': enough' if needed <= n else ': not enough, the gate cannot promise it'})."
    )
