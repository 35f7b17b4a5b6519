"""`holistic gate`: a CI step's verdict on a candidate model against its baseline (alerts/gate.py decides,
report/gate.py writes the Markdown); its exit status is the verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from holistic_dagster.cli.common import DbOption, VersionOption, console, default_version, deployment, err
from holistic_dagster.errors import HolisticError


def _alpha(value: float | None) -> float | None:
    # click's FloatRange lets NaN through (every comparison with it is false), and NaN, 0 or 1 decide nothing;
    # click exits 2 on a bad parameter, the gate's "could not decide"
    if value is not None and not 0 < value < 1:
        raise typer.BadParameter(f"a significance level is a number between 0 and 1, exclusive; got {value}")
    return value


SequentialOption = Annotated[
    bool,
    typer.Option(
        "--sequential",
        help="read the paired instances in a seeded order, a batch at a time, and stop as soon as a regression "
        "beyond the rule's drop is established or ruled out (group-sequential exact McNemar; the exact sign-flip "
        "test for scores such as F1): prints the "
        "instances used and the smallest drop they could have found",
    ),
]
ModelsArgument = Annotated[
    list[str],
    typer.Argument(
        metavar="[BASELINE] CANDIDATE",
        help="the model to beat, then the model under test (e.g. a pull request's), in `holistic compare`'s "
        "order; the candidate alone: its baseline is --baseline's, else resources/alerts.yaml's",
    ),
]
LookOption = Annotated[int, typer.Option(min=1, help="with --sequential: instances per batch")]
EvaluateOption = Annotated[
    bool,
    typer.Option(
        "--evaluate",
        help="with --sequential: evaluate the candidate a batch at a time, stopping each scenario where its test "
        "stops (the baseline needs results on the whole draw); its cells are then estimates from that sample",
    ),
]


def gate(
    models: ModelsArgument,
    baseline: Annotated[
        Optional[str], typer.Option(help="the model to beat (default: as resources/alerts.yaml's `baseline` says)")
    ] = None,
    version: VersionOption = None,
    alpha: Annotated[
        Optional[float], typer.Option(callback=_alpha, help="significance level in (0, 1) (default: the suite's)")
    ] = None,
    min_instances: Annotated[
        int, typer.Option(min=1, help="fewer shared instances on a scenario: it cannot be decided")
    ] = 10,
    markdown: Annotated[
        Optional[Path], typer.Option(help="write the summary as Markdown (a PR comment, $GITHUB_STEP_SUMMARY)")
    ] = None,
    report_url: Annotated[
        Optional[str], typer.Option(help="where the version's report is published, for the Markdown's links")
    ] = None,
    sequential: SequentialOption = False,
    look: LookOption = 25,
    evaluate: EvaluateOption = False,
    db: DbOption = None,
) -> None:
    """Gate a candidate on its baseline (paired, per scenario, Holm-corrected; resources/alerts.yaml's metric
    rules). Exit status: 0 no significant regression, 1 regression, 2 could not decide (missing runs, too few
    shared instances, or any error: an unreadable --db, an unwritable --markdown, a bad option)."""
    from holistic_dagster.alerts.gate import UNDECIDED, gate_rules  # every error of this verb exits with it
    from holistic_dagster.alerts.gate import gate as run_gate
    from holistic_dagster.alerts.grading import baselines
    from holistic_dagster.report import PREDICTIONS_PER_SCENARIO, PREDICTIONS_SEED
    from holistic_dagster.report.gate import gate_markdown
    from holistic_dagster.results.leaderboard import main_metrics, regression_alpha, report_path

    baseline, candidate = _baseline_and_candidate(models, baseline)
    try:
        chosen = deployment(db)
        version = version or default_version(chosen)
        catalog, warehouse, alerts = chosen.catalog(), chosen.warehouse(), chosen.alerts()
        if baseline is None:
            baseline = baselines(alerts, chosen.models()).get(candidate)
            if baseline is None:
                err.print(f"{candidate!r} has no baseline in {chosen.alerts_path}: give --baseline")
                raise typer.Exit(UNDECIDED)
        if baseline == candidate:
            err.print(
                f"[bold red]error:[/] {escape(candidate)} is its own baseline: a model compared with itself "
                "cannot regress, so the gate would pass whatever it scored"
            )
            raise typer.Exit(UNDECIDED)
        level = alpha if alpha is not None else regression_alpha(catalog, version)
        if sequential:
            _sequential(chosen, version, candidate, baseline, gate_rules(alerts)[0], level,
                        main_metrics(warehouse, catalog, version), look, evaluate)  # fmt: skip
        if evaluate:
            err.print("[bold red]error:[/] --evaluate goes with --sequential (the batches are the sequential test's)")
            raise typer.Exit(UNDECIDED)
        result = run_gate(
            warehouse, version, candidate, baseline, gate_rules(alerts), level,
            main_metrics(warehouse, catalog, version), min_instances,
        )  # fmt: skip
        text = gate_markdown(
            warehouse, result, report_url or str(report_path(warehouse, version).parent),
            PREDICTIONS_PER_SCENARIO, PREDICTIONS_SEED,
        )  # fmt: skip
        if markdown is not None:
            markdown.write_text(text, encoding="utf-8")
    except typer.Exit:
        raise
    except HolisticError as e:
        err.print(f"[bold red]error:[/] {escape(str(e))}")
        raise typer.Exit(UNDECIDED) from None
    except Exception as e:  # a garbage --db, an unwritable --markdown: not a regression, so never exit status 1
        err.print(f"[bold red]error:[/] {escape(type(e).__name__)}: {escape(str(e).strip())}")
        raise typer.Exit(UNDECIDED) from None
    _print_verdict(result, text)


def _baseline_and_candidate(models: list[str], baseline: str | None) -> tuple[str | None, str]:
    """(the baseline, None where it is to be looked up; the candidate) from `[BASELINE] CANDIDATE` and --baseline."""
    from holistic_dagster.alerts.gate import UNDECIDED

    if len(models) == 2 and baseline in (None, models[0]):
        return models[0], models[1]
    if len(models) == 1:
        return baseline, models[0]
    why = (
        f"the baseline is given twice ({models[0]!r} and --baseline {baseline!r})"
        if len(models) == 2
        else f"give [BASELINE] CANDIDATE, one or two models; got {len(models)}"
    )
    err.print(f"[bold red]error:[/] {escape(why)}")
    raise typer.Exit(UNDECIDED)


def _print_verdict(result, text: str) -> None:
    """The gate's verdict, what it could not decide and each regression or warning; exits with its status."""
    colour = {"pass": "green", "regression": "red", "undecided": "yellow"}[result.verdict]
    console.print(f"[bold {colour}]{result.verdict.upper()}[/]: {escape(text.splitlines()[2])}")
    for why in result.undecided:
        console.print(f"  not decided: {escape(why)}")
    for row in result.regressions + result.warnings:
        console.print(
            f"  [{'red' if row.level == 'critical' else 'yellow'}]{row.level}[/] {row.scenario} {row.metric}: "
            f"{row.baseline_value:.3f} -> {row.value:.3f} ({row.diff:+.3f}, {row.threshold}, "
            f"p {row.p_adjusted:.2g} Holm)"
        )
    raise typer.Exit(result.exit_status)


