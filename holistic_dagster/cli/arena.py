"""The arena's verbs: `holistic arena` (battles judged by the suite's judges, then the ratings) and `holistic vote`
(the human vote page)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from holistic_dagster.cli.common import DbOption, VersionOption, console, default_version, deployment, fail
from holistic_dagster.errors import HolisticError


def arena(
    version: VersionOption = None,
    show: Annotated[bool, typer.Option("--show", help="print the stored ratings; judge nothing")] = False,
    db: DbOption = None,
) -> None:
    """Arena ratings: battles between the models' stored answers on the suite's arena scenarios, judged by its
    judge models in both orders (a Dagster run), then per judge the Bradley-Terry ratings (Elo scale, 95%
    bootstrap CI over prompts), with answer-length style control, online Elo, and the win-rate matrix."""
    chosen = deployment(db)
    try:
        version = version or default_version(chosen)
        if not show and chosen.catalog().suite(version).arena is None:
            fail(f"suite {version!r} has no `arena:` section (assets/suites/{version}.yaml): nothing to judge")
    except HolisticError as e:
        fail(str(e))
    if not show:
        from holistic_dagster.defs import local

        console.print(f"[bold]holistic arena[/]: suite [cyan]{version}[/]")
        try:
            local.arena(chosen, version)
        except HolisticError as e:
            fail(str(e))
    why = (
        f"no arena ratings for suite {version!r} yet: its arena has no judge models and nobody has voted on battles "
        f"with its baseline (`holistic vote --suite {version}`), or fewer than two models answered its arena "
        "scenarios"
    )
    try:
        _print_arena(chosen.warehouse(), version, "" if show else why)
    except HolisticError as e:
        fail(str(e))


def vote(
    version: VersionOption = None,
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

    from holistic_dagster.stages.context import StageContext
    from holistic_dagster.vote import LOCAL_HOSTS, invitations, vote_app

    chosen = deployment(db)
    try:
        version = version or default_version(chosen)
        catalog = chosen.catalog()
        if catalog.suite(version).arena is None:
            fail(f"suite {version!r} has no `arena:` section (assets/suites/{version}.yaml): nothing to vote on")
        key = invitations.vote_key(chosen.home / "vote.key")
        links = {name: invitations.invitation(key, version, name) for name in invite or []}
    except (HolisticError, ValueError) as e:
        fail(str(e))
    app = vote_app(StageContext(chosen.warehouse(), catalog, chosen), version, key,
                   (*LOCAL_HOSTS, *(allowed_host or [])))  # fmt: skip
    console.print(f"[bold]holistic vote[/]: suite [cyan]{version}[/] at [cyan]http://127.0.0.1:{port}/[/]")
    for name, token in links.items():
        console.print(f"  invitation for {name}: [cyan]http://127.0.0.1:{port}/?t={token}[/]")
    if not links:
        console.print("  each voter needs their own link: `holistic vote --invite <name>` prints it")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _print_arena(warehouse, version: str, why_none: str = "") -> None:
    """The arena section of the report (report.arena.arena_tables), in the terminal."""
    from holistic_dagster.report.arena import arena_tables

    judges = arena_tables(warehouse, version)
    if not judges:
        fail(why_none or f"no arena ratings for suite version {version!r} in {warehouse.path}: run `holistic arena`")
    for arena in judges:
        if arena.qualification:
            console.print(f"[bold]{escape(arena.label)}[/]: {escape(arena.qualification)}")
        if not arena.qualified:
            console.print(
                f"  [dim]no ratings: its {arena.num_battles} battles' verdicts are kept (table battles); its "
                "measurement is in judge_qualifications[/]"
            )
            continue
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
