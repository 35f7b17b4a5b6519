"""The `holistic` command, one module per group of verbs (as inspect_ai's _cli/): evaluate.py (demo, evaluate),
results.py (leaderboard, compare, trace, report, query, views), arena.py (arena, vote), serve.py (ui, worker),
exchange.py (import-helm, export), models.py (install-ladder), gate.py (gate), efficient.py (efficient validate,
plan), listing.py (list); common.py holds what they share.
The CLI imports no Dagster: its runs go through defs/local.py."""

from __future__ import annotations

import atexit
import os
import sys
from typing import Annotated

import typer
from rich.markup import escape

from holistic_dagster.cli import arena, efficient, evaluate, exchange, gate, listing, models, results, serve
from holistic_dagster.cli.common import err
from holistic_dagster.errors import HolisticError

app = typer.Typer(
    rich_markup_mode=None,  # click's plain help: flags shown as flags, text wrapped between words
    add_completion=False,
    no_args_is_help=True,
    help="Holistic evaluation of language models on Dagster (HELM-style metric families).",
    pretty_exceptions_enable=False,  # main() prints one line; the traceback only with --debug
)
for name, verb in (
    ("demo", evaluate.demo),
    ("evaluate", evaluate.evaluate),
    ("leaderboard", results.leaderboard),
    ("compare", results.compare),
    ("gate", gate.gate),
    ("trace", results.trace),
    ("report", results.report),
    ("query", results.query),
    ("views", results.views),
    ("import-helm", exchange.import_helm),
    ("export", exchange.export),
    ("arena", arena.arena),
    ("vote", arena.vote),
    ("ui", serve.ui),
    ("worker", serve.worker),
    ("install-ladder", models.install_ladder),
    ("list", listing.list_things),
):
    app.command(name)(verb)
app.add_typer(efficient.app, name="efficient")

_debug = False


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version

        typer.echo(f"holistic {version('holistic-dagster')}")
        raise typer.Exit()


@app.callback()
def _options(
    debug: Annotated[
        bool, typer.Option("--debug", envvar="HOLISTIC_DEBUG", help="show the traceback of an unexpected error")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    global _debug
    _debug = debug
    if debug:  # the runs this process starts show Dagster's own log too (defs/runner.py quiet_logs)
        os.environ["HOLISTIC_DEBUG"] = "1"


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