def _sequential(chosen, version, candidate, baseline, rule, alpha, main, look, evaluate: bool) -> None:
    """`holistic gate --sequential`: the verdict of the sequential mode, its exit status as the gate's."""
    from holistic_dagster.alerts.sequential_gate import sequential_gate_of

    if evaluate:
        from holistic_dagster.defs import local

        announce = lambda line: console.print(f"[bold]>[/] {escape(line)}")  # noqa: E731
        result = local.gate_in_batches(chosen, version, candidate, baseline, rule, alpha, main, look, announce)
    else:
        result = sequential_gate_of(chosen.warehouse(), version, candidate, baseline, rule, alpha, main, look)
    used, full = result.instances_used
    colour = {"pass": "green", "regression": "red", "undecided": "yellow"}[result.verdict]
    share = f" ({used / full:.0%})" if full else ""
    console.print(
        f"[bold {colour}]{result.verdict.upper()}[/] (sequential, alpha {alpha:g} over {len(result.rows)} "
        f"scenario(s), a look every {look}): {used:,} of {full:,} paired instances used{share}"
    )
    for row in result.rows:
        r = row.result
        console.print(
            f"  {escape(row.scenario)} {escape(row.metric)}: {r.verdict} after {r.stopped_at} of {r.n_full} "
            f"({r.reason}); {r.diff * 100:+.1f} points ({r.baseline_only} baseline-only, {r.candidate_only} "
            f"candidate-only); {_detectable(r.detectable)}"
        )
    for why in result.undecided:
        console.print(f"  not decided: {escape(why)}")
    raise typer.Exit(result.exit_status)


def _detectable(drop: float) -> str:
    """What a pass on the instances used rules out (a drop past 100 points: nothing)."""
    if not drop < 1:
        return "too few instances to find any drop (80% power)"
    return f"could have found a drop of {drop * 100:.1f} points or more (80% power)"
